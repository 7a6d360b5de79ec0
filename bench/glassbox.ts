// Benchmark, one run, one process, one loaded model: the decode cost of token probabilities.
//   time per generated token with glassbox confidence ÷ plain decoding, and with top_logprobs 5 ÷ plain,
//   at temperature 0 and at 0.7 (where undoing the temperature needs every kept candidate's probability).
// Configurations alternate within each round, so drift (other load, thermals) hits them alike.
// Usage: npm run bench:glassbox [-- --model PATH.gguf] [--threads N] [--tokens N] [--rounds N]
import { parseArgs } from "node:util";
import { writeTinyModel } from "../resources/test-model/cli.js";
import { defaultThreads } from "../server/config.js";
import { LlamaEngine } from "../server/engine/llama-engine.js";
import type { EngineRequest } from "../server/engine/types.js";
import { median, fixedLengthSchema } from "./common.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string" },
    tokens: { type: "string", default: "400" },
    rounds: { type: "string", default: "7" },
  },
});
const tokens = Number(values.tokens);
const rounds = Number(values.rounds);
const modelPath = values.model ?? writeTinyModel();
const threads = values.threads ? Number(values.threads) : defaultThreads();


// A long, fixed-length answer for any model.
const longSchema = fixedLengthSchema(Math.ceil(tokens / 2));
const base: EngineRequest = {
  messages: [{ role: "user", content: [{ type: "text", text: "List numbers." }] }],
  tools: [],
  toolChoice: { type: "auto" },
  parallelToolCalls: false,
  output: { type: "json_schema", schema: longSchema },
  mode: "fast",
  reasoningBudget: 0,
  maxTokens: tokens * 4,
  stopSequences: [],
  sampling: { temperature: 0, seed: 7 },
};

const engine = await LlamaEngine.load({ modelPath, threads, sequences: 1, contextSize: 8192, gpu: "auto" });

/** Milliseconds per generated token (prompt evaluation excluded: timed from the start event). */
async function msPerToken(request: EngineRequest): Promise<number> {
  let first = 0;
  let count = 0;
  for await (const event of engine.generate(request, new AbortController().signal)) {
    if (event.type === "start") first = performance.now();
    if (event.type === "done") count = event.outcome.usage.completionTokens;
  }
  return (performance.now() - first) / Math.max(1, count);
}

const configs: Record<string, EngineRequest> = {};
for (const temperature of [0, 0.7]) {
  const sampling = { temperature, seed: 7, ...(temperature > 0 ? { topK: 40, topP: 0.95 } : {}) };
  configs[`plain T=${temperature}`] = { ...base, sampling };
  configs[`confidence T=${temperature}`] = { ...base, sampling, tokenProbabilities: { top: 0 } };
  configs[`top_logprobs 5 T=${temperature}`] = { ...base, sampling, tokenProbabilities: { top: 5 } };
}

const times: Record<string, number[]> = Object.fromEntries(Object.keys(configs).map((k) => [k, []]));
for (const request of Object.values(configs)) await msPerToken(request); // warm-up
for (let r = 0; r < rounds; r++) for (const [name, request] of Object.entries(configs)) times[name]!.push(await msPerToken(request));

const info = engine.status().model!;
console.log(`model ${info.name}, ${threads} thread(s), ~${tokens} answer tokens per run, median of ${rounds} rounds`);
for (const temperature of [0, 0.7]) {
  const plain = median(times[`plain T=${temperature}`]!);
  console.log(`T=${temperature}: plain decoding ${plain.toFixed(3)} ms/token`);
  for (const kind of ["confidence", "top_logprobs 5"]) {
    const t = median(times[`${kind} T=${temperature}`]!);
    console.log(`  ${kind.padEnd(15)} ${t.toFixed(3)} ms/token   ratio to plain ${(t / plain).toFixed(3)}`);
  }
}
await engine.close();
