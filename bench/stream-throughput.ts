// Benchmark, one run, one process, one loaded model:
//   1. streaming tokens/s through HTTP (SSE) ÷ tokens/s from the engine called directly, same settings
//      (goal ≥ 0.97);
//   2. time to first token of a request whose ~2k-token prefix is cached ÷ the same request cold
//      (goal ≤ 0.2).
// Usage: npm run bench [-- --model PATH.gguf] [--threads N] [--tokens N] [--rounds N]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Worker } from "node:worker_threads";
import { writeTinyModel } from "../resources/test-model/cli.js";
import { defaultThreads } from "../server/config.js";
import type { InferenceRequest } from "../server/core/inference.js";
import { startServer } from "../server/index.js";
import { toEngineRequest } from "../server/pipeline/pipeline.js";
import { median, fixedLengthSchema } from "./common.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string" },
    tokens: { type: "string", default: "1000" },
    rounds: { type: "string", default: "9" },
  },
});
const tokens = Number(values.tokens);
const rounds = Number(values.rounds);
const modelPath = values.model ?? writeTinyModel();
const threads = values.threads ? Number(values.threads) : defaultThreads();


// A long, fixed-length answer for any model.
const longSchema = fixedLengthSchema(Math.ceil(tokens / 2));
const chatBody = {
  messages: [{ role: "user", content: "List numbers." }],
  reasoning_effort: "none",
  temperature: 0,
  max_tokens: tokens * 4,
  response_format: { type: "json_schema", json_schema: { name: "numbers", schema: longSchema } },
};
const inference: InferenceRequest = {
  surface: "chat",
  messages: [{ role: "user", content: [{ type: "text", text: "List numbers." }] }],
  tools: [],
  toolChoice: { type: "auto" },
  output: { type: "json_schema", schema: longSchema },
  reasoning: { mode: "fast", budgetTokens: 0, effort: "none" },
  maxTokens: tokens * 4,
  stopSequences: [],
  sampling: { temperature: 0 },
};

const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-"));
const server = await startServer(
  { host: "127.0.0.1", port: 0, dataDir, modelPath, threads, sequences: 1, contextSize: 8192, gpu: "auto", logLevel: "warn" },
  () => undefined,
);
const key = server.keys.create({ name: "bench" }).key;
const engine = server.engineHost.engine();

async function direct(): Promise<{ tps: number; tokens: number }> {
  let first = 0;
  let count = 0;
  for await (const event of engine.generate(toEngineRequest(inference), new AbortController().signal)) {
    if (event.type === "start") first = performance.now();
    if (event.type === "done") count = event.outcome.usage.completionTokens;
  }
  return { tps: count / ((performance.now() - first) / 1000), tokens: count };
}

// The HTTP client runs in its own thread, as a real client is its own process: its parsing must not
// share the server's event loop.
const CLIENT = `
const { parentPort } = require("node:worker_threads");
const http = require("node:http");
// Keeps only the tail of the body: the client should cost the machine as little as a real one would.
parentPort.on("message", ({ url, key, body }) => {
  const sent = performance.now();
  const req = http.request(url, { method: "POST", headers: { authorization: "Bearer " + key, "content-type": "application/json" } }, (res) => {
    let first = 0, tail = "";
    res.setEncoding("utf8");
    res.on("data", (chunk) => {
      if (first === 0) first = performance.now();
      tail = (tail + chunk).slice(-8192);
    });
    res.on("end", () => {
      const end = performance.now();
      const frames = tail.split("\\n\\n").filter((f) => f.startsWith("data: {"));
      const usage = frames.map((f) => JSON.parse(f.slice(6))).find((c) => c.usage);
      const count = usage ? usage.usage.completion_tokens : 0;
      parentPort.postMessage({ ttft: first - sent, tps: count / ((end - first) / 1000), tokens: count });
    });
  });
  req.end(JSON.stringify(body));
});
`;
const client = new Worker(CLIENT, { eval: true });

function sse(body: object): Promise<{ ttft: number; tps: number; tokens: number }> {
  return new Promise((resolve) => {
    client.once("message", resolve);
    client.postMessage({ url: `${server.url}/v1/chat/completions`, key, body: { ...body, stream: true } });
  });
}

try {
  // Warm-up: first grammar compilation and allocations happen outside the measurements.
  await direct();
  await sse(chatBody);

  // Paired rounds, alternating which goes first: the machine's speed drifts, a pair shares the drift.
  const directTps: number[] = [];
  const httpTps: number[] = [];
  const pairRatios: number[] = [];
  for (let i = 0; i < rounds; i++) {
    let d: number;
    let h: number;
    if (i % 2 === 0) {
      d = (await direct()).tps;
      h = (await sse(chatBody)).tps;
    } else {
      h = (await sse(chatBody)).tps;
      d = (await direct()).tps;
    }
    directTps.push(d);
    httpTps.push(h);
    pairRatios.push(h / d);
  }

  // ~2k-token prefix: grow a system prompt until the engine counts about 2000 tokens.
  const filler = "The assistant answers questions about the local service, its files and its settings. ";
  let system = filler;
  while ((await engine.countPromptTokens(toEngineRequest({ ...inference, output: { type: "text" }, messages: [{ role: "system", content: [{ type: "text", text: system }] }] }))) < 2000)
    system += filler;
  const ask = (prefix: string, question: string) => ({
    messages: [
      { role: "system", content: prefix },
      { role: "user", content: question },
    ],
    reasoning_effort: "none",
    temperature: 0,
    max_tokens: 8,
  });
  const cold: number[] = [];
  const warm: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const prefix = `Session ${i}-${Math.random()}. ${system}`;
    cold.push((await sse(ask(prefix, "First question?"))).ttft);
    warm.push((await sse(ask(prefix, "Second question?"))).ttft);
  }

  if (process.env.BENCH_VERBOSE) console.log({ directTps, httpTps, pairRatios, cold, warm });
  const streamRatio = median(pairRatios);
  const ttftRatio = median(warm) / median(cold);
  const fmt = (n: number) => n.toFixed(1);
  console.log(`model: ${server.engineHost.status().model?.name} on ${server.engineHost.status().gpu?.backend}, threads ${threads}, ${rounds} rounds, medians`);
  console.log(`stream tokens/s   direct engine ${fmt(median(directTps))}   HTTP SSE ${fmt(median(httpTps))}   ratio ${streamRatio.toFixed(3)} (median of paired rounds; goal >= 0.97)`);
  console.log(`TTFT, 2k prefix   cold ${fmt(median(cold))} ms   cached ${fmt(median(warm))} ms   ratio ${ttftRatio.toFixed(3)} (goal <= 0.2)`);
} finally {
  await client.terminate();
  await server.close();
  rmSync(dataDir, { recursive: true, force: true });
}
