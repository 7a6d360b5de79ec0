// Message batches against `svc serve` on the generated model, driven by @anthropic-ai/sdk's
// messages.batches as users drive it: create, retrieve, list (auto-pagination), results, cancel, delete,
// Idempotency-Key; a server SIGKILLed mid-batch and restarted on the same data dir, after which every
// custom_id has exactly one result (and those stored before the kill are the same results); and an
// interactive request sent during a 200-request batch, which starts before the next batch request.
import { rmSync } from "node:fs";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import Anthropic0 from "anthropic-sdk-0";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import { validateJsonAgainstSchema } from "../../server/engine/json-schema-grammar.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

const answer = greedyTexts().answer.trim();

type Params = Anthropic.MessageCreateParamsNonStreaming & { temperature?: number };
const hello = (i: number): Params => ({ model: "claude-haiku-4-5", max_tokens: 64, temperature: 0, messages: [{ role: "user", content: `Hello ${i}` }] });

/**
 * A request that writes exactly `tokens` tokens: a forced tool call whose arguments are longer than that,
 * cut by max_tokens (the tiny model otherwise stops after a few words). The call's opening markers take
 * about 35 of the test model's byte-level tokens, so below that nothing at all is written.
 */
const busy = (tokens: number, text = "List numbers."): Params => ({
  model: "claude-haiku-4-5",
  max_tokens: tokens,
  messages: [{ role: "user", content: text }],
  tools: [{ name: "numbers", input_schema: { type: "object", properties: { xs: { type: "array", items: { type: "integer" }, minItems: 200, maxItems: 200 } }, required: ["xs"] } }],
  tool_choice: { type: "tool", name: "numbers" },
});

async function waitEnded(client: Anthropic, id: string, timeoutMs = 60_000): Promise<Anthropic.Messages.MessageBatch> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const batch = await client.messages.batches.retrieve(id);
    if (batch.processing_status === "ended") return batch;
    if (Date.now() > deadline) throw new Error(`batch ${id} did not end: ${JSON.stringify(batch)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function resultsOf(client: Anthropic, id: string): Promise<Anthropic.Messages.MessageBatchIndividualResponse[]> {
  const out: Anthropic.Messages.MessageBatchIndividualResponse[] = [];
  for await (const line of await client.messages.batches.results(id)) out.push(line);
  return out;
}

// One server for the file (each start costs seconds on CI), with one sequence: an interactive request then
// has to wait for the batch request that holds it. The kill test comes last and restarts it.
const ARGS = ["--sequences", "1", "--context-size", "4096"];
let server: SvcServer;
let dataDir: string;
let key: string;
let client: Anthropic;

beforeAll(async () => {
  dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ARGS });
  client = new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0 });
});
afterAll(async () => {
  expect(await server?.stop()).toBe(0);
  rmSync(dataDir, { recursive: true, force: true });
});

describe("messages.batches with @anthropic-ai/sdk", () => {
  it("create, retrieve until ended, results: one line per request, a failing request as an errored line", async () => {
    const long = "word ".repeat(12_000); // far beyond the 4096-token context: fails when it runs, not before
    const created = await client.messages.batches.create({
      requests: [
        { custom_id: "first", params: hello(1) },
        { custom_id: "too-long", params: { ...hello(2), messages: [{ role: "user", content: long }] } },
        { custom_id: "third", params: hello(3) },
      ],
    });
    expect(created).toMatchObject({ type: "message_batch", processing_status: "in_progress", results_url: null, ended_at: null });
    expect(created.id).toMatch(/^msgbatch_/);
    expect(created.request_counts.processing + created.request_counts.succeeded + created.request_counts.errored).toBe(3);
    expect(created._request_id).toMatch(/^req_/);

    const ended = await waitEnded(client, created.id);
    expect(ended.request_counts).toEqual({ processing: 0, succeeded: 2, errored: 1, canceled: 0, expired: 0 });
    expect(ended.results_url).toBe(`${server.url}/v1/messages/batches/${created.id}/results`);
    expect(Date.parse(ended.ended_at!)).toBeGreaterThanOrEqual(Date.parse(ended.created_at));

    const results = await resultsOf(client, created.id);
    expect(results.map((r) => r.custom_id)).toEqual(["first", "too-long", "third"]);
    for (const i of [0, 2]) {
      const result = results[i]!.result;
      if (result.type !== "succeeded") throw new Error(`expected succeeded, got ${JSON.stringify(result)}`);
      expect(result.message).toMatchObject({ type: "message", role: "assistant", model: "claude-haiku-4-5", stop_reason: "end_turn" });
      expect(result.message.content).toEqual([{ type: "text", text: answer }]);
    }
    const failed = results[1]!.result;
    if (failed.type !== "errored") throw new Error(`expected errored, got ${JSON.stringify(failed)}`);
    expect(failed.error.type).toBe("error");
    expect(failed.error.error.type).toBe("invalid_request_error");
    expect(failed.error.error.message).toMatch(/context/i);
  });

  it("lists newest first, page by page, as the SDK's auto-pagination walks it", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await client.messages.batches.create({ requests: [{ custom_id: "a", params: hello(i) }] })).id);
    const walked: string[] = [];
    for await (const batch of client.messages.batches.list({ limit: 1 })) walked.push(batch.id);
    expect(walked.slice(0, 3)).toEqual([...ids].reverse());
    expect(new Set(walked).size).toBe(walked.length);
    const page = await client.messages.batches.list({ limit: 2 });
    expect(page.data.map((b) => b.id)).toEqual([ids[2], ids[1]]);
    expect(page.has_more).toBe(true);
    expect(page.first_id).toBe(ids[2]);
    expect(page.last_id).toBe(ids[1]);
    for (const id of ids) await waitEnded(client, id);
  });

  it("cancel ends the batch; what had not run is canceled; delete is refused before the end, then removes it", async () => {
    const created = await client.messages.batches.create({ requests: Array.from({ length: 30 }, (_, i) => ({ custom_id: `c${i}`, params: busy(70) })) });
    await expect(client.messages.batches.delete(created.id)).rejects.toBeInstanceOf(Anthropic.ConflictError);
    const canceling = await client.messages.batches.cancel(created.id);
    expect(canceling.id).toBe(created.id);
    expect(["canceling", "ended"]).toContain(canceling.processing_status);
    expect(canceling.cancel_initiated_at).not.toBeNull();
    const ended = await waitEnded(client, created.id);
    expect(ended.request_counts.canceled).toBeGreaterThan(20);
    expect(ended.request_counts.succeeded + ended.request_counts.canceled).toBe(30);
    const results = await resultsOf(client, created.id);
    expect(results.map((r) => r.custom_id)).toEqual(Array.from({ length: 30 }, (_, i) => `c${i}`));
    expect(results.filter((r) => r.result.type === "canceled")).toHaveLength(ended.request_counts.canceled);

    const deleted = await client.messages.batches.delete(created.id);
    expect(deleted).toMatchObject({ id: created.id, type: "message_batch_deleted" });
    await expect(client.messages.batches.retrieve(created.id)).rejects.toBeInstanceOf(Anthropic.NotFoundError);
  });

  it("Idempotency-Key: a retry with the same body gets the same batch, another body a 422", async () => {
    const body = { requests: [{ custom_id: "x", params: hello(7) }] };
    const headers = { "Idempotency-Key": `batch-${Date.now()}` };
    const first = await client.messages.batches.create(body, { headers });
    const retry = await client.messages.batches.create(body, { headers });
    expect(retry.id).toBe(first.id);
    const err = await client.messages.batches.create({ requests: [{ custom_id: "y", params: hello(8) }] }, { headers }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.UnprocessableEntityError);
    expect((err as InstanceType<typeof Anthropic.UnprocessableEntityError>).message).toContain(first.id);
    await waitEnded(client, first.id);
  });

  it("a batch with bad entries is a 400 naming them; nothing is created", async () => {
    const before = (await client.messages.batches.list({ limit: 1000 })).data.length;
    const err = await client.messages.batches
      .create({ requests: [{ custom_id: "same", params: hello(1) }, { custom_id: "same", params: hello(2) }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as Error).message).toMatch(/requests\[1\]\.custom_id/);
    expect((await client.messages.batches.list({ limit: 1000 })).data.length).toBe(before);
  });

  it("structured outputs in params: the result's text satisfies the schema; an unsupported schema refuses the batch", async () => {
    const schema = { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city", "days"], additionalProperties: false };
    const created = await client.messages.batches.create({ requests: [{ custom_id: "json", params: { ...hello(4), output_config: { format: { type: "json_schema", schema } } } }] });
    await waitEnded(client, created.id);
    const [line] = await resultsOf(client, created.id);
    if (line?.result.type !== "succeeded") throw new Error(`expected succeeded, got ${JSON.stringify(line)}`);
    const text = line.result.message.content.find((b) => b.type === "text");
    expect(validateJsonAgainstSchema(schema, JSON.parse(text?.type === "text" ? text.text : ""))).toEqual({ valid: true });

    const unsupported = { type: "json_schema" as const, schema: { type: "object", not: { required: ["a"] } } };
    const err = await client.messages.batches.create({ requests: [{ custom_id: "bad", params: { ...hello(5), output_config: { format: unsupported } } }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as Error).message).toContain("requests[0].params.output_config.format.schema");
  });

  it("the last 0.x SDK reads the same batches", async () => {
    const old = new Anthropic0({ apiKey: key, baseURL: server.url, maxRetries: 0 });
    const created = await old.messages.batches.create({ requests: [{ custom_id: "old", params: hello(9) as never }] });
    for (;;) {
      const batch = await old.messages.batches.retrieve(created.id);
      if (batch.processing_status === "ended") break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const lines: Array<{ custom_id: string; result: { type: string } }> = [];
    for await (const line of await old.messages.batches.results(created.id)) lines.push(line);
    expect(lines).toMatchObject([{ custom_id: "old", result: { type: "succeeded" } }]);
  });
});

describe("interactive work during a batch", () => {
  it("an interactive request sent during a 200-request batch starts before the next batch request", async () => {
    const { id } = await client.messages.batches.create({ requests: Array.from({ length: 200 }, (_, i) => ({ custom_id: `b${i}`, params: busy(60, `Batch ${i}`) })) });
    while ((await client.messages.batches.retrieve(id)).request_counts.succeeded < 3) await new Promise((r) => setTimeout(r, 20));

    const trials: Array<{ waitingSeen: number; firstEvent: number }> = [];
    for (let attempt = 0; attempt < 8 && trials.length < 3; attempt++) {
      const stream = client.messages.stream(busy(400, `Interactive ${attempt}`));
      let firstEvent = 0;
      const done = (async () => {
        for await (const _event of stream) if (!firstEvent) firstEvent = Date.now();
      })();
      // The moment the server shows the request waiting for the sequence a batch request holds.
      let waitingSeen = 0;
      while (!firstEvent) {
        const health = (await (await fetch(`${server.url}/health`)).json()) as { requests: { by_class: Record<string, { running: number; waiting: number }> } };
        if (health.requests.by_class.interactive!.waiting === 1) {
          waitingSeen = Date.now();
          break;
        }
        if (health.requests.by_class.interactive!.running === 1) break;
      }
      await done;
      if (waitingSeen) trials.push({ waitingSeen, firstEvent });
    }
    expect(trials.length).toBeGreaterThanOrEqual(2);
    expect((await client.messages.batches.retrieve(id)).processing_status).toBe("in_progress");
    await client.messages.batches.cancel(id);
    await waitEnded(client, id);

    const db = new Database(join(dataDir, "svc.sqlite3"), { readonly: true });
    const timeline = db
      .prepare("SELECT r.idx, r.started_at, r.ended_at FROM message_batch_requests r JOIN message_batches b ON b.seq = r.batch_seq WHERE b.id = ? AND r.started_at IS NOT NULL ORDER BY r.started_at")
      .all(id) as Array<{ idx: number; started_at: number; ended_at: number }>;
    db.close();
    for (const trial of trials) {
      // The batch request holding the sequence while the interactive one waited: the last given it before
      // (started_at is when the scheduler gave it; ended_at, when its result was stored, comes a little after
      // it gave the sequence back, so the first to end after is not always the one holding it).
      const holder = timeline.filter((r) => r.started_at <= trial.waitingSeen).at(-1)!;
      const startedMeanwhile = timeline.filter((r) => r.idx !== holder.idx && r.started_at > trial.waitingSeen && r.started_at <= trial.firstEvent);
      expect(startedMeanwhile, JSON.stringify({ trial, holder })).toEqual([]);
      // ...and the next batch request started only once the interactive one had started.
      // (After the last trial the batch was canceled, perhaps before its next request started.)
      const next = timeline.find((r) => r.started_at > holder.started_at && r.idx !== holder.idx);
      if (next) expect(next.started_at).toBeGreaterThan(trial.firstEvent);
    }
  }, 120_000);
});

describe("a server killed mid-batch", () => {
  it("resumes on restart: every custom_id has exactly one result, and results stored before the kill are kept", async () => {
    const n = 40;
    const { id } = await client.messages.batches.create({ requests: Array.from({ length: n }, (_, i) => ({ custom_id: `k${i}`, params: busy(50, `Kill test ${i}`) })) });
    let seen: Anthropic.Messages.MessageBatch;
    do {
      seen = await client.messages.batches.retrieve(id);
      await new Promise((r) => setTimeout(r, 20));
    } while (seen.request_counts.succeeded < 5);
    expect(await server.stop("SIGKILL")).toBeNull();

    // What the killed server had stored (read from its database while nothing runs).
    const db = new Database(join(dataDir, "svc.sqlite3"), { readonly: true });
    const stored = new Map(
      (db.prepare("SELECT r.custom_id, r.result FROM message_batch_requests r JOIN message_batches b ON b.seq = r.batch_seq WHERE b.id = ? AND r.state = 'succeeded'").all(id) as Array<{ custom_id: string; result: string }>).map(
        (r) => [r.custom_id, (JSON.parse(r.result) as { message: { id: string } }).message.id],
      ),
    );
    db.close();
    expect(stored.size).toBeGreaterThanOrEqual(5);
    expect(stored.size).toBeLessThan(n);

    server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ARGS });
    client = new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0 });
    const ended = await waitEnded(client, id);
    expect(ended.request_counts).toEqual({ processing: 0, succeeded: n, errored: 0, canceled: 0, expired: 0 });
    const results = await resultsOf(client, id);
    expect(results.map((r) => r.custom_id)).toEqual(Array.from({ length: n }, (_, i) => `k${i}`));
    for (const line of results) {
      if (line.result.type !== "succeeded") throw new Error(`expected succeeded: ${JSON.stringify(line)}`);
      const before = stored.get(line.custom_id);
      if (before) expect(line.result.message.id).toBe(before);
    }
  }, 180_000);
});

