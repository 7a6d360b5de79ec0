// Issue 38, item 3: deep item lists gave a 500. A 4 MB Responses body of 150k empty input items overflowed
// the stack in decodeResponsesRequest (`messages.push(...input.messages)`); so did /v1/responses/compact and
// /v1/agent/run with 1M items. Nothing bounded the number of items, messages, content parts or tools, and
// 1M empty text parts in 30 MB held the event loop about a second. Each list now has a limit (docs/api.md,
// "Limits on lists"), answered with a 400 in the surface's format naming the list and the limit, and the
// body's text is checked before it is parsed, so that what it costs follows its bytes, not its items.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { deeperThan } from "../../server/core/json-depth.js";
import { JsonTextScanner, type JsonTextLimits } from "../../server/core/json-scan.js";
import { MAX_BODY_VALUES } from "../../server/http/body-limits.js";
import { MAX_CONTENT_PARTS, MAX_INPUT_ITEMS, MAX_TOOLS } from "../../server/surfaces/list-limits.js";
import { FakeEngine } from "../support/fake-engine.js";
import { createKey, pollHealth, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";
import { buildTestApp, type TestApp } from "../support/test-app.js";

/** `count` copies of `item` as a JSON array's text (JSON.stringify of a million objects is slow itself). */
const list = (item: string, count: number) => `[${Array(count).fill(item).join(",")}]`;

describe("each list has a limit: a 400 in the surface's format naming the list and the limit", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(new FakeEngine());
  });
  afterAll(async () => t.close());

  const post = (url: string, payload: string, anthropic = false) =>
    t.app.inject({
      method: "POST",
      url,
      headers: { ...(anthropic ? { "x-api-key": t.key } : { authorization: `Bearer ${t.key}` }), "content-type": "application/json" },
      payload,
    });

  function expectOpenAI(res: Awaited<ReturnType<typeof post>>, param: string, limit: number): void {
    expect(res.statusCode, res.body.slice(0, 300)).toBe(400);
    expect(res.json()).toEqual({
      error: { type: "invalid_request_error", code: "too_many_items", param, message: `'${param}' has more than ${limit} items, the limit.` },
    });
  }

  function expectAnthropic(res: Awaited<ReturnType<typeof post>>, param: string, limit: number): void {
    expect(res.statusCode, res.body.slice(0, 300)).toBe(400);
    expect(res.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: `'${param}' has more than ${limit} items, the limit.` } });
  }

  it("Responses: 150k empty input items (4 MB) are a 400 naming input, not a stack overflow", async () => {
    const res = await post("/v1/responses", `{"model":"svc","input":${list("{}", 150_000)}}`);
    expectOpenAI(res, "input", MAX_INPUT_ITEMS);
  });

  it("/v1/responses/compact and /v1/agent/run: the same, at 150k items and at a million", async () => {
    expectOpenAI(await post("/v1/responses/compact", `{"model":"svc","input":${list("{}", 150_000)}}`), "input", MAX_INPUT_ITEMS);
    expectOpenAI(await post("/v1/agent/run", `{"input":${list("{}", 150_000)}}`), "input", MAX_INPUT_ITEMS);
    for (const url of ["/v1/responses/compact", "/v1/agent/run"]) {
      const res = await post(url, `{"model":"svc","input":${list("{}", 1_000_000)}}`);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code: "too_many_items", param: "input" });
      expect(res.json().error.message).toContain(`more than ${MAX_BODY_VALUES} values`);
    }
  });

  it("Responses: content parts of an item, a tool output's parts, reasoning summaries, tools and a namespace's functions", async () => {
    const part = '{"type":"input_text","text":"x"}';
    const over = MAX_CONTENT_PARTS + 1;
    expectOpenAI(await post("/v1/responses", `{"input":[{"role":"user","content":${list(part, over)}}]}`), "input[0].content", MAX_CONTENT_PARTS);
    expectOpenAI(
      await post(
        "/v1/responses",
        `{"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":${list(part, over)}}],"tools":[{"type":"function","name":"f"}]}`,
      ),
      "input[2].output",
      MAX_CONTENT_PARTS,
    );
    expectOpenAI(
      await post("/v1/responses", `{"input":[{"type":"reasoning","summary":${list('{"type":"summary_text","text":"x"}', over)}},{"role":"user","content":"hi"}]}`),
      "input[0].summary",
      MAX_CONTENT_PARTS,
    );
    const tools = Array.from({ length: MAX_TOOLS + 1 }, (_, i) => ({ type: "function", name: `f${i}` }));
    expectOpenAI(await post("/v1/responses", JSON.stringify({ input: "hi", tools })), "tools", MAX_TOOLS);
    expectOpenAI(await post("/v1/responses", JSON.stringify({ input: "hi", tools: [{ type: "namespace", name: "ns", tools }] })), "tools[0].tools", MAX_TOOLS);
    expectOpenAI(await post("/v1/agent/run", JSON.stringify({ input: "hi", tools })), "tools", MAX_TOOLS);
  });

  it("Chat: content parts and tool calls of a message", async () => {
    const over = MAX_CONTENT_PARTS + 1;
    expectOpenAI(
      await post("/v1/chat/completions", `{"messages":[{"role":"user","content":${list('{"type":"text","text":"x"}', over)}}]}`),
      "messages[0].content",
      MAX_CONTENT_PARTS,
    );
    const calls = Array.from({ length: 513 }, (_, i) => ({ id: `c${i}`, type: "function", function: { name: "f", arguments: "{}" } }));
    expectOpenAI(
      await post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }, { role: "assistant", tool_calls: calls }] })),
      "messages[1].tool_calls",
      512,
    );
  });

  it("Messages: blocks of a message, of a tool result and of the system prompt, and tools (in Anthropic's format)", async () => {
    const over = MAX_CONTENT_PARTS + 1;
    const text = '{"type":"text","text":"x"}';
    expectAnthropic(
      await post("/v1/messages", `{"model":"svc","max_tokens":5,"messages":[{"role":"user","content":${list(text, over)}}]}`, true),
      "messages[0].content",
      MAX_CONTENT_PARTS,
    );
    expectAnthropic(
      await post(
        "/v1/messages",
        `{"model":"svc","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":${list(text, over)}}]}]}`,
        true,
      ),
      "messages[2].content[0].content",
      MAX_CONTENT_PARTS,
    );
    expectAnthropic(
      await post("/v1/messages", `{"model":"svc","max_tokens":5,"system":${list(text, over)},"messages":[{"role":"user","content":"hi"}]}`, true),
      "system",
      MAX_CONTENT_PARTS,
    );
    const tools = Array.from({ length: MAX_TOOLS + 1 }, (_, i) => ({ name: `f${i}`, input_schema: { type: "object" } }));
    expectAnthropic(await post("/v1/messages", JSON.stringify({ model: "svc", max_tokens: 5, messages: [{ role: "user", content: "hi" }], tools }), true), "tools", MAX_TOOLS);
  });

  it("lists at their limits are served", async () => {
    const items = Array.from({ length: 1000 }, (_, i) => (i % 2 ? { role: "assistant", content: "ok" } : { role: "user", content: [{ type: "input_text", text: "hi" }] }));
    items.push({ role: "user", content: Array.from({ length: MAX_CONTENT_PARTS }, () => ({ type: "input_text", text: "x" })) });
    const tools = Array.from({ length: MAX_TOOLS }, (_, i) => ({ type: "function", name: `f${i}`, parameters: { type: "object" } }));
    const res = await post("/v1/responses", JSON.stringify({ model: "svc", input: items, tools }));
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
  });
});

describe("the body's bytes are checked as they arrive, in whatever chunks", () => {
  /** The scanner's answer for `text` cut into chunks of `size` bytes. */
  function scanInChunks(text: string, size: number, limits: JsonTextLimits) {
    const bytes = Buffer.from(text);
    const scanner = new JsonTextScanner(limits);
    for (let i = 0; i < bytes.length && !scanner.problem; i += size) scanner.push(bytes.subarray(i, i + size));
    return scanner.problem;
  }

  it("finds the same limit, at the same place, however the bytes are cut (strings, escapes and keys across chunks)", () => {
    const deep = (depth: number) => '{"a":{"b":[' + '{"k\\\"ey":'.repeat(depth) + '"v"' + "}".repeat(depth) + "]}}";
    const cases: Array<[string, JsonTextLimits]> = [
      [JSON.stringify({ messages: [{ role: "user", content: [{ type: "tool_use", input: JSON.parse("[".repeat(600) + "]".repeat(600)) }] }] }), { maxDepth: 512, maxValues: 1e6 }],
      [deep(520), { maxDepth: 512, maxValues: 1e6 }],
      [JSON.stringify({ "quo\"te": 'a \\" b', "ünï": "x\\", input: [{ role: "user", content: Array.from({ length: 50 }, (_, i) => ({ type: "input_text", text: `"${i}\\` })) }] }), { maxDepth: 512, maxValues: 120 }],
      [JSON.stringify({ a: [1, 2, 3], b: { x: "y\\", z: [] }, c: "}]{[,", d: [[], {}, [[]]] }), { maxDepth: 512, maxValues: 9 }],
      [JSON.stringify({ ok: "within every limit", list: [1, [2, [3]], { "\\": "\"" }] }), { maxDepth: 512, maxValues: 100 }],
    ];
    for (const [text, limits] of cases) {
      const whole = scanInChunks(text, text.length * 4, limits);
      for (const size of [1, 2, 3, 5, 7, 64, 65, 100]) expect(scanInChunks(text, size, limits), `${text.slice(0, 40)} in chunks of ${size}`).toEqual(whole);
    }
    // The depth found is where the walk over the parsed value finds it.
    const text = cases[0]![0];
    expect(scanInChunks(text, 7, cases[0]![1])).toEqual({ limit: "depth", where: deeperThan(JSON.parse(text), 512) });
    expect(scanInChunks(cases[3]![0], 3, cases[3]![1])).toEqual({ limit: "values", where: "d" });
    expect(scanInChunks(cases[4]![0], 3, cases[4]![1])).toBeNull();
  });
});

describe("what a body of many items costs follows its bytes (a real server)", () => {
  let server: SvcServer;
  let key: string;
  beforeAll(async () => {
    const dataDir = tempDataDir();
    key = createKey(dataDir);
    server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
  });
  afterAll(async () => {
    expect(await server.stop()).toBe(0);
  });

  /** The longest /health answer while `body` is posted to /v1/responses (polled from this process), and the answer. */
  async function stallDuring(body: Uint8Array<ArrayBuffer>): Promise<{ stallMs: number; status: number; error: { code: string; param: string } }> {
    const health = pollHealth(server.url);
    await new Promise((r) => setTimeout(r, 100));
    const res = await fetch(`${server.url}/v1/responses`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body });
    const error = ((await res.json()) as { error: { code: string; param: string } }).error;
    await new Promise((r) => setTimeout(r, 100));
    const latencies = await health.stop();
    expect(latencies.length).toBeGreaterThan(5);
    return { stallMs: Math.max(...latencies), status: res.status, error };
  }

  it("1M empty text parts in 30 MB: a 400 naming the list, holding the server no longer than 30 MB of plain text does", { retry: 2 }, async () => {
    // Built beforehand, as bytes: this process's own work must not show as the server's.
    const parts = new TextEncoder().encode(`{"model":"svc","input":[{"role":"user","content":${list('{"type":"input_text","text":""}', 1_000_000)}}]}`);
    const plain = new TextEncoder().encode(`{"model":"svc","input":"${"x".repeat(parts.length - 30)}"}`);
    expect(parts.length).toBeGreaterThan(30_000_000);
    await stallDuring(plain); // the first large body also pays for the heap's growth
    const text = await stallDuring(plain);
    expect(text.status).toBe(400); // longer than the context can hold
    const items = await stallDuring(parts);
    expect(items.status).toBe(400);
    expect(items.error).toMatchObject({ code: "too_many_items", param: "input[0].content" });
    // Before the body's text was checked, the items held the event loop 0.9 to 1.3 s (30 MB of text: 0.1 to 0.15 s).
    expect(items.stallMs, `1M parts: ${items.stallMs.toFixed(0)} ms; 30 MB of text: ${text.stallMs.toFixed(0)} ms`).toBeLessThan(text.stallMs + 150);
    expect(items.stallMs).toBeLessThan(400);
  });
});
