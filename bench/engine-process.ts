// What the engine process costs (issue 37): the same model and greedy generations, with the engine in this
// process (LlamaEngine) and in an engine process (ProcessEngine, what the server uses), alternated over rounds,
// one stream and four at once. Prints tokens/s for each and the IPC hop as a share of a token's time.
//
//   npm run bench:engine-process [-- --model PATH.gguf --tokens 200 --rounds 3 --threads 2]
//
// Default model: bench/peer-model.ts's (110 MB F32, random weights; every answer runs to the token limit).
import { join } from "node:path";
import { parseArgs } from "node:util";
import { LlamaEngine } from "../server/engine/llama-engine.js";
import { ProcessEngine } from "../server/engine/process-engine.js";
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
const inChild = await ProcessEngine.start(options);
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
