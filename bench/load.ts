// Load test of the scheduler and limits, bounded in count and time: C concurrent streaming clients (default
// 100, spread over A accounts) against a real `svc serve` process with 2 sequences on the generated model.
// Every request must end in a complete stream or a clean 429 with Retry-After: no 5xx, no hang. Prints the
// count of each outcome, p50/p95 of the time to first token (queue wait + prompt) and of Retry-After, and
// the server's RSS over the run.
// Usage: npm run bench:load [-- --clients 100] [--accounts 10] [--tokens 64] [--sequences 2] [--timeout 180]
//        [--ramp SECONDS]  (clients arrive evenly over this time instead of all at once)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { writeTinyModel } from "../resources/test-model/cli.js";
import { createKey, startSvc } from "../test/support/svc-process.js";
import { fixedLengthSchema, rssMiB as rssOf } from "./common.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    clients: { type: "string", default: "100" },
    accounts: { type: "string", default: "10" },
    tokens: { type: "string", default: "64" },
    sequences: { type: "string", default: "2" },
    threads: { type: "string", default: "1" },
    timeout: { type: "string", default: "180" },
    ramp: { type: "string", default: "0" },
  },
});
const clients = Number(values.clients);
const accounts = Number(values.accounts);
const tokens = Number(values.tokens);
const deadlineMs = Number(values.timeout) * 1000;
const modelPath = values.model ?? writeTinyModel();

const dataDir = mkdtempSync(join(tmpdir(), "svc-load-"));
const keys: string[] = [];
for (let a = 0; a < accounts; a++) keys.push(createKey(dataDir, "--account", `load${a}`));

const server = await startSvc({
  model: modelPath,
  dataDir,
  args: ["--sequences", values.sequences!, "--context-size", "4096"],
  env: { SVC_THREADS: values.threads! },
});
const url = server.url;

const rssMiB = () => rssOf(server.process.pid!);

const rss: number[] = [rssMiB()];
const sampler = setInterval(() => rss.push(rssMiB()), 250);

type Outcome = "complete" | "429 concurrency_limit_exceeded" | "429 queue_full" | "429 other" | "5xx" | "cut stream" | "other status" | "hang" | "client error";
interface Result {
  outcome: Outcome;
  ttftMs?: number;
  retryAfter?: number;
}

const abortAll = new AbortController();
const overall = setTimeout(() => abortAll.abort(new Error("deadline")), deadlineMs);

const rampMs = Number(values.ramp) * 1000;
// An answer of about `tokens` tokens from any model: an array of integers the grammar makes it finish.
const longSchema = fixedLengthSchema(Math.max(1, Math.ceil(tokens / 2)));

async function one(i: number): Promise<Result> {
  if (rampMs > 0) await new Promise((r) => setTimeout(r, (rampMs * i) / clients));
  const started = performance.now();
  const key = keys[i % keys.length]!;
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: `Client ${i}: list numbers.` }],
        stream: true,
        reasoning_effort: "none",
        max_tokens: tokens * 4,
        response_format: { type: "json_schema", json_schema: { name: "numbers", schema: longSchema } },
      }),
      signal: abortAll.signal,
    });
    if (res.status === 429) {
      const body = (await res.json()) as { error?: { code?: string } };
      const retryAfter = Number(res.headers.get("retry-after"));
      const code = body.error?.code;
      const outcome: Outcome = code === "concurrency_limit_exceeded" || code === "queue_full" ? `429 ${code}` : "429 other";
      return { outcome: Number.isFinite(retryAfter) && retryAfter >= 1 ? outcome : "429 other", retryAfter };
    }
    if (res.status >= 500) return { outcome: "5xx" };
    if (res.status !== 200) return { outcome: "other status" };
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    let ttftMs: number | undefined;
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      text += decoder.decode(chunk.value, { stream: true });
      if (ttftMs === undefined && text.includes("data: {")) ttftMs = performance.now() - started;
    }
    return { outcome: text.includes("data: [DONE]") && !text.includes('"error"') ? "complete" : "cut stream", ttftMs };
  } catch (err) {
    return { outcome: abortAll.signal.aborted ? "hang" : "client error" };
  }
}

const began = performance.now();
const results = await Promise.all(Array.from({ length: clients }, (_, i) => one(i)));
const wallS = (performance.now() - began) / 1000;
clearTimeout(overall);
await new Promise((r) => setTimeout(r, 1000));
clearInterval(sampler);
rss.push(rssMiB());
await server.stop();
rmSync(dataDir, { recursive: true, force: true });

const pct = (xs: number[], p: number) => (xs.length === 0 ? NaN : [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!);
const counts = new Map<Outcome, number>();
for (const r of results) counts.set(r.outcome, (counts.get(r.outcome) ?? 0) + 1);
const ttft = results.flatMap((r) => (r.ttftMs === undefined ? [] : [r.ttftMs]));
const retry = results.flatMap((r) => (r.retryAfter === undefined ? [] : [r.retryAfter]));

console.log(
  `${clients} streaming clients over ${accounts} accounts${rampMs ? `, arriving over ${values.ramp} s` : ", all at once"}, ${values.sequences} sequences, ${tokens} tokens each; ${wallS.toFixed(1)} s`,
);
console.log("outcome counts:");
for (const [outcome, n] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`  ${outcome.padEnd(32)} ${n}`);
console.log(`time to first token (queue wait + prompt), ms: p50 ${pct(ttft, 50).toFixed(0)}  p95 ${pct(ttft, 95).toFixed(0)}  max ${pct(ttft, 100).toFixed(0)}`);
if (retry.length) console.log(`Retry-After on 429, s: p50 ${pct(retry, 50)}  p95 ${pct(retry, 95)}`);
console.log(`server RSS, MiB: start ${rss[0]!.toFixed(0)}  peak ${Math.max(...rss).toFixed(0)}  end ${rss.at(-1)!.toFixed(0)}`);
const bad = (counts.get("5xx") ?? 0) + (counts.get("hang") ?? 0) + (counts.get("cut stream") ?? 0) + (counts.get("429 other") ?? 0) + (counts.get("other status") ?? 0);
console.log(bad === 0 ? "OK: every request completed or got a clean 429." : `FAILED: ${bad} requests ended otherwise.`);
process.exitCode = bad === 0 ? 0 : 1;
