// bench:upstream: svc in front of llama.cpp's own llama-server (docs/scale-out.md).
//   1. Aggregate tokens/s of N concurrent streams (default 8) with 1 and 2 llama-server replicas behind
//      `svc serve --upstream` (each replica 1 thread), and the same streams sent to one llama-server directly
//      (its /v1/chat/completions): our overhead per token is 1 - ours/direct on one replica.
//   2. Prefix-affinity cache hit rate against round-robin (--upstream-affinity off) on 4 conversations × 5
//      turns over 2 replicas: cached prompt tokens / prompt tokens, from each answer's usage.
// The model is bench:peer's generated one (512 wide, 8 layers: milliseconds per token on a core, so our own
// per-token costs show against real work). Loopback only, every run bounded. Not part of `npm test`.
// Usage: npm run bench:upstream [-- --streams 8 --tokens 200 --json OUT.json]
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ensureUpstreamTools, PEER_CACHE, ROOT } from "./llama-server-build.js";
import { ensurePeerModel } from "./peer-model.js";

const { values } = parseArgs({
  options: { streams: { type: "string", default: "8" }, tokens: { type: "string", default: "200" }, json: { type: "string" } },
});
const STREAMS = Number(values.streams);
const TOKENS = Number(values.tokens);
const log = (line: string) => console.error(`[bench:upstream] ${line}`);
const children: ChildProcess[] = [];
process.on("exit", () => children.forEach((c) => c.kill("SIGKILL")));

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function waitFor(child: ChildProcess, pattern: RegExp, what: string): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`${what} did not start:\n${out.slice(-2000)}`)), 120_000);
    const on = (d: Buffer) => {
      out += d.toString();
      const m = pattern.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    child.stdout?.on("data", on);
    child.stderr?.on("data", on);
    child.once("exit", (code) => reject(new Error(`${what} exited (${code}):\n${out.slice(-2000)}`)));
  });
}

async function llamaServer(binary: string, model: string, slots: number): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(binary, ["-m", model, "--host", "127.0.0.1", "--port", String(port), "-np", String(slots), "-c", String(slots * 2048), "-t", "1", "-tb", "1", "--no-webui"], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  await waitFor(child, /listening on/, "llama-server");
  return { url: `http://127.0.0.1:${port}`, child };
}

async function svc(model: string, upstreams: string[], affinity: boolean): Promise<{ url: string; key: string; child: ChildProcess; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-upstream-"));
  const bin = join(ROOT, "bin", "svc.js");
  const key = spawnSync(process.execPath, [bin, "keys", "create", "--data-dir", dir], { encoding: "utf8" }).stdout.trim().split("\n").at(-1)!;
  const child = spawn(
    process.execPath,
    [bin, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dir, "--model", model, "--upstream", upstreams.join(","), "--upstream-affinity", affinity ? "on" : "off", "--concurrency-limit", "64"],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, SVC_LOG_LEVEL: "warn" } },
  );
  children.push(child);
  const m = await waitFor(child, /svc listening on (http:\/\/127\.0\.0\.1:\d+)/, "svc");
  return { url: m[1]!, key, child, dir };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}

/** One streamed chat completion; returns its completion tokens (from usage) and the usage. */
async function chat(url: string, key: string | null, body: Record<string, unknown>): Promise<{ tokens: number; prompt: number; cached: number; text: string }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({ model: "svc", stream: true, stream_options: { include_usage: true }, ...body }),
    signal: AbortSignal.timeout(300_000),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  type Usage = { completion_tokens: number; prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } };
  let text = "";
  let usage = null as Usage | null;
  let buffer = "";
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const line = buffer.slice(0, end).replace(/^data: /, "");
      buffer = buffer.slice(end + 2);
      if (line === "[DONE]" || !line.startsWith("{")) continue;
      const chunk = JSON.parse(line) as { choices?: Array<{ delta?: { content?: string } }>; usage?: Usage | null };
      text += chunk.choices?.[0]?.delta?.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
  }
  return { tokens: usage?.completion_tokens ?? 0, prompt: usage?.prompt_tokens ?? 0, cached: usage?.prompt_tokens_details?.cached_tokens ?? 0, text };
}

/** N concurrent streams of up to TOKENS tokens: aggregate tokens/s. */
async function throughput(url: string, key: string | null, extra: Record<string, unknown>): Promise<{ tokensPerSecond: number; tokens: number; seconds: number }> {
  const started = performance.now();
  const results = await Promise.all(
    Array.from({ length: STREAMS }, (_, i) =>
      chat(url, key, { messages: [{ role: "user", content: `Stream ${i}: tell me a story.` }], max_tokens: TOKENS, temperature: 1, seed: 100 + i, ...extra }),
    ),
  );
  const seconds = (performance.now() - started) / 1000;
  const tokens = results.reduce((n, r) => n + r.tokens, 0);
  return { tokensPerSecond: tokens / seconds, tokens, seconds };
}

/** 4 conversations × 5 turns, interleaved: cached prompt tokens / prompt tokens. */
async function hitRate(url: string, key: string): Promise<{ hitRate: number; prompt: number; cached: number }> {
  const system = `You are a helpful assistant for a software team. ${"Follow the house style; answer briefly. ".repeat(20)}`;
  const conversations = Array.from({ length: 4 }, () => [{ role: "system", content: system }] as Array<{ role: string; content: string }>);
  let prompt = 0;
  let cached = 0;
  for (let turn = 0; turn < 5; turn++)
    for (const [c, messages] of conversations.entries()) {
      messages.push({ role: "user", content: `Conversation ${c}, question ${turn}: what next?` });
      const r = await chat(url, key, { messages, max_tokens: 24, temperature: 0, reasoning_effort: "none" });
      messages.push({ role: "assistant", content: r.text });
      if (turn > 0) {
        prompt += r.prompt;
        cached += r.cached;
      }
    }
  return { hitRate: cached / prompt, prompt, cached };
}

const { llamaServer: binary } = ensureUpstreamTools(log);
const model = ensurePeerModel(join(PEER_CACHE, "model.gguf"));
const results: Record<string, unknown> = { streams: STREAMS, tokens: TOKENS, model };

// 1. Throughput: one replica direct and through svc, alternated round after round (the machine's drift hits
// both alike; medians reported), then through svc with 2 replicas. Each replica has STREAMS slots.
const ROUNDS = 3;
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
{
  const a = await llamaServer(binary, model, STREAMS);
  const one = await svc(model, [a.url], true);
  await throughput(a.url, null, {}); // warm-up
  await throughput(one.url, one.key, { reasoning_effort: "none" });
  const direct: number[] = [];
  const ours1: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    direct.push((await throughput(a.url, null, {})).tokensPerSecond);
    ours1.push((await throughput(one.url, one.key, { reasoning_effort: "none" })).tokensPerSecond);
    log(`round ${round + 1}: direct ${direct.at(-1)!.toFixed(1)}, svc + 1 replica ${ours1.at(-1)!.toFixed(1)} tokens/s`);
  }
  await stop(one.child);
  rmSync(one.dir, { recursive: true, force: true });
  const b = await llamaServer(binary, model, STREAMS);
  const two = await svc(model, [a.url, b.url], true);
  await throughput(two.url, two.key, { reasoning_effort: "none" });
  const ours2: number[] = [];
  for (let round = 0; round < ROUNDS; round++) ours2.push((await throughput(two.url, two.key, { reasoning_effort: "none" })).tokensPerSecond);
  log(`svc + 2 replicas: ${ours2.map((x) => x.toFixed(1)).join(", ")} tokens/s`);
  await stop(two.child);
  rmSync(two.dir, { recursive: true, force: true });
  await stop(a.child);
  await stop(b.child);
  const overhead = 1 - median(ours1) / median(direct);
  log(`medians: direct ${median(direct).toFixed(1)}, svc + 1 replica ${median(ours1).toFixed(1)}, svc + 2 replicas ${median(ours2).toFixed(1)} tokens/s`);
  log(`our overhead per token on one replica: ${(overhead * 100).toFixed(1)}% (goal: under 5%)`);
  Object.assign(results, { direct, ours1, ours2, overhead, scaling: median(ours2) / median(ours1) });
}

// 2. Prefix affinity against round-robin: 2 replicas of 2 slots each.
for (const affinity of [true, false]) {
  const a = await llamaServer(binary, model, 2);
  const b = await llamaServer(binary, model, 2);
  const s = await svc(model, [a.url, b.url], affinity);
  const r = await hitRate(s.url, s.key);
  log(`${affinity ? "prefix affinity" : "round-robin"}: cache hit rate ${(r.hitRate * 100).toFixed(1)}% (${r.cached} of ${r.prompt} prompt tokens, turns 2-5)`);
  results[affinity ? "affinity" : "roundRobin"] = r;
  await stop(s.child);
  rmSync(s.dir, { recursive: true, force: true });
  await stop(a.child);
  await stop(b.child);
}

if (values.json) writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
console.log(JSON.stringify(results, null, 2));
process.exit(0);
