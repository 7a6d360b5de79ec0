// The Messages surface against a scripted engine: exact statuses, headers, bodies and SSE event graphs.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import type { EngineEvent } from "../../server/engine/types.js";
import { answer, FakeEngine, outcome } from "../support/fake-engine.js";
import { makePdf } from "../support/make-pdf.js";
import { sseEvents } from "../support/sse-events.js";
import { buildTestApp, postJson, type TestApp } from "../support/test-app.js";

let t: TestApp;
let engine: FakeEngine;

beforeAll(async () => {
  engine = new FakeEngine();
  t = await buildTestApp(engine);
});
afterAll(async () => t.close());

const hello = { model: "svc", max_tokens: 100, messages: [{ role: "user", content: "Hi" }] };

const post = (body: unknown, headers: Record<string, string> = {}, url = "/v1/messages") => postJson(t, url, body, headers);

const lastRequest = () => engine.requests.at(-1)!;

/** A run that calls one tool. */
function toolRun(args = '{"city":"Oslo"}'): EngineEvent[] {
  return [
    { type: "start", mode: "fast", promptTokens: 30, cachedTokens: 0 },
    { type: "tool_call.start", index: 0, id: "call_abc123", name: "get_weather" },
    { type: "tool_call.delta", index: 0, argumentsDelta: args.slice(0, 5) },
    { type: "tool_call.delta", index: 0, argumentsDelta: args.slice(5) },
    { type: "tool_call.end", index: 0, arguments: args },
    {
      type: "done",
      outcome: outcome({
        mode: "fast",
        stopReason: "tool_calls",
        toolCalls: [{ id: "call_abc123", name: "get_weather", arguments: args }],
        usage: { promptTokens: 30, cachedTokens: 0, completionTokens: 9, reasoningTokens: 0 },
      }),
    },
  ];
}

const weatherTool = { name: "get_weather", description: "Weather", input_schema: { type: "object", properties: { city: { type: "string" } } } };

describe("authentication and headers", () => {
  it.each([
    ["missing", {}],
    ["wrong", { "x-api-key": "sk-svc-00000000000000000000000000000000" }],
    ["truncated", { "x-api-key": "TRUNCATE" }],
    ["a wrong bearer", { "x-api-key": "", authorization: "Bearer nope" }],
  ])("a %s key gets 401 authentication_error in the Anthropic shape", async (_label, headers) => {
    const h = headers as Record<string, string>;
    const key = h["x-api-key"] === "TRUNCATE" ? t.key.slice(0, -2) : h["x-api-key"];
    const res = await t.app.inject({
      method: "POST",
      url: "/v1/messages",
      headers: { ...(key ? { "x-api-key": key } : {}), ...(h.authorization ? { authorization: h.authorization } : {}) },
      payload: hello,
    });
    expect(res.statusCode).toBe(401);
    expect(res.headers["content-type"]).toContain("application/json");
    expect(res.headers["request-id"]).toMatch(/^req_/);
    expect(res.json()).toEqual({
      type: "error",
      error: { type: "authentication_error", message: expect.stringContaining("API key"), details: { error_code: "invalid_api_key" } },
      request_id: res.headers["request-id"],
    });
  });

  it("takes the key from x-api-key (0.x SDKs) or Authorization: Bearer (1.x SDKs)", async () => {
    engine.script = () => answer("Hello");
    expect((await post(hello)).statusCode).toBe(200);
    const bearer = await t.app.inject({ method: "POST", url: "/v1/messages", headers: { authorization: `Bearer ${t.key}` }, payload: hello });
    expect(bearer.statusCode).toBe(200);
  });

  it("checks the key before the body and before the version header", async () => {
    const res = await post({ messages: [] }, { "x-api-key": "nope", "anthropic-version": "yesterday" });
    expect(res.statusCode).toBe(401);
  });

  it("accepts date-formatted anthropic-version and svc-version headers, and any anthropic-beta", async () => {
    const variants: Array<Record<string, string>> = [
      { "anthropic-version": "2023-06-01" },
      { "anthropic-version": "2026-10-21" },
      { "svc-version": "2026-09-08" },
      { "anthropic-version": "2023-06-01", "anthropic-beta": "prompt-caching-2024-07-31,token-counting-2024-11-01" },
      {},
    ];
    for (const headers of variants) expect((await post(hello, headers)).statusCode).toBe(200);
  });

  it.each([
    ["anthropic-version", "latest"],
    ["anthropic-version", "2023-6-1"],
    ["svc-version", "2026-02-30"],
    ["svc-version", "v1"],
  ])("a malformed %s header (%s) is a 400 naming it", async (name, value) => {
    const res = await post(hello, { [name]: value });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({
      type: "invalid_request_error",
      message: expect.stringContaining(name),
      details: { error_code: "invalid_version", param: name },
    });
  });
});

describe("host check", () => {
  it("refuses a foreign Host header with 403 permission_error in the Anthropic shape", async () => {
    const res = await post(hello, { host: "evil.example" });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ type: "error", error: { type: "permission_error", details: { error_code: "host_not_allowed" } } });
  });
});

describe("keyless endpoints", () => {
  it("GET /v1/messages/_health needs no key", async () => {
    const res = await t.app.inject({ method: "GET", url: "/v1/messages/_health" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ status: "ok", model: { state: "ready" } });
  });

  it("unknown paths under /v1/messages are Anthropic-shaped 404s", async () => {
    const res = await t.app.inject({ method: "GET", url: "/v1/messages/batches_nope", headers: { "x-api-key": t.key } });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ type: "error", error: { type: "not_found_error" } });
  });
});

describe("validation", () => {
  const many = (n: number) => Array.from({ length: n }, () => ({ role: "user", content: "x" }));
  const withBlocks = (content: unknown[], role = "user") => ({ ...hello, messages: [{ role, content }] });
  it.each([
    [{ max_tokens: 10, messages: hello.messages }, "model"],
    [{ ...hello, model: "" }, "model"],
    [{ ...hello, model: 7 }, "model"],
    [{ model: "svc", messages: hello.messages }, "max_tokens"],
    [{ ...hello, max_tokens: 0 }, "max_tokens"],
    [{ ...hello, max_tokens: 200001 }, "max_tokens"],
    [{ ...hello, max_tokens: 2.5 }, "max_tokens"],
    [{ model: "svc", max_tokens: 10 }, "messages"],
    [{ ...hello, messages: [] }, "messages"],
    [{ ...hello, messages: many(201) }, "messages"],
    [{ ...hello, messages: [{ role: "system", content: "only a system prompt" }] }, "messages"],
    [{ ...hello, stop_sequences: Array.from({ length: 9 }, (_, i) => `s${i}`) }, "stop_sequences"],
    [{ ...hello, stop_sequences: [""] }, "stop_sequences[0]"],
    [{ ...hello, stop_sequences: ["ok", "x".repeat(501)] }, "stop_sequences[1]"],
    [{ ...hello, temperature: 2.1 }, "temperature"],
    [{ ...hello, temperature: -0.1 }, "temperature"],
    [{ ...hello, top_p: 0 }, "top_p"],
    [{ ...hello, top_p: 1.5 }, "top_p"],
    [{ ...hello, top_k: 0 }, "top_k"],
    [{ ...hello, top_k: 1.5 }, "top_k"],
    [{ ...hello, stream: "yes" }, "stream"],
    [{ ...hello, metadata: "m" }, "metadata"],
    [{ ...hello, system: 5 }, "system"],
    [{ ...hello, system: [{ type: "image", source: {} }] }, "system[0].type"],
    [{ ...hello, thinking: { type: "enabled" } }, "thinking.budget_tokens"],
    [{ ...hello, thinking: { type: "enabled", budget_tokens: 0 } }, "thinking.budget_tokens"],
    [{ ...hello, thinking: { type: "enabled", budget_tokens: 100 } }, "thinking.budget_tokens"],
    [{ ...hello, thinking: { type: "sometimes" } }, "thinking.type"],
    [{ ...hello, thinking: { type: "enabled", budget_tokens: 50, display: "full" } }, "thinking.display"],
    [{ ...hello, tools: [{ name: "bad name!", input_schema: { type: "object" } }] }, "tools[0].name"],
    [{ ...hello, tools: [{ name: "t" }] }, "tools[0].input_schema"],
    [{ ...hello, tools: [{ name: "t", input_schema: { type: "string" } }] }, "tools[0].input_schema.type"],
    [{ ...hello, tools: [weatherTool, weatherTool] }, "tools[1].name"],
    [{ ...hello, tools: [{ type: "web_search_20250305", name: "web_search" }] }, "tools[0].type"],
    [{ ...hello, tools: [{ ...weatherTool, cache_control: { type: "persistent" } }] }, "tools[0].cache_control"],
    [{ ...hello, tool_choice: { type: "sometimes" } }, "tool_choice.type"],
    [{ ...hello, tool_choice: { type: "any" } }, "tool_choice.type"],
    [{ ...hello, tools: [weatherTool], tool_choice: { type: "tool" } }, "tool_choice.name"],
    [{ ...hello, tools: [weatherTool], tool_choice: { type: "tool", name: "ghost" } }, "tool_choice.name"],
    [{ ...hello, tool_choice: "auto" }, "tool_choice"],
    [{ ...hello, messages: [{ role: "wizard", content: "hi" }] }, "messages[0].role"],
    [{ ...hello, messages: [{ role: "user" }] }, "messages[0].content"],
    [withBlocks([]), "messages[0].content"],
    [withBlocks([{ type: "text" }]), "messages[0].content[0].text"],
    [withBlocks([{ type: "video", source: {} }]), "messages[0].content[0].type"],
    [withBlocks([{ type: "text", text: "x", cache_control: { type: "ephemeral", ttl: "1d" } }]), "messages[0].content[0].cache_control.ttl"],
    [withBlocks([{ type: "document", source: { type: "ftp", url: "x" } }]), "messages[0].content[0].source.type"],
    [withBlocks([{ type: "document", source: { type: "base64", media_type: "application/pdf" } }]), "messages[0].content[0].source.data"],
    [withBlocks([{ type: "image" }]), "messages[0].content[0].source"],
    [withBlocks([{ type: "tool_result", tool_use_id: "toolu_ghost", content: "r" }]), "messages[0].content[0].tool_use_id"],
    [withBlocks([{ type: "tool_result", content: "r" }]), "messages[0].content[0].tool_use_id"],
    [
      {
        ...hello,
        messages: [
          { role: "user", content: "q" },
          { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "f", input: {} }] },
        ],
      },
      "messages[1].content[0]",
    ],
    [
      {
        ...hello,
        messages: [
          { role: "user", content: "q" },
          { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "f", input: "x" }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1" }] },
        ],
      },
      "messages[1].content[0].input",
    ],
    [
      {
        ...hello,
        messages: [
          { role: "user", content: "q" },
          { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "f", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "tool_use" }] }] },
        ],
      },
      "messages[2].content[0].content[0].type",
    ],
    [{ ...hello, messages: [{ role: "assistant", content: [{ type: "server_tool_use", id: "x" }] }] }, "messages[0].content[0].type"],
  ])("%j → 400 naming %s", async (body, param) => {
    const res = await post(body);
    expect(res.statusCode).toBe(400);
    const json = res.json();
    expect(json.type).toBe("error");
    expect(json.error.type).toBe("invalid_request_error");
    expect(json.error.message).toContain(param);
    expect(json.error.message.length).toBeGreaterThan(param.length + 10);
    expect(json.request_id).toBe(res.headers["request-id"]);
  });

  it("malformed JSON → 400 invalid_request_error", async () => {
    const res = await post('{"model": ');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error", details: { error_code: "invalid_json" } } });
  });

  it("a body over 50 MB → 413 request_too_large", async () => {
    const res = await post(JSON.stringify({ ...hello, messages: [{ role: "user", content: "x".repeat(50 * 1024 * 1024 + 10) }] }));
    expect(res.statusCode).toBe(413);
    expect(res.json().error.type).toBe("request_too_large");
  });

  it("an image that cannot be decoded is a clear 400 naming the block, wherever it is", async () => {
    const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } };
    const direct = await post({ ...hello, messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }, image] }] });
    expect(direct.statusCode).toBe(400);
    expect(direct.json().error).toMatchObject({
      type: "invalid_request_error",
      message: expect.stringMatching(/^messages\[0\]\.content\[1\]: The image could not be decoded/),
      details: { error_code: "invalid_image", param: "messages[0].content[1]" },
    });
    const nested = await post({
      ...hello,
      system: "sys",
      messages: [
        { role: "user", content: "q" },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "f", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "see" }, image] }] },
      ],
    });
    expect(nested.statusCode).toBe(400);
    expect(nested.json().error.details.param).toBe("messages[2].content[0].content[1]");
  });

  it("documents by URL are not fetched; an unknown file id is a 404 naming it", async () => {
    const url = await post({ ...hello, messages: [{ role: "user", content: [{ type: "document", source: { type: "url", url: "https://example.com/a.pdf" } }] }] });
    expect(url.statusCode).toBe(400);
    expect(url.json().error.message).toContain("not fetched");
    expect(url.json().error.details).toEqual({ error_code: "url_not_fetched", param: "messages[0].content[0]" });
    const file = await post({ ...hello, messages: [{ role: "user", content: [{ type: "document", source: { type: "file", file_id: "file-1" } }] }] });
    expect(file.statusCode).toBe(404);
    expect(file.json().error).toMatchObject({ type: "not_found_error", details: { error_code: "file_not_found", param: "messages[0].content[0]" } });
  });

  it("a broken PDF is a 400 invalid_pdf, never a 500", async () => {
    const res = await post({
      ...hello,
      messages: [{ role: "user", content: [{ type: "document", source: { type: "base64", media_type: "application/pdf", data: Buffer.from("nope").toString("base64") } }] }],
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.error_code).toBe("invalid_pdf");
  });
});

describe("mapping to the engine", () => {
  it("picks the mode from the model name; the thinking parameter wins", async () => {
    engine.script = () => answer("ok");
    // The last column is the cap: the name's budget is steered by svc_complexity within [cap / 4, cap]; an
    // explicit budget_tokens is taken exactly ("exact").
    const cases: Array<[string, unknown, "fast" | "thinking", number, "exact"?]> = [
      ["claude-3-5-haiku-latest", undefined, "fast", 0, "exact"],
      ["claude-sonnet-4-5", undefined, "thinking", 4096],
      ["claude-opus-4-1", undefined, "thinking", 65536],
      ["svc", undefined, "thinking", 4096],
      ["my-own-model", undefined, "thinking", 4096],
      ["claude-haiku-4-5", { type: "enabled", budget_tokens: 64 }, "thinking", 64, "exact"],
      ["claude-opus-4-1", { type: "disabled" }, "fast", 0, "exact"],
      ["claude-opus-4-1", { type: "adaptive" }, "thinking", 65536],
      ["claude-haiku-4-5", { type: "adaptive" }, "fast", 0, "exact"],
      ["svc", null, "thinking", 4096],
    ];
    for (const [model, thinking, mode, cap, exact] of cases) {
      const res = await post({ ...hello, model, ...(thinking !== undefined ? { thinking } : {}) });
      expect(res.statusCode).toBe(200);
      expect(res.json().model).toBe(model);
      expect(lastRequest().mode).toBe(mode);
      if (exact) expect(lastRequest().reasoningBudget).toBe(cap);
      else {
        expect(lastRequest().reasoningBudget).toBeGreaterThanOrEqual(Math.floor(cap / 4));
        expect(lastRequest().reasoningBudget).toBeLessThan(cap);
      }
    }
  });

  it("passes sampling, stop sequences, max_tokens and tool choice through; ignores response_format and unknown fields", async () => {
    engine.script = () => answer("ok");
    const res = await post(
      {
        ...hello,
        max_tokens: 77,
        temperature: 0.3,
        top_p: 0.5,
        top_k: 12,
        stop_sequences: ["END", "STOP"],
        metadata: { user_id: "u-1" },
        tools: [weatherTool],
        tool_choice: { type: "any", disable_parallel_tool_use: true },
        response_format: { type: "json_object" },
        output_config: { effort: "low" },
        service_tier: "auto",
        whatever: [1, 2],
      },
      { "anthropic-beta": "interleaved-thinking-2025-05-14" },
    );
    expect(res.statusCode).toBe(200);
    const r = lastRequest();
    expect(r.sampling).toMatchObject({ temperature: 0.3, topP: 0.5, topK: 12 });
    // The surface has no seed; each request samples with its own random one.
    await post(hello);
    expect(lastRequest().sampling.seed).toEqual(expect.any(Number));
    expect(lastRequest().sampling.seed).not.toBe(r.sampling.seed);
    expect(r.stopSequences).toEqual(["END", "STOP"]);
    expect(r.maxTokens).toBe(77);
    expect(r.toolChoice).toEqual({ type: "required" });
    expect(r.parallelToolCalls).toBe(false);
    expect(r.output).toEqual({ type: "text" });
    expect(r.tools).toEqual([{ name: "get_weather", description: "Weather", parameters: weatherTool.input_schema, param: "tools[0].input_schema" }]);
    for (const [choice, expected] of [
      [{ type: "auto" }, { type: "auto" }],
      [{ type: "none" }, { type: "none" }],
      [{ type: "tool", name: "get_weather" }, { type: "tool", name: "get_weather" }],
    ] as const) {
      expect((await post({ ...hello, tools: [weatherTool], tool_choice: choice })).statusCode).toBe(200);
      expect(lastRequest().toolChoice).toEqual(expected);
      expect(lastRequest().parallelToolCalls).toBe(true);
    }
  });

  it("joins system blocks into one system prompt, and keeps system-role messages where they stand", async () => {
    engine.script = () => answer("ok");
    await post({
      ...hello,
      system: [{ type: "text", text: "Rule one." }, { type: "text", text: "Rule two." }],
      messages: [
        { role: "system", content: "Rule three." },
        { role: "user", content: "Hi" },
        { role: "system", content: [{ type: "text", text: "Environment.", cache_control: { type: "ephemeral" } }] },
        { role: "assistant", content: "Hello." },
        { role: "system", content: "A reminder." },
        { role: "user", content: "Again" },
      ],
    });
    expect(lastRequest().messages).toEqual([
      { role: "system", content: [{ type: "text", text: "Rule one." }, { type: "text", text: "Rule two." }] },
      { role: "system", content: [{ type: "text", text: "Rule three." }] },
      { role: "user", content: [{ type: "text", text: "Hi" }] },
      { role: "system", content: [{ type: "text", text: "Environment.", cacheBreakpoint: true }] },
      { role: "assistant", content: [{ type: "text", text: "Hello." }] },
      { role: "system", content: [{ type: "text", text: "A reminder." }] },
      { role: "user", content: [{ type: "text", text: "Again" }] },
    ]);
    await post({ ...hello, system: "Be brief." });
    expect(lastRequest().messages[0]).toEqual({ role: "system", content: [{ type: "text", text: "Be brief." }] });
  });

  it("leaves Claude Code's x-anthropic-billing-header block out of the system prompt", async () => {
    engine.script = () => answer("ok");
    const system = (suffix: string) => [
      { type: "text", text: `x-anthropic-billing-header: cc_version=2.1.330.${suffix}; cc_entrypoint=sdk-cli;` },
      { type: "text", text: "You are a Claude agent.", cache_control: { type: "ephemeral" } },
    ];
    await post({ ...hello, system: system("489") });
    const first = lastRequest().messages;
    await post({ ...hello, system: system("8c6") });
    expect(lastRequest().messages).toEqual(first);
    expect(first[0]).toEqual({ role: "system", content: [{ type: "text", text: "You are a Claude agent.", cacheBreakpoint: true }] });
    // Only a block that starts with the header is left out.
    await post({ ...hello, system: "Mind the x-anthropic-billing-header: it is metadata." });
    expect(lastRequest().messages[0]!.content).toEqual([{ type: "text", text: "Mind the x-anthropic-billing-header: it is metadata." }]);
  });

  it("does not show tools with defer_loading: true to the model", async () => {
    engine.script = () => answer("ok");
    await post({
      ...hello,
      tools: [weatherTool, { name: "DeferredToolPlaceholder", description: "x", input_schema: { type: "object" }, defer_loading: true }],
    });
    expect(lastRequest().tools.map((t) => t.name)).toEqual(["get_weather"]);
    const bad = await post({ ...hello, tools: [{ ...weatherTool, defer_loading: "yes" }] });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.param).toBe("tools[0].defer_loading");
  });

  it("maps a tool_use / tool_result round trip; drops earlier thinking and redacted_thinking blocks", async () => {
    engine.script = () => answer("ok");
    const res = await post({
      ...hello,
      tools: [weatherTool],
      messages: [
        { role: "user", content: "Weather in Oslo and Bergen?" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "I should call the tool.", signature: "c2ln" },
            { type: "redacted_thinking", data: "b3BhcXVl" },
            { type: "text", text: "Checking.", citations: null },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Oslo" }, caller: { type: "direct" } },
            { type: "tool_use", id: "toolu_2", name: "get_weather", input: { city: "Bergen" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_1", content: "sunny" },
            { type: "tool_result", tool_use_id: "toolu_2", content: [{ type: "text", text: "rain" }, { type: "text", text: "wind" }], is_error: true },
            { type: "text", text: "And tomorrow?" },
          ],
        },
      ],
    });
    expect(res.statusCode).toBe(200);
    expect(lastRequest().messages).toEqual([
      { role: "user", content: [{ type: "text", text: "Weather in Oslo and Bergen?" }] },
      {
        role: "assistant",
        content: [{ type: "text", text: "Checking." }],
        toolCalls: [
          { id: "toolu_1", name: "get_weather", arguments: '{"city":"Oslo"}' },
          { id: "toolu_2", name: "get_weather", arguments: '{"city":"Bergen"}' },
        ],
      },
      { role: "tool", toolCallId: "toolu_1", content: [{ type: "text", text: "sunny" }] },
      {
        role: "tool",
        toolCallId: "toolu_2",
        content: [
          { type: "text", text: "rain" },
          { type: "text", text: "wind" },
        ],
        isError: true,
      },
      { role: "user", content: [{ type: "text", text: "And tomorrow?" }] },
    ]);
  });

  it("reads PDF and text documents into the text the model gets", async () => {
    engine.script = () => answer("ok");
    const pdf = makePdf(["Invoice 42", "Total 99 EUR"]).toString("base64");
    const res = await post({
      ...hello,
      messages: [
        {
          role: "user",
          content: [
            { type: "document", source: { type: "base64", media_type: "application/pdf", data: pdf }, title: "invoice.pdf" },
            { type: "document", source: { type: "text", media_type: "text/plain", data: "plain notes" }, context: "From the desk." },
            { type: "document", source: { type: "content", content: [{ type: "text", text: "inline one" }, { type: "text", text: "inline two" }] } },
            { type: "text", text: "Summarise." },
          ],
        },
      ],
    });
    expect(res.statusCode).toBe(200);
    const parts = lastRequest().messages[0]!.content.map((p) => (p.type === "text" ? p.text : p.type));
    expect(parts).toHaveLength(5);
    expect(parts[0]).toContain('<file name="invoice.pdf" type="application/pdf">');
    expect(parts[0]).toContain("Invoice 42\nTotal 99 EUR");
    expect(parts[1]).toBe("From the desk.");
    expect(parts[2]).toContain("plain notes");
    expect(parts[3]).toContain("inline one\n\ninline two");
    expect(parts[4]).toBe("Summarise.");
  });

  it("cache_control marks breakpoints on tools, system and blocks; the first 4 in request order are kept", async () => {
    engine.script = () => answer("ok");
    const cc = { type: "ephemeral" };
    await post({
      ...hello,
      tools: [{ ...weatherTool, cache_control: cc }],
      system: [{ type: "text", text: "sys", cache_control: { type: "ephemeral", ttl: "1h" } }],
      messages: [
        { role: "user", content: [{ type: "text", text: "a", cache_control: cc }] },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: {}, cache_control: cc }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "r", cache_control: cc }, { type: "text", text: "b", cache_control: cc }] },
      ],
    });
    expect(lastRequest().cacheBreakpoints).toEqual([
      { kind: "tool", tool: 0 },
      { kind: "content", message: 0, part: 0 },
      { kind: "content", message: 1, part: 0 },
      { kind: "tool_call", message: 2, call: 0 },
    ]);
    await post({ ...hello });
    expect(lastRequest().cacheBreakpoints).toBeUndefined();
    // Top-level cache_control: a breakpoint after the last block.
    await post({ ...hello, cache_control: cc, messages: [{ role: "user", content: [{ type: "text", text: "x" }, { type: "text", text: "y" }] }] });
    expect(lastRequest().cacheBreakpoints).toEqual([{ kind: "content", message: 0, part: 1 }]);
  });
});

describe("responses", () => {
  it("returns the message object with thinking (signed), text and usage; echoes the model", async () => {
    engine.script = () => answer("Sure thing.", { reasoning: "think think", cached: 4 });
    const res = await post({ ...hello, model: "claude-sonnet-4-5-20250929" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toContain("application/json");
    expect(res.headers["request-id"]).toMatch(/^req_/);
    const body = res.json();
    expect(body).toEqual({
      id: expect.stringMatching(/^msg_[A-Za-z0-9]{24}$/),
      type: "message",
      role: "assistant",
      model: "claude-sonnet-4-5-20250929",
      content: [
        { type: "thinking", thinking: "think think", signature: expect.stringMatching(/^[A-Za-z0-9+/]{43}=$/) },
        { type: "text", text: "Sure thing." },
      ],
      stop_reason: "end_turn",
      stop_sequence: null,
      stop_details: null,
      container: null,
      diagnostics: null,
      usage: {
        input_tokens: 8,
        output_tokens: 4,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 4,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
        output_tokens_details: { thinking_tokens: 2 },
        server_tool_use: null,
        service_tier: "standard",
        inference_geo: null,
        speed: null,
      },
    });
  });

  it("fast answers have no thinking block; display omitted keeps the signed block without its text", async () => {
    engine.script = () => answer("Quick.", { mode: "fast" });
    const fast = (await post({ ...hello, model: "claude-haiku-4-5" })).json();
    expect(fast.content).toEqual([{ type: "text", text: "Quick." }]);
    engine.script = () => answer("Done.", { reasoning: "secret plan" });
    const omitted = (await post({ ...hello, max_tokens: 200, thinking: { type: "enabled", budget_tokens: 100, display: "omitted" } })).json();
    expect(omitted.content[0]).toEqual({ type: "thinking", thinking: "", signature: expect.any(String) });
    expect(omitted.content[0].signature.length).toBeGreaterThan(20);
  });

  it("text blocks have no citations key, streamed or not (Anthropic leaves it out; the AI SDK's provider rejects null)", async () => {
    engine.script = () => answer("Plain.", { mode: "fast" });
    const whole = (await post(hello)).json();
    expect(whole.content).toHaveLength(1);
    expect(Object.keys(whole.content[0]).sort()).toEqual(["text", "type"]);
    engine.script = () => answer("Plain.", { mode: "fast" });
    const starts = sseEvents((await post({ ...hello, stream: true })).body).filter((e) => e.event === "content_block_start");
    expect(starts.map((e) => e.data.content_block)).toEqual([{ type: "text", text: "" }]);
    expect(Object.keys(starts[0]!.data.content_block).sort()).toEqual(["text", "type"]);
  });

  it("splits input usage into cache reads, cache writes and the rest", async () => {
    engine.script = () => [
      { type: "start", mode: "fast", promptTokens: 100, cachedTokens: 20, cacheWriteTokens: 50 },
      { type: "text.delta", text: "ok" },
      {
        type: "done",
        outcome: outcome({ mode: "fast", text: "ok", usage: { promptTokens: 100, cachedTokens: 20, cacheWriteTokens: 50, completionTokens: 2, reasoningTokens: 0 } }),
      },
    ];
    const body = (await post(hello)).json();
    expect(body.usage).toMatchObject({
      input_tokens: 30,
      cache_read_input_tokens: 20,
      cache_creation_input_tokens: 50,
      cache_creation: { ephemeral_5m_input_tokens: 50, ephemeral_1h_input_tokens: 0 },
      output_tokens: 2,
    });
  });

  it("tool calls come back as tool_use blocks with toolu_ ids, parsed input and stop_reason tool_use", async () => {
    engine.script = () => toolRun();
    const body = (await post({ ...hello, tools: [weatherTool] })).json();
    expect(body.stop_reason).toBe("tool_use");
    expect(body.content).toEqual([{ type: "tool_use", id: "toolu_abc123", name: "get_weather", input: { city: "Oslo" }, caller: { type: "direct" } }]);
  });

  it("maps stop reasons; stop_sequence carries the matched string", async () => {
    const cases: Array<[Parameters<typeof outcome>[0], string, string | null]> = [
      [{ stopReason: "stop_sequence", stopSequence: "END" }, "stop_sequence", "END"],
      [{ stopReason: "max_tokens" }, "max_tokens", null],
      [{ stopReason: "end_turn" }, "end_turn", null],
    ];
    for (const [o, stopReason, stopSequence] of cases) {
      engine.script = () => [{ type: "start", mode: "fast", promptTokens: 1, cachedTokens: 0 }, { type: "done", outcome: outcome({ text: "a", ...o }) }];
      const body = (await post({ ...hello, stop_sequences: ["END"] })).json();
      expect(body.stop_reason).toBe(stopReason);
      expect(body.stop_sequence).toBe(stopSequence);
    }
  });

  it("engine errors before the first token are plain HTTP errors, streamed or not", async () => {
    engine.script = () => new AppError("invalid_request", "Prompt too long.", { code: "context_length_exceeded", param: "messages" });
    for (const stream of [false, true]) {
      const res = await post({ ...hello, stream });
      expect(res.statusCode).toBe(400);
      expect(res.headers["content-type"]).toContain("application/json");
      expect(res.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error", details: { error_code: "context_length_exceeded" } } });
    }
  });

  it("an unexpected engine failure is a 500 api_error", async () => {
    engine.script = () => new Error("boom");
    const res = await post(hello);
    expect(res.statusCode).toBe(500);
    expect(res.json().error.type).toBe("api_error");
  });
});

describe("streaming", () => {
  const names = (body: string) => sseEvents(body).map((e) => e.event);

  it("sends the exact event graph for thinking then text, every frame with an event: line", async () => {
    engine.script = () => answer("Hi there", { reasoning: "hmm ok", cached: 2 });
    const res = await post({ ...hello, stream: true, model: "claude-opus-4-1" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toContain("text/event-stream");
    expect(res.headers["request-id"]).toMatch(/^req_/);
    expect(res.body.endsWith("\n\n")).toBe(true);
    const events = sseEvents(res.body);
    for (const e of events) expect(e.data.type).toBe(e.event);
    expect(events.map((e) => e.data)).toEqual([
      {
        type: "message_start",
        message: {
          id: expect.stringMatching(/^msg_/),
          type: "message",
          role: "assistant",
          model: "claude-opus-4-1",
          content: [],
          stop_reason: null,
          stop_sequence: null,
          stop_details: null,
          container: null,
          usage: {
            input_tokens: 10,
            output_tokens: 0,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 2,
            cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
            service_tier: "standard",
          },
        },
      },
      { type: "ping" },
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "hmm ok" } },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: expect.stringMatching(/^[A-Za-z0-9+/]{43}=$/) } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "Hi " } },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "there" } },
      { type: "content_block_stop", index: 1 },
      {
        type: "message_delta",
        delta: { stop_reason: "end_turn", stop_sequence: null, stop_details: null },
        usage: {
          input_tokens: 10,
          output_tokens: 4,
          cache_creation_input_tokens: 0,
          cache_read_input_tokens: 2,
          output_tokens_details: { thinking_tokens: 2 },
          server_tool_use: null,
        },
      },
      { type: "message_stop" },
    ]);
  });

  it("the streamed signature equals the non-streamed one for the same thought", async () => {
    engine.script = () => answer("x", { reasoning: "same thought" });
    const streamed = sseEvents((await post({ ...hello, stream: true })).body).find((e) => e.data.delta?.type === "signature_delta")!;
    const whole = (await post(hello)).json();
    expect(streamed.data.delta.signature).toBe(whole.content[0].signature);
  });

  it("streams tool_use blocks with input_json_delta, then stop_reason tool_use", async () => {
    engine.script = () => toolRun('{"city":"Oslo"}');
    const events = sseEvents((await post({ ...hello, stream: true, tools: [weatherTool] })).body);
    expect(events.map((e) => e.event)).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(events[2]!.data).toEqual({
      type: "content_block_start",
      index: 0,
      content_block: { type: "tool_use", id: "toolu_abc123", name: "get_weather", input: {}, caller: { type: "direct" } },
    });
    expect(events.slice(3, 5).map((e) => e.data.delta)).toEqual([
      { type: "input_json_delta", partial_json: '{"cit' },
      { type: "input_json_delta", partial_json: 'y":"Oslo"}' },
    ]);
    expect(events[6]!.data.delta).toEqual({ stop_reason: "tool_use", stop_sequence: null, stop_details: null });
  });

  it("a text block then two tool calls get indexes 0, 1, 2", async () => {
    engine.script = () => [
      { type: "start", mode: "fast", promptTokens: 5, cachedTokens: 0 },
      { type: "text.delta", text: "Let me check." },
      { type: "tool_call.start", index: 0, id: "call_a", name: "f" },
      { type: "tool_call.end", index: 0, arguments: '{"x":1}' },
      { type: "tool_call.start", index: 1, id: "call_b", name: "f" },
      { type: "tool_call.delta", index: 1, argumentsDelta: "{}" },
      { type: "tool_call.end", index: 1, arguments: "{}" },
      { type: "done", outcome: outcome({ mode: "fast", stopReason: "tool_calls", text: "Let me check." }) },
    ];
    const events = sseEvents((await post({ ...hello, stream: true, tools: [{ name: "f", input_schema: { type: "object" } }] })).body);
    const starts = events.filter((e) => e.event === "content_block_start").map((e) => [e.data.index, e.data.content_block.type]);
    expect(starts).toEqual([
      [0, "text"],
      [1, "tool_use"],
      [2, "tool_use"],
    ]);
    // Arguments that came without deltas are sent whole.
    expect(events.filter((e) => e.data.delta?.type === "input_json_delta").map((e) => [e.data.index, e.data.delta.partial_json])).toEqual([
      [1, '{"x":1}'],
      [2, "{}"],
    ]);
    const stops = events.filter((e) => e.event === "content_block_stop").map((e) => e.data.index);
    expect(stops).toEqual([0, 1, 2]);
  });

  it("thinking display omitted: the thinking block carries only its signature_delta", async () => {
    engine.script = () => answer("x", { reasoning: "private" });
    const events = sseEvents((await post({ ...hello, max_tokens: 100, stream: true, thinking: { type: "enabled", budget_tokens: 50, display: "omitted" } })).body);
    expect(events.slice(2, 5).map((e) => e.data.delta?.type ?? e.event)).toEqual(["content_block_start", "signature_delta", "content_block_stop"]);
    expect(JSON.stringify(events)).not.toContain("private");
  });

  it("a thought cut by max_tokens is closed before message_delta; stop_sequence reaches message_delta", async () => {
    engine.script = () => [
      { type: "start", mode: "thinking", promptTokens: 5, cachedTokens: 0 },
      { type: "reasoning.delta", text: "long" },
      { type: "done", outcome: outcome({ reasoning: "long", stopReason: "max_tokens" }) },
    ];
    expect(names((await post({ ...hello, stream: true })).body)).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    engine.script = () => [
      { type: "start", mode: "fast", promptTokens: 5, cachedTokens: 0 },
      { type: "text.delta", text: "a" },
      { type: "done", outcome: outcome({ text: "a", stopReason: "stop_sequence", stopSequence: "END" }) },
    ];
    const last = sseEvents((await post({ ...hello, stream: true, stop_sequences: ["END"] })).body).at(-2)!;
    expect(last.data.delta).toEqual({ stop_reason: "stop_sequence", stop_sequence: "END", stop_details: null });
  });

  it("an error after the stream began is an error event, and the stream ends without message_stop", async () => {
    engine.script = () => answer("one two three four five");
    engine.failAfter = 3;
    try {
      const res = await post({ ...hello, stream: true });
      expect(res.statusCode).toBe(200);
      const events = sseEvents(res.body);
      expect(events.at(-1)).toEqual({
        event: "error",
        data: {
          type: "error",
          error: { type: "api_error", message: expect.any(String), details: { error_code: "internal_error" } },
          request_id: res.headers["request-id"],
        },
      });
      expect(names(res.body)).not.toContain("message_stop");
    } finally {
      engine.failAfter = null;
    }
  });
});

describe("structured outputs", () => {
  const schema = { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city", "days"], additionalProperties: false };
  const json = '{"city": "Oslo", "days": 3}';
  /** A schema the grammar cannot express (`not`). */
  const unsupported = { type: "object", properties: { n: { type: "integer" } }, not: { required: ["n"] } };

  it("output_config.format json_schema constrains the answer as Chat's json_schema does; the answer is the text block", async () => {
    engine.script = () => answer(json, { mode: "fast" });
    const res = await post({ ...hello, output_config: { format: { type: "json_schema", schema } } });
    expect(res.statusCode).toBe(200);
    expect(lastRequest().output).toEqual({ type: "json_schema", schema, strict: true, param: "output_config.format.schema" });
    expect(res.json().content).toEqual([{ type: "text", text: json }]);
    expect(res.json().stop_reason).toBe("end_turn");
  });

  it("the beta's output_format (what client.beta.messages.parse sends, with its anthropic-beta header) is read the same way", async () => {
    engine.script = () => answer(json, { mode: "fast" });
    const res = await post({ ...hello, output_format: { type: "json_schema", schema } }, { "anthropic-beta": "structured-outputs-2025-12-15" }, "/v1/messages?beta=true");
    expect(res.statusCode).toBe(200);
    expect(lastRequest().output).toEqual({ type: "json_schema", schema, strict: true, param: "output_format.schema" });
    expect(res.json().content).toEqual([{ type: "text", text: json }]);
  });

  it("no format, a null one, or an output_config with only effort: plain text", async () => {
    for (const extra of [{}, { output_config: null }, { output_config: { format: null } }, { output_format: null }, { output_config: { effort: "low" } }]) {
      engine.script = () => answer("Plain.", { mode: "fast" });
      const res = await post({ ...hello, ...extra });
      expect(res.statusCode, JSON.stringify(extra)).toBe(200);
      expect(lastRequest().output, JSON.stringify(extra)).toEqual({ type: "text" });
    }
  });

  it("streamed: the JSON arrives as text deltas and the engine gets the same grammar request", async () => {
    engine.script = () => answer(json, { mode: "fast" });
    const events = sseEvents((await post({ ...hello, stream: true, output_config: { format: { type: "json_schema", schema } } })).body);
    expect(lastRequest().output).toMatchObject({ type: "json_schema", schema });
    const text = events.filter((e) => e.data.delta?.type === "text_delta").map((e) => e.data.delta.text).join("");
    expect(JSON.parse(text)).toEqual({ city: "Oslo", days: 3 });
  });

  it("a schema the grammar cannot express is a 400 invalid_schema in Anthropic's format, naming the field, before the engine runs", async () => {
    const before = engine.requests.length;
    for (const [extra, param] of [
      [{ output_config: { format: { type: "json_schema", schema: unsupported } } }, "output_config.format.schema"],
      [{ output_format: { type: "json_schema", schema: unsupported } }, "output_format.schema"],
    ] as const) {
      const res = await post({ ...hello, ...extra });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        type: "error",
        error: { type: "invalid_request_error", message: expect.stringMatching(new RegExp(`^${param.replaceAll(".", "\\.")}: Unsupported JSON schema`)), details: { error_code: "invalid_schema", param } },
        request_id: res.headers["request-id"],
      });
      // count_tokens refuses what the run would refuse.
      const counted = await post({ model: "svc", messages: hello.messages, ...extra }, {}, "/v1/messages/count_tokens");
      expect(counted.statusCode).toBe(400);
      expect(counted.json().error.details).toEqual({ error_code: "invalid_schema", param });
    }
    expect(engine.requests.length).toBe(before);
  });

  it("always strict, as Anthropic's structured outputs are: uniqueItems over strings (which no grammar holds) is refused", async () => {
    const tags = { type: "object", properties: { tags: { type: "array", items: { type: "string" }, uniqueItems: true } }, required: ["tags"] };
    const res = await post({ ...hello, output_config: { format: { type: "json_schema", schema: tags } } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details).toEqual({ error_code: "invalid_schema", param: "output_config.format.schema" });
    expect(res.json().error.message).toContain("uniqueItems");
  });

  it("a bad format is a 400 naming what is wrong", async () => {
    for (const [extra, param] of [
      [{ output_config: { format: { type: "json_object" } } }, "output_config.format.type"],
      [{ output_config: { format: { type: "json_schema" } } }, "output_config.format.schema"],
      [{ output_format: { type: "json_schema", schema: "object" } }, "output_format.schema"],
      [{ output_config: { format: { type: "json_schema", schema } }, output_format: { type: "json_schema", schema } }, "output_format"],
      [{ output_config: "json" }, "output_config"],
      [{ output_format: { schema } }, "output_format.type"],
    ] as const) {
      for (const url of ["/v1/messages", "/v1/messages/count_tokens"]) {
        const res = await post({ ...hello, ...extra }, {}, url);
        expect(res.statusCode, `${url} ${JSON.stringify(extra)}`).toBe(400);
        expect(res.json().error.type).toBe("invalid_request_error");
        expect(res.json().error.message, `${url} ${JSON.stringify(extra)}`).toContain(param);
        expect(res.json().error.details.param, `${url} ${JSON.stringify(extra)}`).toBe(param);
      }
    }
  });

  it("an answer that breaks its schema is never returned as valid: 500 api_error output_validation_failed", async () => {
    engine.script = () => answer('{"city": "Oslo", "days": "three"}', { mode: "fast" });
    const res = await post({ ...hello, output_config: { format: { type: "json_schema", schema } } });
    expect(res.statusCode).toBe(500);
    expect(res.json().error).toMatchObject({ type: "api_error", details: { error_code: "output_validation_failed" } });
  });

  it("count_tokens takes the format and does not count the schema (the model never reads it; it is a grammar)", async () => {
    const plain = await post({ model: "svc", messages: hello.messages }, {}, "/v1/messages/count_tokens");
    const formatted = await post({ model: "svc", messages: hello.messages, output_config: { format: { type: "json_schema", schema } } }, {}, "/v1/messages/count_tokens");
    expect(formatted.statusCode).toBe(200);
    expect(formatted.json()).toEqual(plain.json());
  });
});

describe("count_tokens", () => {
  const count = (body: unknown, headers: Record<string, string> = {}) => post(body, headers, "/v1/messages/count_tokens");

  it("estimates ceil(characters / 4) over system, messages, tool calls and tool definitions", async () => {
    const before = engine.requests.length;
    const tool = { name: "f", description: "desc", input_schema: { type: "object" } };
    const res = await count({
      model: "claude-sonnet-4-5",
      system: "abcd",
      tools: [tool],
      messages: [
        { role: "user", content: "hello world" },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "f", input: { a: 1 } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "é😀" }] },
      ],
    });
    expect(res.statusCode).toBe(200);
    // system 4 + "hello world" 11 + call "f" 1 + '{"a":1}' 7 + "é😀" 2 + tool "f" 1 + "desc" 4 + '{"type":"object"}' 17 = 47
    expect(res.json()).toEqual({ input_tokens: 12 });
    expect(engine.requests.length).toBe(before);
  });

  it("reads documents as the model would, and needs no max_tokens", async () => {
    const res = await count({
      model: "svc",
      messages: [{ role: "user", content: [{ type: "document", source: { type: "text", media_type: "text/plain", data: "x".repeat(400) } }] }],
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().input_tokens).toBeGreaterThan(100);
  });

  it("needs a key and validates like messages", async () => {
    const noKey = await t.app.inject({ method: "POST", url: "/v1/messages/count_tokens", payload: hello });
    expect(noKey.statusCode).toBe(401);
    expect(noKey.json().error.type).toBe("authentication_error");
    for (const [body, param] of [
      [{ messages: hello.messages }, "model"],
      [{ model: "svc", messages: [] }, "messages"],
      [{ model: "svc", messages: hello.messages, thinking: { type: "nope" } }, "thinking.type"],
      [{ model: "svc", messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: "https://x/y.png" } }] }] }, "messages[0].content[0]"],
    ] as const) {
      const res = await count(body);
      expect(res.statusCode).toBe(400);
      expect(res.json().error.message).toContain(param);
    }
  });
});

describe("no model loaded", () => {
  it("messages answer 503 overloaded_error with Retry-After; count_tokens and health still work", async () => {
    const empty = await buildTestApp(null);
    try {
      const res = await empty.app.inject({ method: "POST", url: "/v1/messages", headers: { "x-api-key": empty.key }, payload: hello });
      expect(res.statusCode).toBe(503);
      expect(Number(res.headers["retry-after"])).toBeGreaterThan(0);
      expect(res.json()).toMatchObject({ type: "error", error: { type: "overloaded_error", message: expect.stringContaining("--model") } });
      const counted = await empty.app.inject({ method: "POST", url: "/v1/messages/count_tokens", headers: { "x-api-key": empty.key }, payload: hello });
      expect(counted.statusCode).toBe(200);
      expect(counted.json()).toEqual({ input_tokens: 1 });
      expect((await empty.app.inject({ method: "GET", url: "/v1/messages/_health" })).json().model.state).toBe("no_model");
    } finally {
      await empty.close();
    }
  });
});
