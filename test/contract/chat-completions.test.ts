// The Chat Completions surface against a scripted engine: exact statuses, headers, bodies and SSE frames.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import { answer, FakeEngine, outcome } from "../support/fake-engine.js";
import { makePdf } from "../support/make-pdf.js";
import { buildTestApp, expectInvalidParam, postJson, sseData, type TestApp } from "../support/test-app.js";

let t: TestApp;
let engine: FakeEngine;

beforeAll(async () => {
  engine = new FakeEngine();
  t = await buildTestApp(engine);
});
afterAll(async () => t.close());

const hello = { messages: [{ role: "user", content: "Hi" }] };

const post = (body: unknown, headers: Record<string, string> = {}) => postJson(t, "/v1/chat/completions", body, headers);

describe("authentication", () => {
  it.each([
    ["missing", undefined],
    ["wrong", "Bearer sk-svc-00000000000000000000000000000000"],
    ["truncated", "TRUNCATE"],
    ["not a bearer", "Basic abc"],
  ])("a %s key gets 401 invalid_api_key in the OpenAI shape", async (_label, header) => {
    const authorization = header === "TRUNCATE" ? `Bearer ${t.key.slice(0, -3)}` : header;
    const res = await t.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      headers: authorization ? { authorization } : {},
      payload: hello,
    });
    expect(res.statusCode).toBe(401);
    expect(res.headers["x-request-id"]).toMatch(/^req_/);
    const body = res.json();
    expect(body.error.code).toBe("invalid_api_key");
    expect(typeof body.error.message).toBe("string");
  });

  it("a revoked key gets 401; a fresh one works", async () => {
    const created = t.keys.create({ name: "temp" });
    expect((await post(hello, { authorization: `Bearer ${created.key}` })).statusCode).toBe(200);
    t.keys.revoke(created.id);
    const res = await post(hello, { authorization: `Bearer ${created.key}` });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe("invalid_api_key");
  });

  it("checks the key before the body: a bad key with a bad body is still 401", async () => {
    const res = await post({ messages: [] }, { authorization: "Bearer nope" });
    expect(res.statusCode).toBe(401);
  });
});

describe("keyless endpoints, 404 policy and request ids", () => {
  it("lists exactly the one model without a key", async () => {
    const res = await t.app.inject({ method: "GET", url: "/v1/models" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      object: "list",
      data: [
        {
          id: "svc-preview",
          object: "model",
          created: 1782518400,
          owned_by: "svc",
          context_window: 200000,
          multimodal: true,
          modes: ["fast", "thinking"],
          // What this server holds per request with the model loaded now (the fake engine's 4096 tokens).
          loaded_context_length: 4096,
          max_output_tokens: 4080,
          // The fake engine's model has no vision projector: images are read with OCR.
          svc_image_input: "ocr",
        },
      ],
    });
  });

  it("serves both health probes without a key", async () => {
    for (const url of ["/health", "/v1/messages/_health"]) {
      const res = await t.app.inject({ method: "GET", url });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ status: "ok", model: { state: "ready", name: "fake" } });
    }
  });

  it.each(["/", "/v2/chat/completions", "/api/v1/chat", "/healthz", "/v1/nope", "/v1/chat/completions/extra"])(
    "%s → 404 with a request id",
    async (url) => {
      const res = await t.app.inject({ method: "GET", url, headers: { authorization: `Bearer ${t.key}` } });
      expect(res.statusCode).toBe(404);
      expect(res.headers["x-request-id"]).toMatch(/^req_[A-Za-z0-9]{24}$/);
      expect(res.json().error.type).toBe("invalid_request_error");
    },
  );

  it("404s under /v1/messages use the Anthropic error shape", async () => {
    const res = await t.app.inject({ method: "GET", url: "/v1/messages/nope" });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ type: "error", error: { type: "not_found_error" }, request_id: res.headers["x-request-id"] });
  });

  it("gives every response its own request id", async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) {
      ids.add(String((await t.app.inject({ method: "GET", url: "/v1/models" })).headers["x-request-id"]));
      ids.add(String((await post(hello)).headers["x-request-id"]));
      ids.add(String((await t.app.inject({ method: "GET", url: "/nowhere" })).headers["x-request-id"]));
    }
    expect(ids.size).toBe(15);
  });

  it("refuses Host headers that are not this machine (DNS rebinding)", async () => {
    const res = await t.app.inject({ method: "GET", url: "/v1/models", headers: { host: "evil.example:8787" } });
    expect(res.statusCode).toBe(403);
    expect(res.json().error.code).toBe("host_not_allowed");
  });
});

describe("body parsing", () => {
  it("malformed JSON → 400 invalid_json in the OpenAI shape", async () => {
    const res = await post('{"messages": [');
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ type: "invalid_request_error", code: "invalid_json" });
  });

  it("JSON without a Content-Type is still understood", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "text/plain" },
      payload: JSON.stringify(hello),
    });
    expect(res.statusCode).toBe(200);
  });

  it("a body over 50 MB → 413", async () => {
    const big = JSON.stringify({ messages: [{ role: "user", content: "x".repeat(50 * 1024 * 1024 + 10) }] });
    const res = await post(big);
    expect(res.statusCode).toBe(413);
    expect(res.json().error.code).toBe("request_too_large");
  });
});

describe("parameter validation", () => {
  const many = (n: number) => Array.from({ length: n }, () => ({ role: "user", content: "x" }));
  it.each([
    [{ ...hello, temperature: 2.01 }, "temperature"],
    [{ ...hello, temperature: -0.1 }, "temperature"],
    [{ ...hello, temperature: "hot" }, "temperature"],
    [{ ...hello, top_p: 0 }, "top_p"],
    [{ ...hello, top_p: 1.01 }, "top_p"],
    [{ ...hello, max_tokens: 0 }, "max_tokens"],
    [{ ...hello, max_tokens: 200001 }, "max_tokens"],
    [{ ...hello, max_tokens: 1.5 }, "max_tokens"],
    [{ ...hello, max_completion_tokens: 0 }, "max_completion_tokens"],
    [{ ...hello, stop: ["a", "b", "c", "d", "e"] }, "stop"],
    [{ ...hello, stop: "" }, "stop"],
    [{ ...hello, stop: ["ok", "x".repeat(501)] }, "stop"],
    [{ ...hello, seed: 1.5 }, "seed"],
    [{ ...hello, frequency_penalty: -2.5 }, "frequency_penalty"],
    [{ ...hello, presence_penalty: 2.5 }, "presence_penalty"],
    [{ ...hello, n: 2 }, "n"],
    [{ ...hello, n: 0 }, "n"],
    [{ messages: [] }, "messages"],
    [{ messages: many(2001) }, "messages"],
    [{}, "messages"],
    [{ ...hello, max_reasoning_tokens: -1 }, "max_reasoning_tokens"],
    [{ ...hello, max_reasoning_tokens: 200001 }, "max_reasoning_tokens"],
    [{ ...hello, refusal_mode: "lenient" }, "refusal_mode"],
    [{ ...hello, glassbox: { threshold: 1.5 } }, "glassbox.threshold"],
    [{ ...hello, glassbox: { thresold: 0.5 } }, "glassbox.thresold"],
    [{ ...hello, glassbox: { threshold: 0.2, abstain_below: 0.5 } }, "glassbox.abstain_below"],
    [{ messages: [{ role: "wizard", content: "hi" }] }, "messages[0].role"],
    [{ messages: [{ role: "user", content: "a" }, { role: "tool", content: "r" }] }, "messages[1].tool_call_id"],
    [{ messages: [{ role: "user" }] }, "messages[0].content"],
    [{ messages: [{ role: "user", content: [{ type: "text" }] }] }, "messages[0].content[0].text"],
    [{ messages: [{ role: "system", content: [{ type: "image_url", image_url: { url: "x" } }] }] }, "messages[0].content[0].type"],
    [{ ...hello, response_format: { type: "xml" } }, "response_format.type"],
    [{ ...hello, tools: [{ type: "function", function: { name: "bad name!" } }] }, "tools[0].function.name"],
    [{ ...hello, tools: [{ type: "custom", custom: { name: "x" } }] }, "tools[0].type"],
    [{ ...hello, tool_choice: "sometimes" }, "tool_choice"],
    [{ ...hello, tool_choice: "required" }, "tool_choice"],
    [{ ...hello, tool_choice: { type: "function", function: { name: "ghost" } } }, "tool_choice.function.name"],
  ])("%j → 400 naming %s", async (body, param) => {
    expectInvalidParam(await post(body), param);
  });

  it("an unknown model → 404 model_not_found", async () => {
    const res = await post({ ...hello, model: "gpt-4o" });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatchObject({ code: "model_not_found", param: "model" });
  });

  it("accepts the model id, its alias, nulls and unknown fields", async () => {
    for (const model of ["svc-preview", "svc", null]) {
      const res = await post({ ...hello, model, temperature: null, user: "u1", logit_bias: { 1: 2 }, whatever: true });
      expect(res.statusCode).toBe(200);
    }
  });

  it("a file_id that is not the caller's file is a 404 naming it", async () => {
    const res = await post({ messages: [{ role: "user", content: [{ type: "file", file: { file_id: "file-abc" } }] }] });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatchObject({ param: "messages[0].content[0].file.file_id", code: "file_not_found", message: "No such file: 'file-abc'." });
  });

  it("inline file_data is read: a PDF's text and a text file reach the model", async () => {
    const pdf = `data:application/pdf;base64,${makePdf(["Invoice 42", "Total 99 EUR"]).toString("base64")}`;
    const txt = `data:text/plain;base64,${Buffer.from("plain notes").toString("base64")}`;
    const res = await post({
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Summarise:" },
            { type: "file", file: { filename: "invoice.pdf", file_data: pdf } },
            { type: "file", file: { filename: "notes.txt", file_data: txt } },
          ],
        },
      ],
    });
    expect(res.statusCode).toBe(200);
    const parts = engine.requests.at(-1)!.messages[0]!.content;
    expect(parts.map((p) => p.type)).toEqual(["text", "text", "text"]);
    expect(parts[1]).toMatchObject({ text: expect.stringContaining("Invoice 42\nTotal 99 EUR") });
    expect(parts[1]).toMatchObject({ text: expect.stringContaining('name="invoice.pdf"') });
    expect(parts[2]).toMatchObject({ text: expect.stringContaining("plain notes") });
  });

  it("bad inline files are 400s (422 for credential files), never 500s", async () => {
    const file = (filename: string, data: string) => ({ messages: [{ role: "user", content: [{ type: "file", file: { filename, file_data: data } }] }] });
    const notPdf = await post(file("x.pdf", `data:application/pdf;base64,${Buffer.from("nope").toString("base64")}`));
    expect(notPdf.statusCode).toBe(400);
    expect(notPdf.json().error.code).toBe("invalid_pdf");
    const notDataUrl = await post(file("x.txt", "hello"));
    expect(notDataUrl.statusCode).toBe(400);
    expect(notDataUrl.json().error.param).toBe("messages[0].content[0].file.file_data");
    const secret = await post(file("server.pem", `data:text/plain;base64,${Buffer.from("KEY").toString("base64")}`));
    expect(secret.statusCode).toBe(422);
    const image = await post({ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://example.com/cat.png" } }] }] });
    expect(image.statusCode).toBe(400);
    expect(image.json().error).toMatchObject({ code: "url_not_fetched", param: "messages[0].content[0].image_url" });
  });
});

describe("mapping to the engine", () => {
  it("maps reasoning_effort through the spec's table, unknown values to thinking", async () => {
    const cases: Array<[string | undefined, "fast" | "thinking"]> = [
      ["none", "fast"],
      ["minimal", "fast"],
      ["low", "thinking"],
      ["max", "thinking"],
      ["extreme", "thinking"],
      [undefined, "thinking"],
    ];
    for (const [effort, mode] of cases) {
      const res = await post({ ...hello, ...(effort ? { reasoning_effort: effort } : {}) });
      expect(res.statusCode).toBe(200);
      expect(engine.requests.at(-1)!.mode).toBe(mode);
    }
    await post({ ...hello, reasoning_effort: "high", max_reasoning_tokens: 33 });
    expect(engine.requests.at(-1)!.reasoningBudget).toBe(33);
  });

  it("passes sampling, stop, tools and history through", async () => {
    const res = await post({
      messages: [
        { role: "developer", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "Weather?" }] },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] },
        { role: "tool", tool_call_id: "call_1", content: "sunny" },
      ],
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      temperature: 0.3,
      top_p: 0.5,
      seed: 42,
      stop: "END",
      max_tokens: 77,
      frequency_penalty: 0.5,
    });
    expect(res.statusCode).toBe(200);
    const r = engine.requests.at(-1)!;
    expect(r.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(r.toolChoice).toEqual({ type: "tool", name: "get_weather" });
    expect(r.sampling).toMatchObject({ temperature: 0.3, topP: 0.5, seed: 42, frequencyPenalty: 0.5 });
    expect(r.stopSequences).toEqual(["END"]);
    expect(r.maxTokens).toBe(77);
  });
});

describe("responses", () => {
  it("returns the chat.completion object with usage, svc_complexity and the session id", async () => {
    engine.script = () => answer("Sure thing.", { reasoning: "think think", cached: 4 });
    const res = await post({ ...hello, session_id: "sess-1" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toContain("application/json");
    const body = res.json();
    expect(body.id).toMatch(/^chatcmpl-/);
    expect(body).toMatchObject({
      object: "chat.completion",
      model: "svc-thinking",
      session_id: "sess-1",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "Sure thing.", reasoning_content: "think think", refusal: null },
          finish_reason: "stop",
          logprobs: null,
        },
      ],
      usage: {
        prompt_tokens: 12,
        completion_tokens: 4,
        total_tokens: 16,
        reasoning_tokens: 2,
        prompt_tokens_details: { cached_tokens: 4 },
      },
    });
    expect(Math.abs(body.created - Date.now() / 1000)).toBeLessThan(5);
    expect(body.svc_complexity).toMatchObject({ mode: "thinking", reasoning_tokens: 2, prompt_tokens: 12 });
    expect(body).not.toHaveProperty("svc_trace");
  });

  it("fast answers are svc-fast and carry no reasoning_tokens", async () => {
    engine.script = () => answer("Quick.", { mode: "fast" });
    const body = (await post({ ...hello, reasoning_effort: "none" })).json();
    expect(body.model).toBe("svc-fast");
    expect(body.usage).not.toHaveProperty("reasoning_tokens");
    expect(body).not.toHaveProperty("session_id");
  });

  it("svc_complexity steers the budget the engine gets, within the effort's cap", async () => {
    engine.script = () => answer("Ok.");
    const simple = (await post({ ...hello, reasoning_effort: "high" })).json();
    const simpleBudget = engine.requests.at(-1)!.reasoningBudget;
    const tools = [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }];
    const hard = (
      await post({ ...hello, reasoning_effort: "high", tools, response_format: { type: "json_object" }, messages: [{ role: "user", content: "word ".repeat(4000) }] })
    ).json();
    const hardBudget = engine.requests.at(-1)!.reasoningBudget;
    expect(simple.svc_complexity).toMatchObject({ reasoning_cap: 16384, reasoning_budget: simpleBudget });
    expect(hard.svc_complexity).toMatchObject({ reasoning_cap: 16384, reasoning_budget: hardBudget });
    expect(hardBudget).toBeGreaterThan(simpleBudget);
    expect(hardBudget).toBeLessThanOrEqual(16384);
  });

  it("svc_trace appears exactly when glassbox is used, with confidence null", async () => {
    engine.script = () => answer("Ok.");
    const on = (await post({ ...hello, glassbox: { enabled: true, threshold: 0.5 } })).json();
    expect(on.svc_trace).toMatchObject({ confidence: null, threshold: 0.5 });
    const off = (await post({ ...hello, glassbox: { enabled: false } })).json();
    expect(off).not.toHaveProperty("svc_trace");
  });

  it("tool calls come back with finish_reason tool_calls and content null", async () => {
    engine.script = () => [
      { type: "start", mode: "fast", promptTokens: 5, cachedTokens: 0 },
      { type: "tool_call.start", index: 0, id: "call_abc", name: "f" },
      { type: "tool_call.delta", index: 0, argumentsDelta: '{"a":1}' },
      { type: "tool_call.end", index: 0, arguments: '{"a":1}' },
      { type: "done", outcome: outcome({ mode: "fast", stopReason: "tool_calls", toolCalls: [{ id: "call_abc", name: "f", arguments: '{"a":1}' }] }) },
    ];
    const body = (await post({ ...hello, tools: [{ type: "function", function: { name: "f" } }] })).json();
    expect(body.choices[0]).toMatchObject({
      finish_reason: "tool_calls",
      message: { content: null, tool_calls: [{ id: "call_abc", type: "function", function: { name: "f", arguments: '{"a":1}' } }] },
    });
  });

  it("maps stop reasons to finish_reason", async () => {
    const cases: Array<[Parameters<typeof outcome>[0], string]> = [
      [{ stopReason: "stop_sequence", stopSequence: "X" }, "stop"],
      [{ stopReason: "max_tokens" }, "length"],
      [{ stopReason: "end_turn" }, "stop"],
    ];
    for (const [o, finish] of cases) {
      engine.script = () => [{ type: "start", mode: "fast", promptTokens: 1, cachedTokens: 0 }, { type: "done", outcome: outcome(o) }];
      expect((await post(hello)).json().choices[0].finish_reason).toBe(finish);
    }
  });

  it("engine errors before the first token are plain HTTP errors", async () => {
    engine.script = () => new AppError("invalid_request", "Prompt too long.", { code: "context_length_exceeded", param: "messages" });
    const res = await post(hello);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: "context_length_exceeded", param: "messages" });
    const streamed = await post({ ...hello, stream: true });
    expect(streamed.statusCode).toBe(400);
    expect(streamed.headers["content-type"]).toContain("application/json");
  });

  it("an unexpected engine failure is a 500 server_error, not a hang", async () => {
    engine.script = () => new Error("boom");
    const res = await post(hello);
    expect(res.statusCode).toBe(500);
    expect(res.json().error).toMatchObject({ type: "server_error", code: "internal_error" });
  });
});

describe("streaming", () => {
  it("sends role first, reasoning_content, content, finish, a usage chunk with id, then [DONE]", async () => {
    engine.script = () => answer("Hi there friend", { reasoning: "hmm" });
    const res = await post({ ...hello, stream: true, session_id: "s9" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toContain("text/event-stream");
    expect(res.headers["x-request-id"]).toMatch(/^req_/);
    expect(res.body.endsWith("data: [DONE]\n\n")).toBe(true);
    const frames = sseData(res.body) as any[];
    expect(frames.at(-1)).toBe("[DONE]");
    const chunks = frames.slice(0, -1);
    const id = chunks[0].id;
    expect(id).toMatch(/^chatcmpl-/);
    for (const c of chunks) expect(c).toMatchObject({ id, object: "chat.completion.chunk", model: "svc-thinking", session_id: "s9" });
    expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: null });
    expect(chunks[1].choices[0].delta).toEqual({ reasoning_content: "hmm" });
    expect(chunks.slice(2, 5).map((c: any) => c.choices[0].delta.content).join("")).toBe("Hi there friend");
    expect(chunks[5].choices[0]).toMatchObject({ delta: {}, finish_reason: "stop" });
    expect(chunks[6]).toMatchObject({ choices: [], usage: { prompt_tokens: 12, reasoning_tokens: 1 }, svc_complexity: { mode: "thinking" } });
    expect(chunks).toHaveLength(7);
  });

  it("streams tool calls with type function on the first fragment", async () => {
    engine.script = () => [
      { type: "start", mode: "fast", promptTokens: 5, cachedTokens: 0 },
      { type: "tool_call.start", index: 0, id: "call_x", name: "f" },
      { type: "tool_call.delta", index: 0, argumentsDelta: '{"a"' },
      { type: "tool_call.delta", index: 0, argumentsDelta: ":1}" },
      { type: "tool_call.end", index: 0, arguments: '{"a":1}' },
      { type: "done", outcome: outcome({ mode: "fast", stopReason: "tool_calls", toolCalls: [{ id: "call_x", name: "f", arguments: '{"a":1}' }] }) },
    ];
    const frames = sseData((await post({ ...hello, stream: true, tools: [{ type: "function", function: { name: "f" } }] })).body) as any[];
    expect(frames[1].choices[0].delta.tool_calls[0]).toEqual({ index: 0, id: "call_x", type: "function", function: { name: "f", arguments: "" } });
    expect(frames[2].choices[0].delta.tool_calls[0]).toEqual({ index: 0, function: { arguments: '{"a"' } });
    expect(frames[4].choices[0].finish_reason).toBe("tool_calls");
  });

  it("an error after the first byte goes out as an error frame", async () => {
    engine.script = () => answer("one two three four five");
    engine.failAfter = 3;
    try {
      const res = await post({ ...hello, stream: true });
      expect(res.statusCode).toBe(200);
      const frames = sseData(res.body) as any[];
      expect(frames.at(-1)).toMatchObject({ error: { type: "server_error", code: "internal_error" } });
      expect(res.body).not.toContain("[DONE]");
    } finally {
      engine.failAfter = null;
    }
  });
});

describe("no model loaded", () => {
  it("inference answers 503 with Retry-After and says how to provide a model; keyless endpoints still work", async () => {
    const empty = await buildTestApp(null);
    try {
      const res = await empty.app.inject({
        method: "POST",
        url: "/v1/chat/completions",
        headers: { authorization: `Bearer ${empty.key}` },
        payload: hello,
      });
      expect(res.statusCode).toBe(503);
      expect(Number(res.headers["retry-after"])).toBeGreaterThan(0);
      expect(res.json().error.message).toContain("--model");
      expect((await empty.app.inject({ method: "GET", url: "/health" })).json().model.state).toBe("no_model");
      expect((await empty.app.inject({ method: "GET", url: "/v1/models" })).statusCode).toBe(200);
    } finally {
      await empty.close();
    }
  });
});
