// What the engine process costs (issue 37): the same model and greedy generations, with the engine in this
// process (LlamaEngine) and in an engine process (ProcessEngine, what the server uses), alternated over rounds,
// one stream and four at once. Prints tokens/s for each and the IPC hop as a share of a token's time.
//
// Those throughput ratios swing with the machine's load (docs/performance.md, section 22). So the hop is also
// measured by construction, in processor time, which a busy machine does not inflate: the receiving side is
// this process's CPU time while one generation streams from the engine process (this process does nothing
// else meanwhile: it receives, decodes and hands on each message, as the server does, plus the bench's loop);
// the sending side is the CPU time of sending the same messages, captured from that generation, to a process
// that drops them. Their sum per token, over the time a token takes in process, is the hop's share.
//
//   npm run bench:engine-process [-- --model PATH.gguf --tokens 200 --rounds 3 --threads 2]
//
// Default model: bench/peer-model.ts's (110 MB F32, random weights; every answer runs to the token limit).
import { spawn } from "node:child_process";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { LlamaEngine } from "../server/engine/llama-engine.js";
import type { EngineChannel, FromEngine } from "../server/engine/engine-protocol.js";
import { forkEngine, ProcessEngine } from "../server/engine/process-engine.js";
import type { Engine, EngineRequest } from "../server/engine/types.js";
import { PEER_CACHE } from "./llama-server-build.js";
import { ensurePeerModel } from "./peer-model.js";

// Like the server (bin/svc.js) and the engine process (process-engine.ts): one libuv pool thread, so that the
// engine in this process decodes from one thread too and the two differ only by the process boundary.
if (process.env.UV_THREADPOOL_SIZE !== "1") {
  console.error("Run with UV_THREADPOOL_SIZE=1 (npm run bench:engine-process does).");
  process.exit(2);
}

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    tokens: { type: "string", default: "200" },
    rounds: { type: "string", default: "3" },
    threads: { type: "string", default: "2" },
  },
});
const modelPath = values.model ?? ensurePeerModel(join(PEER_CACHE, "model.gguf"));
const tokens = Number(values.tokens);
const rounds = Number(values.rounds);
const threads = Number(values.threads);
const options = { modelPath, threads, sequences: 4, contextSize: 4096, gpu: "cpu" as const };

const request = (i: number): EngineRequest => ({
  messages: [{ role: "user", content: [{ type: "text", text: `Write something long, number ${i}.` }] }],
  tools: [],
  toolChoice: { type: "auto" },
  parallelToolCalls: false,
  output: { type: "text" },
  mode: "fast",
  reasoningBudget: 0,
  maxTokens: tokens,
  stopSequences: [],
  sampling: { temperature: 0 },
});

/** Tokens per second of `streams` generations at once (their completion tokens over the wall time). */
async function run(engine: Engine, streams: number, round: number): Promise<number> {
  const started = performance.now();
  const counts = await Promise.all(
    Array.from({ length: streams }, async (_, s) => {
      let completion = 0;
      for await (const event of engine.generate(request(round * 10 + s), new AbortController().signal))
        if (event.type === "done") completion = event.outcome.usage.completionTokens;
      return completion;
    }),
  );
  return counts.reduce((a, b) => a + b, 0) / ((performance.now() - started) / 1000);
}

const inProcess = await LlamaEngine.load(options);
/** What the engine process sent, while `capture` is on: each "events" message. */
const captured: FromEngine[] = [];
let capture = false;
const inChild = await ProcessEngine.start({
  ...options,
  spawn: (entry, env, execArgv): EngineChannel => {
    const channel = forkEngine(entry, env, execArgv);
    return {
      ...channel,
      onMessage: (listener) =>
        channel.onMessage((message) => {
          if (capture && message.type === "events") captured.push(message);
          listener(message);
        }),
    };
  },
});
let hop: { tokens: number; messages: number; receiveUs: number; sendUs: number } | null = null;

/** CPU time (µs) this process takes to send `messages` (each several times) to a process that drops them, per message. */
async function sendCost(messages: FromEngine[]): Promise<number> {
  const sink = spawn(process.execPath, ["-e", "process.on('message', () => {}); process.on('disconnect', () => process.exit(0));"], { stdio: ["ignore", "ignore", "ignore", "ipc"] });
  await new Promise<void>((resolve) => setTimeout(resolve, 300));
  const repeat = Math.max(1, Math.ceil(2000 / Math.max(1, messages.length)));
  const before = process.cpuUsage();
  let sent = 0;
  for (let r = 0; r < repeat; r++)
    for (const message of messages) {
      sink.send(message);
      sent++;
      // One at a time, as the engine process sends them (at most about 60 a second there; here back to back).
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  const used = process.cpuUsage(before);
  sink.disconnect();
  return (used.user + used.system) / sent;
}

const results: Record<string, { here: number[]; child: number[] }> = { "1 stream": { here: [], child: [] }, "4 streams": { here: [], child: [] } };
try {
  // A warm-up each, then alternated rounds (the order flips each round, so drift does not favour one).
  await run(inProcess, 1, 99);
  await run(inChild, 1, 99);
  for (let r = 0; r < rounds; r++)
    for (const [label, streams] of [["1 stream", 1], ["4 streams", 4]] as const) {
      const order = r % 2 === 0 ? (["here", "child"] as const) : (["child", "here"] as const);
      for (const where of order) results[label]![where].push(await run(where === "here" ? inProcess : inChild, streams, r));
    }
  // The hop by construction (above): one stream, its messages captured, this process's CPU time measured.
  capture = true;
  const cpuBefore = process.cpuUsage();
  let hopTokens = 0;
  for await (const event of inChild.generate(request(7), new AbortController().signal))
    if (event.type === "done") hopTokens = event.outcome.usage.completionTokens;
  const receive = process.cpuUsage(cpuBefore);
  capture = false;
  hop = { tokens: hopTokens, messages: captured.length, receiveUs: receive.user + receive.system, sendUs: await sendCost(captured) };
} finally {
  await inChild.close();
  await inProcess.close();
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`Model ${modelPath}, ${tokens} tokens a generation, ${threads} threads, ${rounds} rounds (medians).`);
console.log("| | in-process tokens/s | engine process tokens/s | ratio | IPC hop per token |");
console.log("|---|---|---|---|---|");
for (const [label, { here, child }] of Object.entries(results)) {
  const a = median(here);
  const b = median(child);
  // Time per token, per stream: the difference is what the hop adds.
  const streams = label.startsWith("4") ? 4 : 1;
  const hop = (streams / b - streams / a) / (streams / a);
  console.log(`| ${label} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(b / a).toFixed(3)} | ${(hop * 100).toFixed(1)}% |`);
}
if (hop) {
  const tokenMs = 1000 / median(results["1 stream"]!.here);
  const receivePerToken = hop.receiveUs / hop.tokens / 1000;
  const sendPerToken = (hop.sendUs * hop.messages) / hop.tokens / 1000;
  console.log(
    `\nThe hop by construction (one stream, ${hop.tokens} tokens in ${hop.messages} messages): receiving ${(receivePerToken * 1000).toFixed(0)} µs of CPU a token ` +
      `(this process, everything it did), sending ${hop.sendUs.toFixed(0)} µs a message (${(sendPerToken * 1000).toFixed(0)} µs a token); ` +
      `a token takes ${tokenMs.toFixed(2)} ms in process: the hop is ${(((receivePerToken + sendPerToken) / tokenMs) * 100).toFixed(2)}% of it.`,
  );
}
