// The scheduler and limits through HTTP with scripted engines: rate headers on every surface (streams
// included), 429 with Retry-After in each surface's format, X-Timezone, schemas checked before any model,
// keep-alives while a stream waits, output checked against its schema, and the request observer.
import { afterEach, describe, expect, it } from "vitest";
import { EngineHost } from "../../server/engine/engine-host.js";
import type { Engine, EngineEvent, EngineRequest, EngineStatus } from "../../server/engine/types.js";
import type { RequestContext, RequestOutcome } from "../../server/core/request-context.js";
import { answer, FakeEngine } from "../support/fake-engine.js";
import { buildTestApp, sseData, type TestApp, type TestAppOptions } from "../support/test-app.js";

/** Answers "ok"; while `gate` is set, each generation waits on it after its start event. */
class GatedEngine implements Engine {
  gate: Promise<void> | null = null;
  open: () => void = () => undefined;
  running = 0;
  constructor(private readonly sequences = 1) {}

  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.gate = null;
    this.open();
  }

  status(): EngineStatus {
    return {
      state: "ready",
      model: { path: "/m/g.gguf", name: "g", sizeBytes: 1, trainContextSize: 4096, contextSize: 4096, sequences: this.sequences, threads: 1 },
      gpu: null,
      error: null,
    };
  }

  async countPromptTokens(): Promise<number> {
    return 1;
  }

  async *generate(_request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent, void, void> {
    this.running++;
    try {
      const events = answer("ok");
      yield events[0]!;
      while (this.gate && !signal.aborted) await Promise.race([this.gate, new Promise((r) => setTimeout(r, 5))]);
      if (signal.aborted) return;
      yield* events.slice(1);
    } finally {
      this.running--;
    }
  }

  async close(): Promise<void> {}
}

let t: TestApp | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
});

async function app(engine: Engine | EngineHost | null, options: TestAppOptions = {}): Promise<TestApp> {
  t = await buildTestApp(engine, options);
  return t;
}

const chatBody = { messages: [{ role: "user", content: "Hi" }] };
const messagesBody = { model: "claude-haiku-4-5", max_tokens: 16, messages: [{ role: "user", content: "Hi" }] };
const responsesBody = { input: "Hi" };

function chat(test: TestApp, body: unknown = chatBody, headers: Record<string, string> = {}, key = test.key) {
  return test.app.inject({ method: "POST", url: "/v1/chat/completions", headers: { authorization: `Bearer ${key}`, ...headers }, payload: body as object });
}
function messages(test: TestApp, body: unknown = messagesBody, headers: Record<string, string> = {}, key = test.key) {
  return test.app.inject({ method: "POST", url: "/v1/messages", headers: { "x-api-key": key, ...headers }, payload: body as object });
}
function responses(test: TestApp, body: unknown = responsesBody, headers: Record<string, string> = {}) {
  return test.app.inject({ method: "POST", url: "/v1/responses", headers: { authorization: `Bearer ${test.key}`, ...headers }, payload: body as object });
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await condition()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function queued(test: TestApp): Promise<number> {
  return (await test.app.inject({ url: "/health" })).json().requests.queued;
}

describe("rate headers", () => {
  it("every surface's responses carry the account's concurrency limit, what is left and when it resets", async () => {
    const test = await app(new FakeEngine(), { accountLimit: 3 });
    for (const res of [await chat(test), await messages(test), await responses(test)]) {
      expect(res.statusCode).toBe(200);
      expect(res.headers).toMatchObject({ "x-ratelimit-limit": "3", "x-ratelimit-remaining": "3", "x-ratelimit-reset": "0" });
    }
    // Streams carry them too, sent with the headers, while the stream itself is in flight.
    for (const res of [
      await chat(test, { ...chatBody, stream: true }),
      await messages(test, { ...messagesBody, stream: true }),
      await responses(test, { ...responsesBody, stream: true }),
    ]) {
      expect(res.headers["content-type"]).toMatch(/^text\/event-stream/);
      expect(res.headers).toMatchObject({ "x-ratelimit-limit": "3", "x-ratelimit-remaining": "2", "x-ratelimit-reset": "0" });
    }
    // Other key endpoints and errors after authentication carry them as well; keyless ones do not.
    const counted = await test.app.inject({ method: "POST", url: "/v1/messages/count_tokens", headers: { "x-api-key": test.key }, payload: messagesBody });
    expect(counted.headers["x-ratelimit-limit"]).toBe("3");
    const invalid = await chat(test, { messages: [] });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.headers["x-ratelimit-limit"]).toBe("3");
    expect((await test.app.inject({ url: "/health" })).headers["x-ratelimit-limit"]).toBeUndefined();
    expect((await chat(test, chatBody, { authorization: "Bearer nope" })).headers["x-ratelimit-limit"]).toBeUndefined();
  });

  it("defaults the limit to four requests per sequence of the loaded model", async () => {
    const test = await app(new GatedEngine(2));
    expect((await chat(test)).headers["x-ratelimit-limit"]).toBe("8");
    const health = (await test.app.inject({ url: "/health" })).json();
    expect(health.requests).toMatchObject({ active: 0, queued: 0, account_limit: 8, queue_limit: 64 });
  });
});

describe("429 over the limits", () => {
  it("an account over its concurrency limit gets 429 with Retry-After and the rate headers, in the surface's format", async () => {
    const engine = new GatedEngine(1);
    const test = await app(engine, { accountLimit: 2 });
    engine.hold();
    const running = chat(test, { ...chatBody, stream: true });
    await until(() => engine.running === 1, "the first request to run");
    const waiting = messages(test, { ...messagesBody, stream: true });
    await until(async () => (await queued(test)) === 1, "the second request to wait");

    const refused = await chat(test);
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    expect(refused.headers).toMatchObject({ "x-ratelimit-limit": "2", "x-ratelimit-remaining": "0" });
    expect(Number(refused.headers["x-ratelimit-reset"])).toBeGreaterThanOrEqual(1);
    expect(refused.json().error).toMatchObject({ type: "rate_limit_error", code: "concurrency_limit_exceeded" });

    const refusedMessages = await messages(test);
    expect(refusedMessages.statusCode).toBe(429);
    expect(refusedMessages.headers["retry-after"]).toBeDefined();
    expect(refusedMessages.json()).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });

    // Another account is not limited by this one.
    const other = test.keys.create({ account: "other" }).key;
    const otherRes = chat(test, chatBody, {}, other);
    engine.release();
    expect((await otherRes).statusCode).toBe(200);
    expect((await running).statusCode).toBe(200);
    expect((await waiting).statusCode).toBe(200);
    expect((await chat(test)).statusCode).toBe(200);
  });

  it("a full queue gets 429 queue_full whatever the account", async () => {
    const engine = new GatedEngine(1);
    const test = await app(engine, { maxQueue: 1 });
    engine.hold();
    const keys = Array.from({ length: 3 }, (_, i) => test.keys.create({ account: `a${i}` }).key);
    const running = chat(test, chatBody, {}, keys[0]);
    await until(() => engine.running === 1, "the first request to run");
    const waiting = chat(test, chatBody, {}, keys[1]);
    await until(async () => (await queued(test)) === 1, "the second request to wait");
    const refused = await chat(test, chatBody, {}, keys[2]);
    expect(refused.statusCode).toBe(429);
    expect(refused.json().error.code).toBe("queue_full");
    expect(Number(refused.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    engine.release();
    expect((await running).statusCode).toBe(200);
    expect((await waiting).statusCode).toBe(200);
  });
});

describe("X-Timezone", () => {
  it("accepts IANA names, and an unknown zone is a 400 naming the header in the surface's format", async () => {
    const test = await app(new FakeEngine());
    expect((await chat(test, chatBody, { "x-timezone": "Europe/Berlin" })).statusCode).toBe(200);
    const bad = await chat(test, chatBody, { "x-timezone": "Mars/Olympus_Mons" });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatchObject({ param: "X-Timezone", code: "invalid_timezone" });
    expect(bad.json().error.message).toContain("Mars/Olympus_Mons");
    const badMessages = await messages(test, messagesBody, { "x-timezone": "Not/AZone" });
    expect(badMessages.statusCode).toBe(400);
    expect(badMessages.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    expect(badMessages.json().error.message).toContain("X-Timezone");
    // The key is checked first, and keyless endpoints ignore the header.
    expect((await chat(test, chatBody, { "x-timezone": "Nope", authorization: "Bearer bad" })).statusCode).toBe(401);
    expect((await test.app.inject({ url: "/health", headers: { "x-timezone": "Nope" } })).statusCode).toBe(200);
  });

  it("is carried in the request context, in its canonical spelling, UTC by default", async () => {
    const seen: RequestContext[] = [];
    const test = await app(new FakeEngine(), { observers: [(ctx) => seen.push(ctx)] });
    await chat(test, chatBody, { "x-timezone": "america/new_york" });
    await chat(test);
    await until(() => seen.length === 2, "both requests to be observed");
    expect(seen.map((c) => c.timezone)).toEqual(["America/New_York", "UTC"]);
  });
});

describe("schemas are checked before anything waits for the model", () => {
  const badSchema = { type: "object", properties: { n: { type: "integer" } }, not: { required: ["n"] } };

  it("a schema the server cannot honour is a 400 with no model loaded; a good one then gets the 503", async () => {
    const test = await app(null);
    const res = await chat(test, { ...chatBody, response_format: { type: "json_schema", json_schema: { name: "x", schema: badSchema } } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: "invalid_schema", param: "response_format.json_schema.schema" });
    const tool = await messages(test, { ...messagesBody, tools: [{ name: "t", input_schema: badSchema }] });
    expect(tool.statusCode).toBe(400);
    expect(tool.json().error.message).toContain("tools[0].input_schema");
    // Written as text: JSON.stringify itself cannot go this deep.
    const depth = 20_000;
    const deep = '{"type":"object","properties":{"a":'.repeat(depth) + '{"type":"object"}' + "}}".repeat(depth);
    const tooDeep = await chat(test, `{"messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":${deep}}}}`, {
      "content-type": "application/json",
    });
    // Deeper than any JSON body may nest: refused before the schema is looked at, naming where.
    expect(tooDeep.statusCode).toBe(400);
    expect(tooDeep.json().error).toMatchObject({ code: "nesting_too_deep", param: "response_format.json_schema.schema.properties.a" });
    // Deeper than a schema may nest, though the body itself is fine: the schema's own limit, named.
    const deepish = '{"type":"object","properties":{"a":'.repeat(40) + '{"type":"object"}' + "}}".repeat(40);
    const overLimit = await chat(test, `{"messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":${deepish}}}}`, {
      "content-type": "application/json",
    });
    expect(overLimit.statusCode).toBe(400);
    expect(overLimit.json().error).toMatchObject({ code: "invalid_schema", param: "response_format.json_schema.schema" });
    expect(overLimit.json().error.message).toContain("nested more than 64 levels deep, the limit");
    const good = await chat(test, { ...chatBody, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object" } } } });
    expect(good.statusCode).toBe(503);
  });

  it("output that breaks its own schema is reported as a server error and logged, never returned as if valid", async () => {
    const lines: string[] = [];
    const engine = new FakeEngine(() => answer('{"n": "three"}'));
    const test = await app(engine, { log: (level, message) => lines.push(`${level}: ${message}`) });
    const schema = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
    const res = await chat(test, { ...chatBody, response_format: { type: "json_schema", json_schema: { name: "x", schema } } });
    expect(res.statusCode).toBe(500);
    expect(res.json().error.code).toBe("output_validation_failed");
    expect(res.json().error.message).toContain("server bug");
    expect(lines.some((l) => l.startsWith("error: Structured output failed its own schema"))).toBe(true);
    expect(lines.some((l) => l.includes(res.headers["x-request-id"] as string))).toBe(true);
    // Streaming: the text already went out; the stream ends with an error frame instead of a clean finish.
    const streamed = sseData((await chat(test, { ...chatBody, stream: true, response_format: { type: "json_schema", json_schema: { name: "x", schema } } })).body);
    expect(streamed.at(-1)).toMatchObject({ error: { code: "output_validation_failed" } });
    // Cut by max_tokens, JSON is incomplete by design and passes through.
    engine.script = () => [
      { type: "start", mode: "fast", promptTokens: 3, cachedTokens: 0 },
      { type: "text.delta", text: '{"n": 1' },
      {
        type: "done",
        outcome: { mode: "fast", text: '{"n": 1', reasoning: "", toolCalls: [], stopReason: "max_tokens", stopSequence: null, usage: { promptTokens: 3, cachedTokens: 0, completionTokens: 4, reasoningTokens: 0 } },
      },
    ];
    const cut = await chat(test, { ...chatBody, response_format: { type: "json_schema", json_schema: { name: "x", schema } } });
    expect(cut.json().choices[0].finish_reason).toBe("length");
  });
});

describe("strict schemas (issue 36)", () => {
  const set = { type: "object", properties: { tags: { type: "array", items: { type: "string" }, uniqueItems: true } }, required: ["tags"] };

  it("uniqueItems over strings: a 400 under strict (Chat and Responses, tools and answers), best effort without", async () => {
    const engine = new FakeEngine(() => answer('{"tags":["a","a"]}'));
    const test = await app(engine);
    const strictChat = await chat(test, { ...chatBody, response_format: { type: "json_schema", json_schema: { name: "x", schema: set, strict: true } } });
    expect(strictChat.statusCode).toBe(400);
    expect(strictChat.json().error).toMatchObject({ code: "invalid_schema", param: "response_format.json_schema.schema" });
    expect(strictChat.json().error.message).toContain("uniqueItems");
    const strictTool = await chat(test, { ...chatBody, tools: [{ type: "function", function: { name: "f", parameters: set, strict: true } }] });
    expect(strictTool.statusCode).toBe(400);
    expect(strictTool.json().error).toMatchObject({ code: "invalid_schema", param: "tools[0].function.parameters" });
    // Responses function tools are strict unless they say otherwise, as on OpenAI.
    const responsesTool = await responses(test, { ...responsesBody, tools: [{ type: "function", name: "f", parameters: set }] });
    expect(responsesTool.statusCode).toBe(400);
    expect(responsesTool.json().error.code).toBe("invalid_schema");
    const looseTool = await responses(test, { ...responsesBody, tools: [{ type: "function", name: "f", parameters: set, strict: false }] });
    expect(looseTool.statusCode).toBe(200);
    // Not strict: a repeated item is the model's, not a server bug.
    const loose = await chat(test, { ...chatBody, response_format: { type: "json_schema", json_schema: { name: "x", schema: set } } });
    expect(loose.statusCode).toBe(200);
    expect(JSON.parse(loose.json().choices[0].message.content)).toEqual({ tags: ["a", "a"] });
  });

  it("top_k reaches the engine from Chat and Responses (an extension), as from Messages", async () => {
    const engine = new FakeEngine(() => answer("ok"));
    const test = await app(engine);
    expect((await chat(test, { ...chatBody, top_k: 7 })).statusCode).toBe(200);
    expect((await responses(test, { ...responsesBody, top_k: 9 })).statusCode).toBe(200);
    expect((await messages(test, { ...messagesBody, top_k: 11 })).statusCode).toBe(200);
    expect(engine.requests.map((r) => r.sampling.topK)).toEqual([7, 9, 11]);
    const zero = await chat(test, { ...chatBody, top_k: 0 });
    expect(zero.statusCode).toBe(400);
  });
});

describe("streams that wait", () => {
  it("send keep-alive comments while queued, then the events; headers (and rate headers) go out first", async () => {
    const engine = new GatedEngine(1);
    const test = await app(engine, { sseKeepAliveMs: 40 });
    engine.hold();
    const first = chat(test);
    await until(() => engine.running === 1, "the first request to run");
    const second = chat(test, { ...chatBody, stream: true });
    await new Promise((r) => setTimeout(r, 150));
    engine.release();
    await first;
    const res = await second;
    expect(res.statusCode).toBe(200);
    expect(res.headers["x-ratelimit-limit"]).toBe("4");
    const blocks = res.body.split("\n\n").filter((b) => b !== "");
    expect(blocks[0]).toBe(": keepalive");
    expect(blocks.indexOf(": keepalive")).toBeLessThan(blocks.findIndex((b) => b.startsWith("data:")));
    expect(sseData(res.body).at(-1)).toBe("[DONE]");
  });

  it("a failure after the stream committed goes out as the surface's error frame", async () => {
    const engine = new GatedEngine(1);
    const host = EngineHost.of(engine);
    const test = await app(host, { sseKeepAliveMs: 30 });
    engine.hold();
    const first = chat(test);
    await until(() => engine.running === 1, "the first request to run");
    const second = messages(test, { ...messagesBody, stream: true });
    await new Promise((r) => setTimeout(r, 100));
    // The model goes away while the stream waits for a sequence.
    const unloading = host.unload();
    const res = await second;
    expect(res.statusCode).toBe(200);
    expect(res.body.startsWith(": keepalive")).toBe(true);
    const events = res.body.split("\n\n").filter((b) => b.startsWith("event:"));
    expect(events).toHaveLength(1);
    expect(events[0]).toContain("event: error");
    expect(events[0]).toContain('"overloaded_error"');
    engine.release();
    await first;
    await unloading;
  });
});

describe("the request observer", () => {
  it("sees every request once, with what it did and never what it said", async () => {
    const seen: Array<{ ctx: RequestContext; outcome: RequestOutcome }> = [];
    // Markers no id or header could hold by chance (a random request id may well contain "Hi").
    const said = "prompt-marker-q7Zx";
    const answered = "answer-marker k3Wv"; // two words, as the usage below counts
    const test = await app(new FakeEngine(() => answer(answered, { reasoning: "hmm" })), { observers: [(ctx, outcome) => seen.push({ ctx, outcome })] });
    await chat(test, { messages: [{ role: "user", content: said }], session_id: "s1" });
    await messages(test, { ...messagesBody, messages: [{ role: "user", content: said }], stream: true });
    await chat(test, chatBody, { authorization: "Bearer nope" });
    await test.app.inject({ url: "/v1/nothing" });
    await until(() => seen.length === 4, "four observations");
    const [a, b, c, d] = seen;
    expect(a!.ctx).toMatchObject({ area: "chat", path: "/v1/chat/completions", inference: { model: "svc", mode: "thinking", sessionId: "s1" } });
    expect(a!.ctx.principal?.accountId).toMatch(/^acct_|./);
    expect(a!.ctx.inference.usage).toMatchObject({ promptTokens: 12, completionTokens: 3 });
    expect(a!.ctx.inference.ttftMs).toBeGreaterThanOrEqual(0);
    expect(a!.outcome).toMatchObject({ statusCode: 200, aborted: false });
    expect(b!.ctx).toMatchObject({ area: "messages", inference: { model: "claude-haiku-4-5" } });
    expect(b!.outcome.statusCode).toBe(200);
    expect(c!.ctx.principal).toBeNull();
    expect(c!.outcome.statusCode).toBe(401);
    expect(c!.ctx.errorCode).toBe("invalid_api_key");
    expect(d!.outcome.statusCode).toBe(404);
    expect(JSON.stringify(seen.map((s) => s.ctx))).not.toContain(answered);
    expect(JSON.stringify(seen.map((s) => s.ctx))).not.toContain(said);
  });

  it("a failing observer never fails the request", async () => {
    const test = await app(new FakeEngine(), {
      observers: [
        () => {
          throw new Error("observer broke");
        },
      ],
    });
    expect((await chat(test)).statusCode).toBe(200);
  });
});
