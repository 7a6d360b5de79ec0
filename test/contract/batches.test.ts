// Message batches through HTTP with a scripted engine: the batch object and its transitions, up-front
// validation (400 listing the bad entries), limits (count, bytes, 50 in flight), Idempotency-Key, list
// pagination, cancel, delete (bytes gone from the database files), results as JSONL in request order,
// errored lines, the 24 h deadline and the 29-day retention, and resuming after a crash.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connect, type AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import type { Engine, EngineEvent, EngineRequest, EngineStatus } from "../../server/engine/types.js";
import { BatchService } from "../../server/features/batches/batch-service.js";
import { InferencePipeline, schedulerForHost } from "../../server/pipeline/pipeline.js";
import { EngineHost } from "../../server/engine/engine-host.js";
import { DATABASE_FILE } from "../../server/store/database.js";
import { answer } from "../support/fake-engine.js";
import { buildTestApp, type TestApp, type TestAppOptions } from "../support/test-app.js";

/**
 * Answers "echo <last user text>"; "FAIL" in a prompt fails before the start. While held, each generation
 * waits after its start event until let through (allow(n) lets n finish; release() lets all).
 */
class BatchEngine implements Engine {
  private passes: number | null = null;
  running = 0;
  started: string[] = [];
  constructor(private readonly sequences = 1) {}

  hold(): void {
    this.passes = 0;
  }

  allow(n: number): void {
    this.passes = (this.passes ?? 0) + n;
  }

  release(): void {
    this.passes = null;
  }

  status(): EngineStatus {
    return {
      state: "ready",
      model: { path: "/m/b.gguf", name: "b", sizeBytes: 1, trainContextSize: 4096, contextSize: 4096, sequences: this.sequences, threads: 1 },
      gpu: null,
      error: null,
    };
  }

  async countPromptTokens(): Promise<number> {
    return 1;
  }

  async *generate(request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent, void, void> {
    const last = request.messages.at(-1)!;
    const text = last.content.map((p) => (p.type === "text" ? p.text : "")).join("");
    if (text.includes("FAIL")) throw new AppError("invalid_request", "The prompt is longer than the context (test).", { code: "context_length_exceeded" });
    this.running++;
    this.started.push(text);
    try {
      const events = answer(`echo ${text}`);
      yield events[0]!;
      while (this.passes === 0 && !signal.aborted) await new Promise((r) => setTimeout(r, 5));
      if (signal.aborted) return;
      if (this.passes !== null) this.passes--;
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

const params = (text: string, extra: Record<string, unknown> = {}) => ({ model: "claude-haiku-4-5", max_tokens: 16, messages: [{ role: "user", content: text }], ...extra });
const requests = (n: number, prefix = "r") => Array.from({ length: n }, (_, i) => ({ custom_id: `${prefix}${i}`, params: params(`${prefix}${i}`) }));

function create(test: TestApp, body: unknown, headers: Record<string, string> = {}, key = test.key) {
  return test.app.inject({
    method: "POST",
    url: "/v1/messages/batches",
    headers: { "x-api-key": key, "content-type": "application/json", ...headers },
    payload: typeof body === "string" ? body : JSON.stringify(body),
  });
}
function get(test: TestApp, path: string, key = test.key) {
  return test.app.inject({ method: "GET", url: `/v1/messages/batches${path}`, headers: { "x-api-key": key } });
}
function cancel(test: TestApp, id: string, key = test.key) {
  return test.app.inject({ method: "POST", url: `/v1/messages/batches/${id}/cancel`, headers: { "x-api-key": key } });
}
function del(test: TestApp, id: string, key = test.key) {
  return test.app.inject({ method: "DELETE", url: `/v1/messages/batches/${id}`, headers: { "x-api-key": key } });
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await condition()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function ended(test: TestApp, id: string) {
  await until(async () => (await get(test, `/${id}`)).json().processing_status === "ended", `batch ${id} to end`);
  return (await get(test, `/${id}`)).json();
}

function lines(body: string): Array<{ custom_id: string; result: Record<string, any> }> {
  expect(body.endsWith("\n")).toBe(true);
  expect(body).not.toContain("\n\n");
  return body.trimEnd().split("\n").map((l) => JSON.parse(l));
}

describe("creating a batch", () => {
  it("returns the batch object the Anthropic client reads, runs every request and streams the results in order", async () => {
    const engine = new BatchEngine();
    engine.hold();
    const test = await app(engine);
    const res = await create(test, { requests: requests(3) });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    const batch = res.json();
    expect(batch).toEqual({
      id: expect.stringMatching(/^msgbatch_[A-Za-z0-9]{24}$/),
      type: "message_batch",
      processing_status: "in_progress",
      request_counts: { processing: 3, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      ended_at: null,
      expires_at: expect.any(String),
      cancel_initiated_at: null,
      archived_at: null,
      results_url: null,
    });
    expect(Date.parse(batch.expires_at) - Date.parse(batch.created_at)).toBe(24 * 3600 * 1000);
    // The results are not there yet.
    const early = await get(test, `/${batch.id}/results`);
    expect(early.statusCode).toBe(409);
    expect(early.json().error.message).toMatch(/has not ended yet/);
    engine.release();

    const done = await ended(test, batch.id);
    expect(done.request_counts).toEqual({ processing: 0, succeeded: 3, errored: 0, canceled: 0, expired: 0 });
    expect(Date.parse(done.ended_at)).toBeGreaterThanOrEqual(Date.parse(done.created_at));
    expect(done.results_url).toBe(`http://localhost:80/v1/messages/batches/${batch.id}/results`);

    const results = await get(test, `/${batch.id}/results`);
    expect(results.statusCode).toBe(200);
    expect(results.headers["content-type"]).toBe("application/x-ndjson");
    const got = lines(results.body);
    expect(got.map((l) => l.custom_id)).toEqual(["r0", "r1", "r2"]);
    for (const [i, line] of got.entries()) {
      expect(line.result.type).toBe("succeeded");
      expect(line.result.message).toMatchObject({
        id: expect.stringMatching(/^msg_/),
        type: "message",
        role: "assistant",
        model: "claude-haiku-4-5",
        content: [{ type: "text", text: `echo r${i}` }],
        stop_reason: "end_turn",
        usage: { input_tokens: expect.any(Number), output_tokens: expect.any(Number) },
      });
    }
  });

  it("results_url names the host the client used", async () => {
    const test = await app(new BatchEngine());
    const { id } = (await create(test, { requests: requests(1) })).json();
    await ended(test, id);
    const res = await test.app.inject({ method: "GET", url: `/v1/messages/batches/${id}`, headers: { "x-api-key": test.key, host: "127.0.0.1:8787" } });
    expect(res.json().results_url).toBe(`http://127.0.0.1:8787/v1/messages/batches/${id}/results`);
  });

  it("rejects a batch with bad entries with one 400 that lists each of them, and creates nothing", async () => {
    const test = await app(new BatchEngine());
    const res = await create(test, {
      requests: [
        { custom_id: "a", params: params("x") },
        { custom_id: "a", params: params("y") },
        { params: params("z") },
        { custom_id: "no spaces", params: params("z") },
        { custom_id: "b", params: { model: "m", messages: [{ role: "user", content: "x" }] } },
        { custom_id: "c", params: params("x", { stream: true }) },
        { custom_id: "d" },
        "nope",
        { custom_id: "e", params: params("x", { temperature: 5 }) },
      ],
    });
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.type).toBe("error");
    expect(body.error.type).toBe("invalid_request_error");
    expect(body.error.message).toMatch(/^8 of 9 requests are invalid, so no batch was created\./);
    expect(body.error.details.error_code).toBe("invalid_batch_requests");
    expect(body.error.details.errors.map((e: { param: string }) => e.param)).toEqual([
      "requests[1].custom_id",
      "requests[2].custom_id",
      "requests[3].custom_id",
      "requests[4].params.max_tokens",
      "requests[5].params.stream",
      "requests[6].params",
      "requests[7]",
      "requests[8].params.temperature",
    ]);
    expect(body.error.details.errors[0]).toMatchObject({ index: 1, custom_id: "a", message: expect.stringMatching(/used twice \(first by requests\[0\]\)/) });
    expect(body.error.details.errors[3].message).toMatch(/requests\[4\]\.params\.max_tokens/);
    expect((await get(test, "")).json()).toEqual({ data: [], has_more: false, first_id: null, last_id: null });
    expect(test.store.db.prepare("SELECT COUNT(*) AS n FROM message_batch_requests").get()).toEqual({ n: 0 });
  });

  it("checks a request's output format up front, as POST /v1/messages does: an unsupported schema is listed", async () => {
    const test = await app(new BatchEngine());
    const unsupported = { type: "object", properties: { n: { type: "integer" } }, not: { required: ["n"] } };
    const good = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
    const res = await create(test, {
      requests: [
        { custom_id: "a", params: params("x", { output_config: { format: { type: "json_schema", schema: good } } }) },
        { custom_id: "b", params: params("x", { output_config: { format: { type: "json_schema", schema: unsupported } } }) },
        { custom_id: "c", params: params("x", { output_format: { type: "xml" } }) },
      ],
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.errors).toEqual([
      { index: 1, custom_id: "b", param: "requests[1].params.output_config.format.schema", message: expect.stringContaining("Unsupported JSON schema") },
      { index: 2, custom_id: "c", param: "requests[2].params.output_format.type", message: expect.stringContaining("json_schema") },
    ]);
  });

  it("says what is wrong with a body that is not a list of requests", async () => {
    const test = await app(new BatchEngine());
    const cases: Array<[unknown, number, string]> = [
      ["{not json", 400, "invalid_json"],
      ['{"requests": [', 400, "invalid_json"],
      ["", 400, "invalid_request"],
      [{ requests: [] }, 400, "invalid_request"],
      [{ requests: { a: 1 } }, 400, "invalid_request"],
      [{ requests: "x" }, 400, "invalid_request"],
      [[1, 2], 400, "invalid_request"],
    ];
    for (const [body, status, code] of cases) {
      const res = await create(test, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(status);
      expect(res.json().error.details.error_code, JSON.stringify(body)).toBe(code);
    }
  });

  it("an upload cut off midway leaves nothing behind", async () => {
    const test = await app(new BatchEngine());
    await test.app.listen({ host: "127.0.0.1", port: 0 });
    const { port } = test.app.server.address() as AddressInfo;
    const part = `{"requests": [${JSON.stringify(requests(1)[0])},`;
    const socket = connect(port, "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(`POST /v1/messages/batches HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${test.key}\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n${part}`);
    await until(() => (test.store.db.prepare("SELECT COUNT(*) AS n FROM message_batches").get() as { n: number }).n === 1, "the upload to begin");
    socket.destroy();
    await until(() => (test.store.db.prepare("SELECT COUNT(*) AS n FROM message_batches").get() as { n: number }).n === 0, "the upload to be dropped");
    expect(test.store.db.prepare("SELECT COUNT(*) AS n FROM message_batch_requests").get()).toEqual({ n: 0 });
  });

  it("takes at most the configured number of requests and bytes", async () => {
    const test = await app(new BatchEngine(), { batches: { limits: { maxRequests: 3, maxBytes: 4096 } } });
    const many = await create(test, { requests: requests(4) });
    expect(many.statusCode).toBe(400);
    expect(many.json().error).toMatchObject({ type: "invalid_request_error", details: { error_code: "too_many_requests_in_batch" } });
    const big = await create(test, { requests: [{ custom_id: "a", params: params("x".repeat(5000)) }] });
    expect(big.statusCode).toBe(413);
    expect(big.json().error).toMatchObject({ type: "request_too_large", details: { error_code: "request_too_large" } });
    expect(test.store.db.prepare("SELECT COUNT(*) AS n FROM message_batches").get()).toEqual({ n: 0 });
    expect((await create(test, { requests: requests(3) })).statusCode).toBe(200);
  });

  it("refuses a 51st batch in flight with 429 and Retry-After", async () => {
    const engine = new BatchEngine();
    engine.hold();
    const test = await app(engine, { batches: { limits: { inFlightPerAccount: 2 } } });
    const first = (await create(test, { requests: requests(1) })).json();
    expect((await create(test, { requests: requests(1) })).statusCode).toBe(200);
    const third = await create(test, { requests: requests(1) });
    expect(third.statusCode).toBe(429);
    expect(third.headers["retry-after"]).toMatch(/^\d+$/);
    expect(third.json().error).toMatchObject({ type: "rate_limit_error", details: { error_code: "batch_limit_exceeded" } });
    // Another account has its own allowance; an ended batch no longer counts.
    const other = test.keys.create({ account: "other" }).key;
    expect((await create(test, { requests: requests(1) }, {}, other)).statusCode).toBe(200);
    expect((await cancel(test, first.id)).statusCode).toBe(200);
    engine.release();
    await ended(test, first.id);
    expect((await create(test, { requests: requests(1) })).statusCode).toBe(200);
  });

  it("Idempotency-Key: the same body returns the same batch, another body is a 422", async () => {
    const test = await app(new BatchEngine());
    const body = { requests: requests(2) };
    const first = await create(test, body, { "idempotency-key": "key-1" });
    expect(first.statusCode).toBe(200);
    const again = await create(test, body, { "idempotency-key": "key-1" });
    expect(again.statusCode).toBe(200);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(again.json().id).toBe(first.json().id);
    const other = await create(test, { requests: requests(3) }, { "idempotency-key": "key-1" });
    expect(other.statusCode).toBe(422);
    expect(other.json().error).toMatchObject({ type: "invalid_request_error", details: { error_code: "idempotency_key_reused" } });
    expect(other.json().error.message).toContain(first.json().id);
    // Keys are per account, and a new key makes a new batch.
    const otherKey = test.keys.create({ account: "other" }).key;
    expect((await create(test, body, { "idempotency-key": "key-1" }, otherKey)).json().id).not.toBe(first.json().id);
    expect((await create(test, body, { "idempotency-key": "key-2" })).json().id).not.toBe(first.json().id);
    expect((await get(test, "")).json().data).toHaveLength(2);
    const bad = await create(test, body, { "idempotency-key": "x".repeat(256) });
    expect(bad.statusCode).toBe(400);
  });
});

describe("reading batches", () => {
  it("lists newest first with the Messages API's pagination", async () => {
    const test = await app(new BatchEngine());
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create(test, { requests: requests(1) })).json().id);
    const newest = [...ids].reverse();
    const all = (await get(test, "")).json();
    expect(all.data.map((b: { id: string }) => b.id)).toEqual(newest);
    expect(all).toMatchObject({ has_more: false, first_id: newest[0], last_id: newest[4] });

    const page1 = (await get(test, "?limit=2")).json();
    expect(page1).toMatchObject({ has_more: true, first_id: newest[0], last_id: newest[1] });
    const page2 = (await get(test, `?limit=2&after_id=${page1.last_id}`)).json();
    expect(page2.data.map((b: { id: string }) => b.id)).toEqual(newest.slice(2, 4));
    expect(page2.has_more).toBe(true);
    const page3 = (await get(test, `?limit=2&after_id=${page2.last_id}`)).json();
    expect(page3).toMatchObject({ has_more: false, first_id: newest[4], last_id: newest[4] });
    const back = (await get(test, `?limit=2&before_id=${newest[4]}`)).json();
    expect(back.data.map((b: { id: string }) => b.id)).toEqual(newest.slice(2, 4));
    expect(back.has_more).toBe(true);
    const front = (await get(test, `?limit=2&before_id=${newest[2]}`)).json();
    expect(front.data.map((b: { id: string }) => b.id)).toEqual(newest.slice(0, 2));
    expect(front.has_more).toBe(false);

    for (const query of ["?limit=0", "?limit=1001", "?limit=x", `?after_id=${ids[0]}&before_id=${ids[1]}`, "?after_id=msgbatch_nope"])
      expect((await get(test, query)).statusCode, query).toBe(400);
  });

  it("keeps each account's batches to itself", async () => {
    const test = await app(new BatchEngine());
    const { id } = (await create(test, { requests: requests(1) })).json();
    const other = test.keys.create({ account: "other" }).key;
    expect((await get(test, `/${id}`, other)).statusCode).toBe(404);
    expect((await get(test, `/${id}`, other)).json().error.type).toBe("not_found_error");
    expect((await get(test, "", other)).json().data).toEqual([]);
    expect((await cancel(test, id, other)).statusCode).toBe(404);
    expect((await del(test, id, other)).statusCode).toBe(404);
    expect((await get(test, `/${id}/results`, other)).statusCode).toBe(404);
    expect((await get(test, "/msgbatch_unknown")).statusCode).toBe(404);
  });

  it("needs a key, and answers in the Anthropic format; the chat surface has no /v1/batches", async () => {
    const test = await app(new BatchEngine());
    const res = await test.app.inject({ method: "GET", url: "/v1/messages/batches" });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ type: "error", error: { type: "authentication_error" } });
    const bearer = await test.app.inject({ method: "GET", url: "/v1/messages/batches", headers: { authorization: `Bearer ${test.key}` } });
    expect(bearer.statusCode).toBe(200);
    for (const method of ["GET", "POST"] as const) {
      const chat = await test.app.inject({ method, url: "/v1/batches", headers: { authorization: `Bearer ${test.key}` } });
      expect(chat.statusCode).toBe(404);
      expect(chat.json().error).toMatchObject({ code: "not_found" });
    }
    const version = await test.app.inject({ method: "GET", url: "/v1/messages/batches", headers: { "x-api-key": test.key, "anthropic-version": "yesterday" } });
    expect(version.statusCode).toBe(400);
  });
});

describe("processing", () => {
  it("stores a request that fails as an errored line, in the Messages error format, and goes on", async () => {
    const test = await app(new BatchEngine());
    const { id } = (
      await create(test, { requests: [{ custom_id: "ok", params: params("fine") }, { custom_id: "bad", params: params("FAIL please") }, { custom_id: "ok2", params: params("fine too") }] })
    ).json();
    const done = await ended(test, id);
    expect(done.request_counts).toMatchObject({ succeeded: 2, errored: 1, processing: 0 });
    const got = lines((await get(test, `/${id}/results`)).body);
    expect(got[1]).toEqual({
      custom_id: "bad",
      result: {
        type: "errored",
        error: {
          type: "error",
          error: { type: "invalid_request_error", message: expect.stringContaining("longer than the context"), details: { error_code: "context_length_exceeded", param: "messages" } },
          request_id: expect.stringMatching(/^req_/),
        },
      },
    });
  });

  it("runs the batch class behind interactive requests, and holds one sequence free for them", async () => {
    const engine = new BatchEngine(3);
    engine.hold();
    const test = await app(engine);
    const { id } = (await create(test, { requests: requests(10) })).json();
    // Two of three sequences run batch requests, a third waits in the queue.
    await until(() => engine.running === 2, "two batch requests to run");
    await new Promise((r) => setTimeout(r, 30));
    expect(engine.running).toBe(2);
    const health = (await test.app.inject({ url: "/health" })).json();
    expect(health.requests.by_class.batch).toEqual({ running: 2, waiting: 1 });
    // An interactive request gets the free sequence at once.
    const chat = test.app.inject({ method: "POST", url: "/v1/messages", headers: { "x-api-key": test.key }, payload: params("interactive") });
    await until(() => engine.started.includes("interactive"), "the interactive request to start");
    engine.release();
    expect((await chat).statusCode).toBe(200);
    expect((await ended(test, id)).request_counts.succeeded).toBe(10);
  });
});

describe("cancel and delete", () => {
  it("cancel: in_progress → canceling → ended; what had not started ends canceled", async () => {
    const engine = new BatchEngine(1);
    engine.hold();
    const test = await app(engine);
    const { id } = (await create(test, { requests: requests(5) })).json();
    await until(() => engine.running === 1, "the first request to run");
    const res = await cancel(test, id);
    expect(res.statusCode).toBe(200);
    const canceling = res.json();
    // The running request is being stopped: the batch is canceling until it has.
    expect(canceling.processing_status).toBe("canceling");
    expect(canceling.ended_at).toBeNull();
    expect(canceling.cancel_initiated_at).not.toBeNull();
    const done = await ended(test, id);
    expect(done.request_counts).toEqual({ processing: 0, succeeded: 0, errored: 0, canceled: 5, expired: 0 });
    expect(done.results_url).not.toBeNull();
    expect(lines((await get(test, `/${id}/results`)).body).map((l) => l.result)).toEqual(Array(5).fill({ type: "canceled" }));
    // Cancel again: the batch as it is.
    expect((await cancel(test, id)).json()).toEqual(done);
  });

  it("cancel while the running request finishes: that one keeps its result", async () => {
    const engine = new BatchEngine(1);
    const test = await app(engine);
    const { id } = (await create(test, { requests: requests(40) })).json();
    await until(async () => (await get(test, `/${id}`)).json().request_counts.succeeded >= 2, "two results");
    await cancel(test, id);
    const done = await ended(test, id);
    const counts = done.request_counts;
    expect(counts.succeeded).toBeGreaterThanOrEqual(2);
    expect(counts.succeeded + counts.canceled).toBe(40);
    const got = lines((await get(test, `/${id}/results`)).body);
    expect(got.map((l) => l.custom_id)).toEqual(requests(40).map((r) => r.custom_id));
    expect(got.filter((l) => l.result.type === "succeeded")).toHaveLength(counts.succeeded);
  });

  it("deletes only an ended batch, and the content leaves the database files", async () => {
    const engine = new BatchEngine(1);
    engine.hold();
    const test = await app(engine);
    const marker = "ZebraMarker4711";
    const { id } = (await create(test, { requests: [{ custom_id: "m", params: params(`${marker} question`) }] })).json();
    await until(() => engine.running === 1, "the request to run");
    const early = await del(test, id);
    expect(early.statusCode).toBe(409);
    expect(early.headers["x-should-retry"]).toBe("false");
    expect(early.json().error).toMatchObject({ type: "invalid_request_error", details: { error_code: "batch_not_ended" } });
    const results = await get(test, `/${id}/results`);
    expect(results.statusCode).toBe(409);
    engine.release();
    await ended(test, id);
    expect((await get(test, `/${id}/results`)).body).toContain(`echo ${marker}`);

    const files = () => {
      const dir = test.store.db.name.replace(/[/\\][^/\\]+$/, "");
      return [DATABASE_FILE, `${DATABASE_FILE}-wal`].map((f) => {
        try {
          return readFileSync(join(dir, f)).toString("latin1");
        } catch {
          return "";
        }
      });
    };
    expect(files().some((f) => f.includes(marker))).toBe(true);
    const res = await del(test, id);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ id, type: "message_batch_deleted" });
    expect((await get(test, `/${id}`)).statusCode).toBe(404);
    expect(files().some((f) => f.includes(marker))).toBe(false);
  });
});

describe("the clock", () => {
  it("ends a batch 24 hours after creation (what had not run expires), and erases its results 29 days after it ended", async () => {
    let now = Date.parse("2026-01-01T00:00:00Z");
    const engine = new BatchEngine(1);
    engine.hold();
    const test = await app(engine, { batches: { now: () => now } });
    const { id } = (await create(test, { requests: requests(3) })).json();
    await until(() => engine.running === 1, "the first request to run");
    now += 24 * 3600 * 1000 - 1;
    test.batches.sweep();
    expect((await get(test, `/${id}`)).json().processing_status).toBe("in_progress");
    now += 1;
    test.batches.sweep();
    const done = await ended(test, id);
    expect(done.request_counts).toEqual({ processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 3 });
    expect(done.ended_at).toBe("2026-01-02T00:00:00.000Z");
    expect(lines((await get(test, `/${id}/results`)).body).map((l) => l.result)).toEqual(Array(3).fill({ type: "expired" }));

    now += 29 * 24 * 3600 * 1000;
    test.batches.sweep();
    const archived = (await get(test, `/${id}`)).json();
    expect(archived.archived_at).toBe("2026-01-31T00:00:00.000Z");
    expect(archived.results_url).toBeNull();
    const gone = await get(test, `/${id}/results`);
    expect(gone.statusCode).toBe(404);
    expect(gone.json().error.details.error_code).toBe("batch_results_expired");
    expect(test.store.db.prepare("SELECT COUNT(*) AS n FROM message_batch_requests").get()).toEqual({ n: 0 });
    expect((await del(test, id)).statusCode).toBe(200);
  });
});

describe("restarts", () => {
  it("a batch being canceled when the server stopped ends canceled on the next start", async () => {
    const engine = new BatchEngine(1);
    engine.hold();
    const test = await app(engine);
    const { id } = (await create(test, { requests: requests(3) })).json();
    await until(() => engine.running === 1, "a request to run");
    await test.batches.worker.close();
    const seq = test.store.batches.find(id)!.seq;
    // As the stop found it: canceling, with requests that had not ended.
    test.store.db.prepare("UPDATE message_batches SET status = 'canceling', cancel_initiated_at = 1 WHERE seq = ?").run(seq);
    test.store.db.prepare("UPDATE message_batch_requests SET state = 'running' WHERE batch_seq = ? AND idx = 0").run(seq);
    const host = EngineHost.of(new BatchEngine(1));
    const restarted = new BatchService({ repo: test.store.batches, pipeline: new InferencePipeline(host, { scheduler: schedulerForHost(host) }) });
    restarted.start();
    try {
      const row = test.store.batches.find(id)!;
      expect(row).toMatchObject({ status: "ended", canceled: 3 });
    } finally {
      await restarted.close();
    }
  });

  it("a request left running by a crash runs again; one already stored never does", async () => {
    const engine = new BatchEngine(1);
    engine.hold();
    const test = await app(engine);
    const { id } = (await create(test, { requests: requests(4) })).json();
    // Let two finish, then "crash" while the third runs.
    engine.allow(2);
    await until(async () => (await get(test, `/${id}`)).json().request_counts.succeeded === 2, "two results");
    await until(() => engine.running === 1, "the third request to run");
    const before = test.batches.repo.timeline(test.batches.repo.find(id)!.seq);
    const stored = before.filter((r) => r.state === "succeeded").map((r) => r.custom_id);
    // One generating, one waiting for the sequence: both are running in the database.
    const running = before.filter((r) => r.state === "running").map((r) => r.idx);
    expect(running).toEqual([2, 3]);
    await test.batches.worker.close();
    // (close() puts them back to pending; a crash would have left them running: do that by hand.)
    for (const idx of running) test.store.db.prepare("UPDATE message_batch_requests SET state = 'running' WHERE idx = ?").run(idx);

    const second = new BatchEngine(1);
    const host = EngineHost.of(second);
    const pipeline = new InferencePipeline(host, { scheduler: schedulerForHost(host) });
    const restarted = new BatchService({ repo: test.store.batches, pipeline });
    restarted.start();
    try {
      await until(() => test.store.batches.find(id)!.status === "ended", "the batch to end after the restart");
      expect(stored).toEqual(["r0", "r1"]);
      expect(second.started.sort()).toEqual(["r2", "r3"]);
      const got = lines((await get(test, `/${id}/results`)).body);
      expect(got.map((l) => l.custom_id)).toEqual(["r0", "r1", "r2", "r3"]);
      expect(got.every((l) => l.result.type === "succeeded")).toBe(true);
    } finally {
      await restarted.close();
    }
  });
});
