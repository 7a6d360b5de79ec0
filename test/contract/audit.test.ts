// The audit through HTTP with a scripted engine: one record per key request (never content), the caller's
// own records only, filters and cursor pages, per-day statistics in X-Timezone, erasure that leaves no bytes
// behind, retention, and a 401 for every key endpoint whatever is wrong with the key.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { AuditList, AuditRecord, AuditStats } from "../../server/features/audit/audit-service.js";
import type { AuditRow } from "../../server/store/audit-repository.js";
import { answer, FakeEngine } from "../support/fake-engine.js";
import { buildTestApp, type TestApp } from "../support/test-app.js";

let t: TestApp;
afterEach(async () => {
  await t?.close();
});

const MARKER = "zebra-marker-7f3a91";

function bearer(key: string) {
  return { authorization: `Bearer ${key}` };
}

async function get<T>(url: string, key: string, headers: Record<string, string> = {}): Promise<{ status: number; body: T }> {
  const res = await t.app.inject({ method: "GET", url, headers: { ...bearer(key), ...headers } });
  return { status: res.statusCode, body: res.json() as T };
}

/** Every file under the data dir, as bytes. */
function dataDirHolds(text: string): string[] {
  const dir = dirname(t.store.db.name);
  const hits: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (readFileSync(path).includes(Buffer.from(text, "utf8"))) hits.push(path);
    }
  };
  walk(dir);
  return hits;
}

function row(partial: Partial<AuditRow> & { request_id: string; account_id: string; created_ms: number }): AuditRow {
  return {
    key_id: "key_fixture",
    surface: "chat",
    method: "POST",
    path: "/v1/chat/completions",
    model: "svc",
    mode: "fast",
    status: 200,
    error_code: null,
    stop_reason: "end_turn",
    aborted: 0,
    latency_ms: 100,
    ttft_ms: 20,
    queued_ms: 0,
    input_tokens: 10,
    output_tokens: 5,
    reasoning_tokens: 0,
    cached_tokens: 0,
    session_id: null,
    batch_id: null,
    run_id: null,
    run_status: null,
    run_steps: null,
    ...partial,
  };
}

describe("audit records", () => {
  it("records every key request without content, lists the caller's own newest first, filters and pages", async () => {
    t = await buildTestApp(new FakeEngine(() => answer(`Answer ${MARKER}-out`, { reasoning: `thinking ${MARKER}-thought` })));
    const second = t.keys.create({ name: "second" });
    const ids: string[] = [];
    const send = async (url: string, payload: unknown, headers: Record<string, string> = bearer(t.key)) => {
      const res = await t.app.inject({ method: "POST", url, headers, payload: payload as Record<string, unknown> });
      ids.push(String(res.headers["x-request-id"]));
      return res;
    };
    expect((await send("/v1/chat/completions", { messages: [{ role: "user", content: MARKER }], session_id: "sess-1" })).statusCode).toBe(200);
    expect((await send("/v1/chat/completions", { messages: [{ role: "user", content: MARKER }], stream: true })).statusCode).toBe(200);
    expect((await send("/v1/responses", { input: MARKER, instructions: MARKER })).statusCode).toBe(200);
    expect((await send("/v1/messages", { model: "claude-haiku", max_tokens: 20, messages: [{ role: "user", content: MARKER }] }, { "x-api-key": second.key })).statusCode).toBe(200);
    expect((await send("/v1/messages/count_tokens", { model: "x", messages: [{ role: "user", content: MARKER }] }, { "x-api-key": t.key })).statusCode).toBe(200);
    expect((await send("/v1/chat/completions", { messages: [{ role: "user", content: MARKER }], n: 2 })).statusCode).toBe(400);
    // Not recorded: keyless endpoints and requests without a valid key.
    await t.app.inject({ method: "GET", url: "/v1/models" });
    await t.app.inject({ method: "POST", url: "/v1/chat/completions", payload: { messages: [] } });

    const list = await get<AuditList>("/v1/audit", t.key);
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ object: "list", has_more: false, first_id: ids[5], last_id: ids[0] });
    expect(list.body.data.map((r) => r.id)).toEqual([...ids].reverse());
    expect(JSON.stringify(list.body)).not.toContain(MARKER);
    const [bad, count, messages, responses, stream, chat] = list.body.data as [AuditRecord, AuditRecord, AuditRecord, AuditRecord, AuditRecord, AuditRecord];
    const account = t.store.accounts.findByName("local")!.id;
    const keyId = t.keys.list().find((k) => k.name === null)!.id;
    expect(chat).toEqual({
      id: ids[0],
      object: "audit.record",
      request_id: ids[0],
      created_at: expect.any(Number),
      account_id: account,
      key_id: keyId,
      surface: "chat",
      method: "POST",
      path: "/v1/chat/completions",
      model: "svc",
      mode: "thinking",
      status: 200,
      error_code: null,
      stop_reason: "end_turn",
      aborted: false,
      latency_ms: expect.any(Number),
      ttft_ms: expect.any(Number),
      queued_ms: expect.any(Number),
      usage: { input_tokens: 12, output_tokens: 4, reasoning_tokens: 2, cached_tokens: 0 },
      session_id: "sess-1",
      batch_id: null,
      run_id: null,
      run_status: null,
      run_steps: null,
    });
    expect(Math.abs(chat.created_at - Date.now() / 1000)).toBeLessThan(60);
    expect(chat.ttft_ms!).toBeLessThanOrEqual(chat.latency_ms);
    expect(stream).toMatchObject({ surface: "chat", status: 200, usage: { input_tokens: 12 }, session_id: null });
    expect(responses).toMatchObject({ surface: "responses", path: "/v1/responses", model: "svc", status: 200 });
    expect(messages).toMatchObject({ surface: "messages", model: "claude-haiku", key_id: second.id, status: 200 });
    expect(count).toMatchObject({ surface: "messages", path: "/v1/messages/count_tokens", model: null, mode: null, ttft_ms: null, usage: { input_tokens: null } });
    expect(bad).toMatchObject({ status: 400, error_code: "unsupported_value", model: null, usage: { output_tokens: null } });

    const ids0 = async (query: string) => (await get<AuditList>(`/v1/audit?${query}`, t.key)).body.data.map((r) => r.id);
    expect(await ids0("surface=chat")).toEqual([ids[5], ids[1], ids[0]]);
    expect(await ids0("surface=responses,messages")).toEqual([ids[4], ids[3], ids[2]]);
    expect(await ids0("status=4xx")).toEqual([ids[5]]);
    expect(await ids0("status=400")).toEqual([ids[5]]);
    expect(await ids0("status=error")).toEqual([ids[5]]);
    expect(await ids0("status=success")).toHaveLength(5);
    expect(await ids0(`key_id=${second.id}`)).toEqual([ids[3]]);
    expect(await ids0("session_id=sess-1")).toEqual([ids[0]]);
    const now = Math.floor(Date.now() / 1000);
    expect(await ids0(`since=${now + 100}`)).toEqual([]);
    expect(await ids0(`until=${now - 100}`)).toEqual([]);
    expect(await ids0(`since=${now - 100}&until=${now + 100}`)).toHaveLength(6);
    expect(await ids0(`since=${new Date((now - 100) * 1000).toISOString()}`)).toHaveLength(6);

    // Cursor pages: newest first, then older with after=last_id, back with before=first_id.
    const page1 = (await get<AuditList>("/v1/audit?limit=2", t.key)).body;
    expect(page1).toMatchObject({ has_more: true, first_id: ids[5], last_id: ids[4] });
    const page2 = (await get<AuditList>(`/v1/audit?limit=2&after=${page1.last_id}`, t.key)).body;
    expect(page2.data.map((r) => r.id)).toEqual([ids[3], ids[2]]);
    expect(page2.has_more).toBe(true);
    const page3 = (await get<AuditList>(`/v1/audit?limit=2&after_id=${page2.last_id}`, t.key)).body;
    expect(page3).toMatchObject({ has_more: false, first_id: ids[1], last_id: ids[0] });
    const back = (await get<AuditList>(`/v1/audit?limit=2&before_id=${page3.first_id}`, t.key)).body;
    expect(back.data.map((r) => r.id)).toEqual([ids[3], ids[2]]);
    expect(back.has_more).toBe(true);

    for (const [query, param] of [
      ["limit=0", "limit"],
      ["limit=101", "limit"],
      ["limit=ten", "limit"],
      ["surface=batch", "surface"],
      ["status=teapot", "status"],
      ["since=yesterday", "since"],
      ["after=req_nope", "after"],
      [`after=${ids[0]}&before=${ids[1]}`, "before"],
    ] as const) {
      const res = await get<{ error: { param: string; type: string } }>(`/v1/audit?${query}`, t.key);
      expect(res.status, query).toBe(400);
      expect(res.body.error, query).toMatchObject({ param, type: "invalid_request_error" });
    }
    const zone = await get<{ error: { code: string } }>("/v1/audit", t.key, { "x-timezone": "Mars/Olympus" });
    expect(zone.status).toBe(400);
    expect(zone.body.error.code).toBe("invalid_timezone");

    // Reading the audit is not itself recorded (it would list its own reads, and an erasure would name the id).
    expect((await get<AuditList>("/v1/audit?limit=100", t.key)).body.data).toHaveLength(6);
    // Nothing of the prompts, the answers or the thought anywhere in the data dir.
    expect(dataDirHolds(MARKER)).toEqual([]);
  });

  it("shows another account's record as not found, and never lists it", async () => {
    t = await buildTestApp(new FakeEngine());
    const other = t.keys.create({ account: "other" });
    const res = await t.app.inject({ method: "POST", url: "/v1/chat/completions", headers: bearer(other.key), payload: { messages: [{ role: "user", content: "hi" }] } });
    const id = String(res.headers["x-request-id"]);
    expect((await get<AuditRecord>(`/v1/audit/${id}`, other.key)).body).toMatchObject({ id, surface: "chat" });
    const theirs = await get<{ error: { code: string; type: string } }>(`/v1/audit/${id}`, t.key);
    expect(theirs.status).toBe(404);
    expect(theirs.body.error).toMatchObject({ code: "audit_record_not_found", type: "invalid_request_error" });
    const erase = await t.app.inject({ method: "DELETE", url: `/v1/audit/${id}`, headers: bearer(t.key) });
    expect(erase.statusCode).toBe(404);
    expect((await get<AuditList>("/v1/audit", t.key)).body.data).toEqual([]);
    expect((await get<AuditStats>("/v1/audit/stats", t.key)).body.requests).toBe(0);
    expect((await get<AuditRecord>(`/v1/audit/${id}`, other.key)).status).toBe(200);
    expect((await get<AuditRecord>("/v1/audit/req_doesnotexist", other.key)).status).toBe(404);
  });

  it("counts per day in the caller's X-Timezone, with tokens, error rate and latency percentiles", async () => {
    t = await buildTestApp(new FakeEngine());
    const key = t.keys.create({ account: "tz" });
    const account = t.store.accounts.findByName("tz")!.id;
    const at = (iso: string) => Date.parse(iso);
    t.store.audit.insertMany([
      // 23:30 UTC on the 5th: the 6th in Berlin, the 5th in New York.
      row({ request_id: "req_a", account_id: account, created_ms: at("2026-01-05T23:30:00Z"), latency_ms: 100, input_tokens: 10, output_tokens: 1 }),
      // 00:30 UTC on the 6th: the 6th in Berlin, still the 5th in New York.
      row({ request_id: "req_b", account_id: account, created_ms: at("2026-01-06T00:30:00Z"), latency_ms: 200, status: 429, error_code: "concurrency_limit_exceeded", input_tokens: null, output_tokens: null, ttft_ms: null }),
      // 12:00 UTC on the 6th: the 6th everywhere here.
      row({ request_id: "req_c", account_id: account, created_ms: at("2026-01-06T12:00:00Z"), latency_ms: 300, input_tokens: 30, output_tokens: 3, reasoning_tokens: 2, cached_tokens: 8, surface: "messages" }),
      row({ request_id: "req_d", account_id: account, created_ms: at("2026-01-06T13:00:00Z"), latency_ms: 1000, input_tokens: 40, output_tokens: 4, aborted: 1 }),
      // Another account's: never counted.
      row({ request_id: "req_x", account_id: "acct_other", created_ms: at("2026-01-06T12:00:00Z"), input_tokens: 1000 }),
    ]);
    const stats = async (zone: string, query = "") => (await get<AuditStats>(`/v1/audit/stats${query}`, key.key, { "x-timezone": zone })).body;

    const utc = await stats("UTC");
    expect(utc).toMatchObject({
      object: "audit.stats",
      timezone: "UTC",
      since: null,
      until: null,
      requests: 4,
      errors: 1,
      error_rate: 0.25,
      aborted: 1,
      tokens: { input: 80, output: 8, reasoning: 2, cached: 8 },
      latency_ms: { p50: 200, p95: 1000 },
      ttft_ms: { p50: 20, p95: 20 },
      surfaces: { chat: 3, messages: 1 },
    });
    expect(utc.days.map((d) => [d.date, d.requests, d.errors])).toEqual([
      ["2026-01-05", 1, 0],
      ["2026-01-06", 3, 1],
    ]);
    expect(utc.days[1]!.tokens).toEqual({ input: 70, output: 7, reasoning: 2, cached: 8 });
    expect(utc.days[1]!.latency_ms).toEqual({ p50: 300, p95: 1000 });

    const berlin = await stats("europe/berlin");
    expect(berlin.timezone).toBe("Europe/Berlin");
    expect(berlin.days.map((d) => [d.date, d.requests])).toEqual([["2026-01-06", 4]]);
    const newYork = await stats("America/New_York");
    expect(newYork.days.map((d) => [d.date, d.requests])).toEqual([
      ["2026-01-05", 2],
      ["2026-01-06", 2],
    ]);

    // A day as since/until means that day in the caller's zone, until inclusive.
    const oneDay = await stats("America/New_York", "?since=2026-01-05&until=2026-01-05");
    expect(oneDay).toMatchObject({ requests: 2, since: at("2026-01-05T05:00:00Z") / 1000, until: at("2026-01-06T05:00:00Z") / 1000 });
    expect((await stats("Europe/Berlin", "?since=2026-01-05&until=2026-01-05")).requests).toBe(0);
    expect((await stats("UTC", "?surface=messages")).requests).toBe(1);
    expect((await stats("UTC", "?status=error")).requests).toBe(1);
    // The list reads X-Timezone the same way.
    const listed = (await get<AuditList>("/v1/audit?since=2026-01-06", key.key, { "x-timezone": "America/New_York" })).body.data.map((r) => r.id);
    expect(listed).toEqual(["req_d", "req_c"]);

    const empty = await get<AuditStats>("/v1/audit/stats", t.key);
    expect(empty.body).toMatchObject({ requests: 0, errors: 0, error_rate: 0, latency_ms: { p50: null, p95: null }, days: [] });
  });

  it("erases a record: gone from the list and the statistics, and its bytes gone from the data dir", async () => {
    t = await buildTestApp(new FakeEngine());
    const session = "erasable-session-5c1d";
    const res = await t.app.inject({ method: "POST", url: "/v1/chat/completions", headers: bearer(t.key), payload: { messages: [{ role: "user", content: "hi" }], session_id: session } });
    const keep = await t.app.inject({ method: "POST", url: "/v1/chat/completions", headers: bearer(t.key), payload: { messages: [{ role: "user", content: "hi" }] } });
    const id = String(res.headers["x-request-id"]);
    expect((await get<AuditRecord>(`/v1/audit/${id}`, t.key)).body.session_id).toBe(session);
    // Before: the record is on disk (the test would pass for nothing otherwise).
    expect(dataDirHolds(id).length).toBeGreaterThan(0);
    expect(dataDirHolds(session).length).toBeGreaterThan(0);

    const erased = await t.app.inject({ method: "DELETE", url: `/v1/audit/${id}`, headers: bearer(t.key) });
    expect(erased.statusCode).toBe(200);
    expect(erased.json()).toEqual({ id, object: "audit.record.deleted", deleted: true });
    expect((await get(`/v1/audit/${id}`, t.key)).status).toBe(404);
    expect((await t.app.inject({ method: "DELETE", url: `/v1/audit/${id}`, headers: bearer(t.key) })).statusCode).toBe(404);
    expect((await get<AuditList>("/v1/audit", t.key)).body.data.map((r) => r.id)).toEqual([String(keep.headers["x-request-id"])]);
    expect((await get<AuditStats>("/v1/audit/stats", t.key)).body.requests).toBe(1);
    expect(dataDirHolds(id)).toEqual([]);
    expect(dataDirHolds(session)).toEqual([]);
  });

  it("removes records past the retention period", async () => {
    const clock = { now: Date.now() };
    t = await buildTestApp(new FakeEngine(), { audit: { retentionDays: 7, now: () => clock.now } });
    const account = t.store.accounts.findByName("local")!.id;
    const day = 86_400_000;
    t.store.audit.insertMany([
      row({ request_id: "req_old", account_id: account, created_ms: clock.now - 7 * day - 1000, session_id: "old-session-91f0" }),
      row({ request_id: "req_new", account_id: account, created_ms: clock.now - 7 * day + 60_000 }),
    ]);
    expect(t.audit.sweep()).toBe(1);
    expect((await get<AuditList>("/v1/audit", t.key)).body.data.map((r) => r.id)).toEqual(["req_new"]);
    expect(dataDirHolds("old-session-91f0")).toEqual([]);
    clock.now += 2 * 60_000;
    expect(t.audit.sweep()).toBe(1);
    expect(t.audit.retentionDays).toBe(7);
  });

  it("records a stream the client cut short", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const engine = new FakeEngine();
    engine.generate = async function* (_request, signal) {
      const events = answer("never finished");
      yield events[0]!;
      yield events[1]!;
      await Promise.race([gate, new Promise((resolve) => signal.addEventListener("abort", resolve))]);
      if (!signal.aborted) yield* events.slice(2);
    };
    t = await buildTestApp(engine);
    const url = await t.app.listen({ port: 0, host: "127.0.0.1" });
    const cut = new AbortController();
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { ...bearer(t.key), "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], stream: true }),
      signal: cut.signal,
    });
    const id = res.headers.get("x-request-id")!;
    await res.body!.getReader().read();
    cut.abort();
    await expect.poll(async () => (await get<AuditRecord>(`/v1/audit/${id}`, t.key)).status).toBe(200);
    expect((await get<AuditRecord>(`/v1/audit/${id}`, t.key)).body).toMatchObject({ aborted: true, status: 200, ttft_ms: expect.any(Number) });
    release();
    // The client's half of the cut connection may linger; do not wait for it.
    t.app.server.closeAllConnections();
  });

  it("never fails the request it describes", async () => {
    const logged: string[] = [];
    t = await buildTestApp(new FakeEngine(), { log: (_level, message) => logged.push(message) });
    const insert = t.store.audit.insertMany.bind(t.store.audit);
    t.store.audit.insertMany = () => {
      throw new Error("disk full");
    };
    const res = await t.app.inject({ method: "POST", url: "/v1/chat/completions", headers: bearer(t.key), payload: { messages: [{ role: "user", content: "hi" }] } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ object: "chat.completion" });
    await new Promise((r) => setImmediate(r));
    expect(logged.some((l) => l.includes("Could not write 1 audit record(s): disk full"))).toBe(true);
    t.store.audit.insertMany = insert;
    await t.app.inject({ method: "POST", url: "/v1/chat/completions", headers: bearer(t.key), payload: { messages: [{ role: "user", content: "hi" }] } });
    expect((await get<AuditList>("/v1/audit", t.key)).body.data).toHaveLength(1);
  });
});

/** The routes Fastify serves, from printRoutes' tree: [method, path]. */
function routes(tree: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const stack: string[] = [];
  for (const line of tree.split("\n")) {
    const match = /^([│ ]*)[├└]── (\S+) \(([^)]+)\)/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    stack.length = depth;
    stack.push(match[2]!);
    for (const method of match[3]!.split(", ")) out.push([method, stack.join("")]);
  }
  return out;
}

describe("401 for every key endpoint", () => {
  it("refuses no key, a wrong key, a truncated key, a revoked key and a disabled account's key", async () => {
    t = await buildTestApp(new FakeEngine());
    const revoked = t.keys.create({ name: "revoked" });
    t.keys.revoke(revoked.id);
    const disabled = (await t.accounts.create("gone")).key;
    t.accounts.disable("gone");
    const keyless = new Set(["/health", "/v1/models", "/v1/models/:model", "/v1/messages/_health", "*"]);
    const keyEndpoints = routes(t.app.printRoutes({ commonPrefix: false })).filter(
      ([method, path]) => method !== "HEAD" && method !== "OPTIONS" && !keyless.has(path) && !path.startsWith("/v1/console"),
    );
    // Today's key endpoints at least; endpoints added later are covered by the same loop.
    expect(keyEndpoints.map(([m, p]) => `${m} ${p}`)).toEqual(
      expect.arrayContaining([
        "POST /v1/chat/completions",
        "POST /v1/responses",
        "POST /v1/messages",
        "POST /v1/messages/count_tokens",
        "GET /v1/audit",
        "GET /v1/audit/stats",
        "GET /v1/audit/:request_id",
        "DELETE /v1/audit/:request_id",
      ]),
    );
    const cases: Array<[string, string | undefined]> = [
      ["none", undefined],
      ["wrong", `sk-svc-${"0".repeat(32)}`],
      ["truncated", t.key.slice(0, -1)],
      ["revoked", revoked.key],
      ["disabled account", disabled.key],
    ];
    for (const [method, route] of keyEndpoints) {
      const url = route.replace(/:(\w+)/g, "x_$1");
      const anthropic = url.startsWith("/v1/messages");
      const bearerOnly = url === "/v1/chat/completions" || url === "/v1/responses";
      for (const [label, key] of cases) {
        const headers: Record<string, string> = key === undefined ? {} : bearerOnly ? bearer(key) : { "x-api-key": key };
        const res = await t.app.inject({ method: method as "GET", url, headers: { "content-type": "application/json", ...headers }, payload: method === "GET" || method === "DELETE" ? undefined : "{}" });
        const what = `${method} ${url} with ${label}`;
        expect(res.statusCode, what).toBe(401);
        if (anthropic) expect(res.json(), what).toMatchObject({ type: "error", error: { type: "authentication_error" }, request_id: res.headers["x-request-id"] });
        else expect(res.json(), what).toMatchObject({ error: { type: "authentication_error", code: "invalid_api_key" } });
        expect(res.headers["x-request-id"], what).toMatch(/^req_/);
      }
    }
    // A valid key gets past all of them.
    expect((await get("/v1/audit", t.key)).status).toBe(200);
    // 401s belong to no account: no record.
    await new Promise((r) => setImmediate(r));
    expect(t.store.db.prepare("SELECT COUNT(*) AS n FROM audit_records").get()).toEqual({ n: 0 });
  });
});
