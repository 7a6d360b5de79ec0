// The Responses surface against a scripted engine: exact statuses, headers, bodies and SSE events.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import { answer, FakeEngine, outcome } from "../support/fake-engine.js";
import { makePdf } from "../support/make-pdf.js";
import { buildTestApp, expectInvalidParam, postJson, sseData, type TestApp } from "../support/test-app.js";

let t: TestApp;
let engine: FakeEngine;
/** A key of the same account with the reasoning-trace flag on. */
let traceKey: string;
let traceKeyId: string;

beforeAll(async () => {
  engine = new FakeEngine();
  t = await buildTestApp(engine);
  const created = t.keys.create({ name: "tracer", reasoningTrace: true });
  traceKey = created.key;
  traceKeyId = created.id;
});
afterAll(async () => t.close());

const hello = { model: "svc", input: "Hi" };

const post = (body: unknown, headers: Record<string, string> = {}) => postJson(t, "/v1/responses", body, headers);

/** Splits an SSE body into events, checking each has an `event:` line naming its data's type. */
function events(body: string): any[] {
  expect(body.endsWith("\n\n")).toBe(true);
  return body
    .split("\n\n")
    .filter((block) => block.trim() !== "" && !block.startsWith(":"))
    .map((block) => {
      const lines = block.split("\n");
      const name = lines.find((l) => l.startsWith("event: "))?.slice(7);
      const data = JSON.parse(lines.find((l) => l.startsWith("data: "))!.slice(6));
      expect(name).toBe(data.type);
      return data;
    });
}

const sayHi = () => answer("Hello there", { reasoning: "let me think", cached: 3 });

describe("authentication", () => {
  it.each([
    ["missing", undefined],
    ["wrong", "Bearer sk-svc-00000000000000000000000000000000"],
    ["not a bearer", "Basic abc"],
  ])("a %s key gets 401 invalid_api_key in the OpenAI shape", async (_label, authorization) => {
    const res = await t.app.inject({ method: "POST", url: "/v1/responses", headers: authorization ? { authorization } : {}, payload: hello });
    expect(res.statusCode).toBe(401);
    expect(res.headers["x-request-id"]).toMatch(/^req_/);
    expect(res.json()).toEqual({ error: { message: expect.any(String), type: "authentication_error", param: null, code: "invalid_api_key" } });
  });

  it("checks the key before the body, and store true with a bad key is still 401", async () => {
    const res = await post({ input: [], store: true }, { authorization: "Bearer nope" });
    expect(res.statusCode).toBe(401);
  });
});

describe("stateless: what would need stored conversations is refused", () => {
  it.each([
    [{ ...hello, store: true }, "store", "unsupported_value"],
    [{ ...hello, previous_response_id: "resp_abc" }, "previous_response_id", "unsupported_parameter"],
    [{ ...hello, previous_response_id: "" }, "previous_response_id", "unsupported_parameter"],
    [{ ...hello, background: true }, "background", "unsupported_value"],
    [{ ...hello, conversation: "conv_1" }, "conversation", "unsupported_parameter"],
    [{ ...hello, conversation: { id: "conv_1" } }, "conversation", "unsupported_parameter"],
    [{ model: "svc", input: [{ type: "item_reference", id: "msg_1" }] }, "input[0]", "unsupported_parameter"],
  ])("%j → 400 in the OpenAI shape naming %s", async (body, param, code) => {
    const before = engine.requests.length;
    const res = await post(body);
    expect(res.statusCode).toBe(400);
    expect(res.headers["content-type"]).toContain("application/json");
    expect(res.json()).toEqual({ error: { message: expect.stringMatching(/stateless|stored/), type: "invalid_request_error", param, code } });
    expect(engine.requests.length).toBe(before);
  });

  it("the 'off' values are fine: store false, background false, previous_response_id null", async () => {
    engine.script = () => answer("Ok.");
    const res = await post({ ...hello, store: false, background: false, previous_response_id: null, conversation: null });
    expect(res.statusCode).toBe(200);
    expect(res.json().store).toBe(false);
  });

  it("there is nowhere to fetch a response from afterwards", async () => {
    engine.script = () => answer("Ok.");
    const id = (await post(hello)).json().id;
    const res = await t.app.inject({ method: "GET", url: `/v1/responses/${id}`, headers: { authorization: `Bearer ${t.key}` } });
    expect(res.statusCode).toBe(404);
  });
});

describe("parameter validation", () => {
  it.each([
    [{ ...hello, temperature: 2.01 }, "temperature"],
    [{ ...hello, temperature: "hot" }, "temperature"],
    [{ ...hello, top_p: 0 }, "top_p"],
    [{ ...hello, top_p: 1.5 }, "top_p"],
    [{ ...hello, max_output_tokens: 0 }, "max_output_tokens"],
    [{ ...hello, max_output_tokens: 200001 }, "max_output_tokens"],
    [{ ...hello, max_output_tokens: 2.5 }, "max_output_tokens"],
    [{ ...hello, stream: "yes" }, "stream"],
    [{ ...hello, store: "no" }, "store"],
    [{ ...hello, seed: 1.5 }, "seed"],
    [{ ...hello, metadata: { n: 1 } }, "metadata.n"],
    [{ ...hello, tools: { type: "function" } }, "tools"],
    [{ ...hello, instructions: 5 }, "instructions"],
    [{ model: "svc" }, "input"],
    [{ model: "svc", input: [] }, "input"],
    [{ model: "svc", input: 7 }, "input"],
    [{ model: "svc", input: [{ role: "user", content: "a" }, { type: "function_call_output", call_id: "ghost", output: "x" }] }, "input[1].call_id"],
    [{ ...hello, text: { format: { type: "json_schema", name: "x" } } }, "text.format.schema"],
    [{ ...hello, tools: [{ type: "function", name: "f" }], tool_choice: { type: "function", name: "g" } }, "tool_choice.name"],
  ])("%j → 400 naming %s", async (body, param) => {
    expectInvalidParam(await post(body), param);
  });

  it("an unknown model → 404 model_not_found", async () => {
    const res = await post({ ...hello, model: "gpt-5" });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatchObject({ code: "model_not_found", param: "model" });
  });

  it("an unsupported schema is a 400 naming text.format.schema (from the engine's grammar compiler)", async () => {
    engine.script = () => new AppError("invalid_request", "Unsupported JSON schema: not", { code: "invalid_schema", param: "text.format.schema" });
    const res = await post({ ...hello, text: { format: { type: "json_schema", name: "x", schema: { not: {} } } } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: "invalid_schema", param: "text.format.schema" });
  });

  it("accepts what clients such as Codex send alongside: include, prompt_cache_key, client_metadata, nulls", async () => {
    engine.script = () => answer("Ok.");
    const res = await post({
      ...hello,
      include: ["reasoning.encrypted_content"],
      prompt_cache_key: "thread-1",
      client_metadata: { a: "b" },
      reasoning: { effort: null, summary: "auto" },
      text: { format: null, verbosity: "low" },
      temperature: null,
      top_p: null,
      max_output_tokens: null,
      tool_choice: null,
      tools: null,
      service_tier: "auto",
      truncation: "disabled",
      whatever: true,
    });
    expect(res.statusCode).toBe(200);
  });
});

describe("mapping to the engine", () => {
  it("instructions, items, tools (function tools only), choice, format, effort, limits and sampling", async () => {
    engine.script = () => answer('{"city":"Oslo"}');
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
    const res = await post({
      model: "svc-preview",
      instructions: "Be brief.",
      input: [
        { role: "developer", content: "Use metric units." },
        { role: "user", content: [{ type: "input_text", text: "Weather?" }] },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' },
        { type: "function_call_output", call_id: "call_1", output: "sunny" },
      ],
      tools: [
        { type: "function", name: "get_weather", parameters: schema, strict: true },
        { type: "custom", name: "apply_patch" },
        { type: "web_search" },
      ],
      tool_choice: "required",
      text: { format: { type: "json_schema", name: "w", schema } },
      reasoning: { effort: "high" },
      max_output_tokens: 321,
      temperature: 0.3,
      top_p: 0.8,
      seed: 11,
      parallel_tool_calls: false,
    });
    expect(res.statusCode).toBe(200);
    const r = engine.requests.at(-1)!;
    expect(r.messages.map((m) => m.role)).toEqual(["system", "system", "user", "assistant", "tool"]);
    expect(r.messages[0]!.content).toEqual([{ type: "text", text: "Be brief." }]);
    expect(r.tools.map((tool) => tool.name)).toEqual(["get_weather"]);
    expect(r.toolChoice).toEqual({ type: "required" });
    expect(r.parallelToolCalls).toBe(false);
    expect(r.output).toMatchObject({ type: "json_schema", schema, param: "text.format.schema" });
    expect(r.mode).toBe("thinking");
    // high's budget, 16384, is the cap; svc_complexity steers the budget within it and reports both.
    expect(res.json().svc_complexity).toMatchObject({ reasoning_cap: 16384, reasoning_budget: r.reasoningBudget });
    expect(r.reasoningBudget).toBeGreaterThanOrEqual(16384 / 4);
    expect(r.reasoningBudget).toBeLessThan(16384);
    expect(r.maxTokens).toBe(321);
    expect(r.sampling).toMatchObject({ temperature: 0.3, topP: 0.8, seed: 11 });
    expect(r.stopSequences).toEqual([]);
    expect(res.json()).toMatchObject({
      instructions: "Be brief.",
      max_output_tokens: 321,
      temperature: 0.3,
      top_p: 0.8,
      parallel_tool_calls: false,
      tool_choice: "required",
      tools: [{ type: "function", name: "get_weather", description: null, parameters: schema, strict: true }],
      text: { format: { type: "json_schema", name: "w", schema, strict: null } },
      reasoning: { effort: "high", summary: null },
    });
  });

  it("reasoning.effort none gives the fast mode, reported as svc-fast", async () => {
    engine.script = () => answer("Quick.", { mode: "fast" });
    const res = await post({ ...hello, reasoning: { effort: "none" } });
    expect(engine.requests.at(-1)!.mode).toBe("fast");
    expect(res.json().model).toBe("svc-fast");
  });

  it("inline files go through ingest; their errors name the input part", async () => {
    engine.script = () => answer("Read it.");
    const pdf = `data:application/pdf;base64,${makePdf(["Invoice 42", "Total 99 EUR"]).toString("base64")}`;
    const res = await post({
      model: "svc",
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "Summarise:" },
            { type: "input_file", filename: "invoice.pdf", file_data: pdf },
            { type: "input_file", filename: "notes.txt", file_data: Buffer.from("plain notes").toString("base64") },
          ],
        },
      ],
    });
    expect(res.statusCode).toBe(200);
    const parts = engine.requests.at(-1)!.messages[0]!.content;
    expect(parts.map((p) => p.type)).toEqual(["text", "text", "text"]);
    expect(parts[1]).toMatchObject({ text: expect.stringContaining("Invoice 42\nTotal 99 EUR") });
    expect(parts[2]).toMatchObject({ text: expect.stringContaining("plain notes") });

    const file = (part: Record<string, unknown>) => post({ model: "svc", input: [{ role: "user", content: [{ type: "input_text", text: "x" }, part] }] });
    const cases: Array<[Record<string, unknown>, number, string]> = [
      [{ type: "input_file", filename: "x.pdf", file_data: `data:application/pdf;base64,${Buffer.from("nope").toString("base64")}` }, 400, "invalid_pdf"],
      [{ type: "input_file", file_url: "https://example.com/a.pdf" }, 400, "url_not_fetched"],
      [{ type: "input_file", file_id: "file-abc" }, 404, "file_not_found"],
      [{ type: "input_file", filename: "server.pem", file_data: Buffer.from("KEY").toString("base64") }, 422, "file_type_rejected"],
      [{ type: "input_image", detail: "auto", image_url: "https://example.com/cat.png" }, 400, "url_not_fetched"],
      [{ type: "input_image", detail: "auto", image_url: "data:image/png;base64,iVBORw0KGgo=" }, 400, "invalid_image"],
    ];
    for (const [part, status, code] of cases) {
      const bad = await file(part);
      expect(bad.statusCode).toBe(status);
      expect(bad.json().error).toMatchObject({ code, param: "input[0].content[1]" });
    }
  });
});

describe("the response object", () => {
  it("returns resp_ id, status, the message with output_text, usage with reasoning counted, store false", async () => {
    engine.script = sayHi;
    const res = await post({ ...hello, metadata: { ticket: "T-1" } });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toContain("application/json");
    expect(res.headers["x-request-id"]).toMatch(/^req_/);
    const body = res.json();
    expect(body.id).toMatch(/^resp_[A-Za-z0-9]{24}$/);
    expect(Math.abs(body.created_at - Date.now() / 1000)).toBeLessThan(5);
    expect(body).toEqual({
      id: body.id,
      object: "response",
      created_at: body.created_at,
      status: "completed",
      background: false,
      error: null,
      incomplete_details: null,
      instructions: null,
      max_output_tokens: null,
      metadata: { ticket: "T-1" },
      model: "svc-thinking",
      output: [
        {
          id: expect.stringMatching(/^msg_/),
          type: "message",
          role: "assistant",
          status: "completed",
          content: [{ type: "output_text", text: "Hello there", annotations: [], logprobs: [] }],
        },
      ],
      parallel_tool_calls: true,
      previous_response_id: null,
      reasoning: { effort: "medium", summary: null },
      store: false,
      temperature: 0.7,
      text: { format: { type: "text" } },
      tool_choice: "auto",
      tools: [],
      top_p: 0.95,
      truncation: "disabled",
      usage: {
        input_tokens: 12,
        input_tokens_details: { cached_tokens: 3, cache_write_tokens: 0 },
        output_tokens: 5,
        output_tokens_details: { reasoning_tokens: 3 },
        total_tokens: 17,
      },
      svc_complexity: expect.objectContaining({ mode: "thinking", reasoning_tokens: 3, prompt_tokens: 12 }),
    });
    // Without the key's trace flag the thought appears nowhere.
    expect(res.body).not.toContain("let me think");
  });

  it("a key with the trace flag gets a reasoning item whose summary holds the thought; turning it off removes it", async () => {
    engine.script = sayHi;
    const on = (await post(hello, { authorization: `Bearer ${traceKey}` })).json();
    expect(on.output).toEqual([
      { id: expect.stringMatching(/^rs_/), type: "reasoning", summary: [{ type: "summary_text", text: "let me think" }] },
      expect.objectContaining({ type: "message", content: [expect.objectContaining({ text: "Hello there" })] }),
    ]);
    expect(on.usage.output_tokens_details.reasoning_tokens).toBe(3);
    t.keys.setReasoningTrace(traceKeyId, false);
    try {
      const off = (await post(hello, { authorization: `Bearer ${traceKey}` })).json();
      expect(off.output.map((i: { type: string }) => i.type)).toEqual(["message"]);
      expect(off.usage.output_tokens_details.reasoning_tokens).toBe(3);
    } finally {
      t.keys.setReasoningTrace(traceKeyId, true);
    }
  });

  it("tool calls come back as function_call items with call_id, name and JSON arguments; no empty message", async () => {
    engine.script = () => [
      { type: "start", mode: "fast", promptTokens: 5, cachedTokens: 0 },
      { type: "tool_call.start", index: 0, id: "call_abc", name: "f" },
      { type: "tool_call.delta", index: 0, argumentsDelta: '{"a":1}' },
      { type: "tool_call.end", index: 0, arguments: '{"a":1}' },
      { type: "done", outcome: outcome({ mode: "fast", stopReason: "tool_calls", toolCalls: [{ id: "call_abc", name: "f", arguments: '{"a":1}' }] }) },
    ];
    const body = (await post({ ...hello, tools: [{ type: "function", name: "f" }] })).json();
    expect(body.status).toBe("completed");
    expect(body.output).toEqual([
      { id: expect.stringMatching(/^fc_/), type: "function_call", status: "completed", call_id: "call_abc", name: "f", arguments: '{"a":1}' },
    ]);
    expect(body.tools).toEqual([{ type: "function", name: "f", description: null, parameters: null, strict: null }]);
  });

  it("running out of max_output_tokens is status incomplete with reason max_output_tokens", async () => {
    engine.script = () => [
      { type: "start", mode: "fast", promptTokens: 4, cachedTokens: 0 },
      { type: "text.delta", text: "Sure" },
      { type: "done", outcome: outcome({ mode: "fast", text: "Sure", stopReason: "max_tokens" }) },
    ];
    const body = (await post({ ...hello, max_output_tokens: 1 })).json();
    expect(body).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, max_output_tokens: 1 });
    expect(body.output[0]).toMatchObject({ status: "incomplete", content: [{ text: "Sure" }] });
  });

  it("engine errors before the first token are plain HTTP errors, streamed or not", async () => {
    engine.script = () => new AppError("invalid_request", "Prompt too long.", { code: "context_length_exceeded", param: "messages" });
    const res = await post(hello);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: "context_length_exceeded" });
    const streamed = await post({ ...hello, stream: true });
    expect(streamed.statusCode).toBe(400);
    expect(streamed.headers["content-type"]).toContain("application/json");
  });

  it("an unexpected engine failure is a 500 server_error", async () => {
    engine.script = () => new Error("boom");
    const res = await post(hello);
    expect(res.statusCode).toBe(500);
    expect(res.json().error).toMatchObject({ type: "server_error", code: "internal_error" });
  });
});

describe("streaming", () => {
  it("sends the spec's events in order with sequence numbers and event lines, no [DONE], and the full object last", async () => {
    engine.script = sayHi;
    const res = await post({ ...hello, stream: true });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toContain("text/event-stream");
    expect(res.headers["x-request-id"]).toMatch(/^req_/);
    expect(res.body).not.toContain("[DONE]");
    const list = events(res.body);
    expect(list.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(list.map((e) => e.sequence_number)).toEqual(list.map((_, i) => i));
    const id = list[0].response.id;
    expect(id).toMatch(/^resp_/);
    expect(list[0].response).toMatchObject({ status: "in_progress", output: [], usage: null, store: false });
    expect(list.slice(4, 6).map((e) => e.delta).join("")).toBe("Hello there");
    const completed = list.at(-1).response;
    expect(completed).toMatchObject({
      id,
      status: "completed",
      output: [list[8].item],
      usage: { input_tokens: 12, output_tokens: 5, output_tokens_details: { reasoning_tokens: 3 }, total_tokens: 17 },
      svc_complexity: { mode: "thinking" },
    });
    expect(res.body).not.toContain("let me think");
  });

  it("a trace-enabled key gets the reasoning summary events before the answer", async () => {
    engine.script = sayHi;
    const list = events((await post({ ...hello, stream: true }, { authorization: `Bearer ${traceKey}` })).body);
    const types = list.map((e) => e.type);
    expect(types.slice(2, 9)).toEqual([
      "response.output_item.added",
      "response.reasoning_summary_part.added",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.done",
      "response.reasoning_summary_part.done",
      "response.output_item.done",
      "response.output_item.added",
    ]);
    expect(list[4]).toMatchObject({ output_index: 0, summary_index: 0, delta: "let me think" });
    expect(types.indexOf("response.reasoning_summary_text.delta")).toBeLessThan(types.indexOf("response.output_text.delta"));
    expect(list.at(-1).response.output.map((i: { type: string }) => i.type)).toEqual(["reasoning", "message"]);
  });

  it("streams a tool call as function_call_arguments deltas", async () => {
    engine.script = () => [
      { type: "start", mode: "fast", promptTokens: 5, cachedTokens: 0 },
      { type: "tool_call.start", index: 0, id: "call_x", name: "f" },
      { type: "tool_call.delta", index: 0, argumentsDelta: '{"a"' },
      { type: "tool_call.delta", index: 0, argumentsDelta: ":1}" },
      { type: "tool_call.end", index: 0, arguments: '{"a":1}' },
      { type: "done", outcome: outcome({ mode: "fast", stopReason: "tool_calls", toolCalls: [{ id: "call_x", name: "f", arguments: '{"a":1}' }] }) },
    ];
    const list = events((await post({ ...hello, stream: true, tools: [{ type: "function", name: "f" }] })).body);
    expect(list.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(list[2].item).toMatchObject({ type: "function_call", call_id: "call_x", name: "f", arguments: "", status: "in_progress" });
    expect(list[5]).toMatchObject({ item_id: list[2].item.id, name: "f", arguments: '{"a":1}' });
    expect(list.at(-1).response.output).toEqual([list[6].item]);
  });

  it("a failure after the stream began ends with response.failed carrying error {code, message}", async () => {
    engine.script = () => answer("one two three four five");
    engine.failAfter = 3;
    try {
      const res = await post({ ...hello, stream: true });
      expect(res.statusCode).toBe(200);
      const list = events(res.body);
      expect(list[0].type).toBe("response.created");
      const last = list.at(-1);
      expect(last.type).toBe("response.failed");
      expect(last.response).toMatchObject({ status: "failed", error: { code: "internal_error", message: expect.any(String) }, usage: null });
      expect(list.filter((e) => e.type === "response.completed")).toHaveLength(0);
      // The OpenAI SDKs throw on a top-level error member; the failure is inside the response.
      expect(sseData(res.body).every((d: any) => d.error === undefined)).toBe(true);
    } finally {
      engine.failAfter = null;
    }
  });
});

describe("no model loaded", () => {
  it("answers 503 with Retry-After", async () => {
    const empty = await buildTestApp(null);
    try {
      const res = await empty.app.inject({ method: "POST", url: "/v1/responses", headers: { authorization: `Bearer ${empty.key}` }, payload: hello });
      expect(res.statusCode).toBe(503);
      expect(Number(res.headers["retry-after"])).toBeGreaterThan(0);
      expect(res.json().error.type).toBe("server_error");
    } finally {
      await empty.close();
    }
  });
});
