// Message batches, one run, against a real `svc serve` process on the generated model (or --model):
//   1. throughput: N requests (default 500, max_tokens 16) as one batch (from the batch's created_at, the
//      upload included, to its ended_at) ÷ the same requests sent concurrently through HTTP (POST
//      /v1/messages, as many at once as the account may have in flight), alternating which goes first, median
//      of --rounds (goal ≥ 0.9); also the server's CPU time per request each way. Run with --sequences 1 and 2:
//      with several sequences the scheduler keeps one for interactive work, so a batch uses all but one.
//   2. the results endpoint: --lines (default 100,000) stored result lines streamed to a client, the server's
//      RSS sampled meanwhile (goal: flat: ten times the lines cost under 10 MiB more than a tenth of them).
// Usage: npm run bench:batches [-- --requests 500] [--sequences 1] [--rounds 3] [--lines 100000] [--model PATH]
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { writeTinyModel } from "../resources/test-model/cli.js";
import { newId } from "../server/core/ids.js";
import { Store } from "../server/store/store.js";
import { createKey, startSvc } from "../test/support/svc-process.js";
import { median, rssMiB } from "./common.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    requests: { type: "string", default: "500" },
    tokens: { type: "string", default: "16" },
    sequences: { type: "string", default: "1" },
    threads: { type: "string", default: "1" },
    rounds: { type: "string", default: "3" },
    lines: { type: "string", default: "100000" },
    skip: { type: "string", default: "" },
  },
});
const N = Number(values.requests);
const maxTokens = Number(values.tokens);
const rounds = Number(values.rounds);
const modelPath = values.model ?? writeTinyModel();

function serve(dataDir: string) {
  return startSvc({ model: modelPath, dataDir, args: ["--sequences", values.sequences!, "--context-size", "4096"], env: { SVC_THREADS: values.threads! } });
}

/** CPU seconds the process has used (user + system), from /proc: robust where other work shares the cores. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const paramsOf = (i: number) => ({ model: "claude-haiku-4-5", max_tokens: maxTokens, messages: [{ role: "user", content: `Request ${i}: say something.` }] });

async function throughput(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-batches-"));
  const key = createKey(dataDir);
  const server = await serve(dataDir);
  const headers = { "x-api-key": key, "content-type": "application/json" };
  try {
    const health = (await (await fetch(`${server.url}/health`)).json()) as { requests: { account_limit: number }; model: { sequences: number } };
    const concurrency = health.requests.account_limit;
    console.log(`Throughput: ${N} requests, max_tokens ${maxTokens}, ${health.model.sequences} sequence(s); HTTP clients at once: ${concurrency}.`);

    const viaHttp = async (): Promise<number> => {
      const started = performance.now();
      let next = 0;
      const worker = async () => {
        while (next < N) {
          const i = next++;
          const res = await fetch(`${server.url}/v1/messages`, { method: "POST", headers, body: JSON.stringify(paramsOf(i)) });
          if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
          await res.arrayBuffer();
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
      return performance.now() - started;
    };

    const viaBatch = async (): Promise<{ ms: number; serverMs: number }> => {
      const started = performance.now();
      const body = JSON.stringify({ requests: Array.from({ length: N }, (_, i) => ({ custom_id: `r${i}`, params: paramsOf(i) })) });
      const res = await fetch(`${server.url}/v1/messages/batches`, { method: "POST", headers, body });
      const created = (await res.json()) as { id: string };
      if (res.status !== 200) throw new Error(`create: ${JSON.stringify(created)}`);
      for (;;) {
        const batch = (await (await fetch(`${server.url}/v1/messages/batches/${created.id}`, { headers })).json()) as {
          processing_status: string;
          created_at: string;
          ended_at: string | null;
          request_counts: Record<string, number>;
        };
        if (batch.processing_status === "ended") {
          if (batch.request_counts.succeeded !== N) throw new Error(`batch ended with ${JSON.stringify(batch.request_counts)}`);
          return { ms: performance.now() - started, serverMs: Date.parse(batch.ended_at!) - Date.parse(batch.created_at) };
        }
        // Seldom: each poll is a keyed request the server answers too. The server's own times are the measure.
        await new Promise((r) => setTimeout(r, 200));
      }
    };

    const pid = server.process.pid!;
    await viaHttp(); // warm-up (prompt cache, JIT)
    const ratios: number[] = [];
    const cpuRatios: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      // Alternate which goes first, so a change in the machine's load does not favour one side.
      const httpFirst = round % 2 === 1;
      let http = 0;
      let batch = { ms: 0, serverMs: 0 };
      let httpCpu = 0;
      let batchCpu = 0;
      for (const side of httpFirst ? ["http", "batch"] : ["batch", "http"]) {
        const before = cpuSeconds(pid);
        if (side === "http") http = await viaHttp();
        else batch = await viaBatch();
        if (side === "http") httpCpu = cpuSeconds(pid) - before;
        else batchCpu = cpuSeconds(pid) - before;
      }
      const ratio = http / batch.serverMs;
      ratios.push(ratio);
      cpuRatios.push(httpCpu / batchCpu);
      console.log(
        `  round ${round}: HTTP ${(N / (http / 1000)).toFixed(1)} req/s, batch ${(N / (batch.serverMs / 1000)).toFixed(1)} req/s ` +
          `(created_at→ended_at ${(batch.serverMs / 1000).toFixed(2)} s, the upload included) → ratio ${ratio.toFixed(3)}; ` +
          `server CPU per request: HTTP ${((httpCpu / N) * 1000).toFixed(2)} ms, batch ${((batchCpu / N) * 1000).toFixed(2)} ms`,
      );
    }
    const m = median(ratios);
    console.log(`Batch throughput ÷ HTTP throughput: ${m.toFixed(3)} (median of ${rounds}; goal ≥ 0.9) ${m >= 0.9 ? "PASS" : "BELOW GOAL"}`);
    console.log(`Server CPU per HTTP request ÷ per batch request: ${median(cpuRatios).toFixed(3)} (median; above 1: a batch request costs the server less)`);
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function resultsStream(): Promise<void> {
  const lines = Number(values.lines);
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-results-"));
  const key = createKey(dataDir);
  // Stored results as the worker writes them, put straight into the database (running 100,000 requests
  // is not what this measures).
  const store = Store.open(dataDir);
  const accountId = (store.db.prepare("SELECT account_id FROM api_keys LIMIT 1").get() as { account_id: string }).account_id;
  const now = Date.now();
  const stored = (count: number): string => {
    const id = newId("msgbatch_");
    const seq = store.batches.insertUploading({ id, accountId, createdAt: now, expiresAt: now + 86_400_000, idempotencyKey: null });
  const message = (i: number) => ({
    type: "succeeded",
    message: {
      id: newId("msg_"),
      type: "message",
      role: "assistant",
      model: "claude-haiku-4-5",
      content: [{ type: "text", text: `Answer number ${i}: ${"lorem ipsum dolor sit amet ".repeat(12)}` }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 12, output_tokens: 90, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    },
  });
    const insert = store.db.prepare("INSERT INTO message_batch_requests (batch_seq, idx, custom_id, state, result, ended_at) VALUES (?, ?, ?, 'succeeded', ?, ?)");
    store.db.transaction(() => {
      for (let i = 0; i < count; i++) insert.run(seq, i, `r${i}`, JSON.stringify(message(i)), now);
    })();
    store.batches.commitUpload(seq, count, "bench");
    store.db.prepare("UPDATE message_batches SET status = 'ended', ended_at = ?, succeeded = ? WHERE seq = ?").run(now, count, seq);
    return id;
  };
  const big = stored(lines);
  const small = stored(Math.ceil(lines / 10));
  store.close();

  const server = await serve(dataDir);
  try {
    const pid = server.process.pid!;
    const read = async (id: string, expected: number) => {
      let peak = rssMiB(pid);
      const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 20);
      const started = performance.now();
      const res = await fetch(`${server.url}/v1/messages/batches/${id}/results`, { headers: { "x-api-key": key } });
      if (res.status !== 200) throw new Error(`results: ${res.status} ${await res.text()}`);
      let bytes = 0;
      let count = 0;
      const reader = res.body!.getReader();
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
        bytes += chunk.value.length;
        for (let at = chunk.value.indexOf(10); at !== -1; at = chunk.value.indexOf(10, at + 1)) count++;
      }
      clearInterval(sampler);
      if (count !== expected) throw new Error(`expected ${expected} lines, got ${count}`);
      return { mib: bytes / 2 ** 20, ms: performance.now() - started, peak: Math.max(peak, rssMiB(pid)) };
    };
    const idle = rssMiB(pid);
    // Flat means: once the server has streamed a small batch (its buffers and heap at their working size),
    // streaming ten times as much costs nothing more.
    let smallPeak = 0;
    for (let i = 0; i < 3; i++) smallPeak = Math.max(smallPeak, (await read(small, Math.ceil(lines / 10))).peak);
    let bigPeak = 0;
    let mib = 0;
    let rate = 0;
    for (let i = 0; i < 2; i++) {
      const r = await read(big, lines);
      bigPeak = Math.max(bigPeak, r.peak);
      mib = r.mib;
      rate = Math.max(rate, r.mib / (r.ms / 1000));
    }
    const extra = bigPeak - smallPeak;
    console.log(`Results stream: ${lines} stored lines (${mib.toFixed(1)} MiB of JSONL), up to ${rate.toFixed(1)} MiB/s.`);
    console.log(
      `  server RSS: ${idle.toFixed(0)} MiB idle; peak ${smallPeak.toFixed(0)} MiB over three reads of a ${Math.ceil(lines / 10)}-line batch; ` +
        `peak ${bigPeak.toFixed(0)} MiB over two reads of the ${lines}-line one: ${extra >= 0 ? "+" : ""}${extra.toFixed(0)} MiB for ten times the lines ` +
        `(goal: flat, under 10 MiB) ${extra < 10 ? "PASS" : "NOT FLAT"}`,
    );
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (!values.skip!.includes("throughput")) await throughput();
if (!values.skip!.includes("results")) await resultsStream();
