// What one decode costs by its shape: how many tokens each of a context's sequences brings to the pass
// ("17,17,17,17": four sequences of 17; "68": one of 68), through node-llama-cpp's binding, the calls the
// slot loop makes (server/engine/slot-loop.ts). Each sequence first reads the same prompt; each shape is then
// decoded on top of it (every token asking for its logits, as a step of guesses does) and taken out again,
// the shapes alternated round after round. Prints the median and the least ms of each shape, and ms per
// token. For pricing questions (step-costs.ts) and the kernels' behaviour by shape (docs/performance.md,
// section 40); a benchmark of nothing against a peer, so it prints no ratios.
//
//   npx tsx bench/pass-shapes.ts --model .cache/spec/echo-Q4_K_M.gguf [--threads 1] [--rounds 12]
//     [--prompt-tokens 460] [--flash-attention on|off] [--engine-build] [--shapes "1;1,1,1,1;17,17,17,17;68"]
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel, type Llama } from "node-llama-cpp";
import { loadEngineBuild } from "../server/engine/engine-build.js";
import { intoHugePages, transparentHugePageMode } from "../server/engine/huge-pages.js";
import type { Binding as SlotLoopBinding } from "../server/engine/context-binding.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string", default: "1" },
    rounds: { type: "string", default: "12" },
    "prompt-tokens": { type: "string", default: "460" },
    "flash-attention": { type: "string", default: "on" },
    "engine-build": { type: "boolean", default: false },
    /** The KV cache's memory in transparent huge pages too (the server puts only the weights there). */
    "kv-huge-pages": { type: "boolean", default: false },
    shapes: { type: "string", default: "1;4;1,1,1,1;4,4,4,4;8,8,8,8;16,16,16,16;17,17,17,17;32;64;68;2,1,1,1;17,1,1,1" },
  },
});
if (!values.model) throw new Error("--model PATH.gguf is required (bench:spec writes .cache/spec/echo-Q4_K_M.gguf; bench:peer-matrix the others)");
const shapes = values.shapes.split(";").map((s) => s.split(",").map(Number));
if (shapes.some((s) => s.some((n) => !Number.isInteger(n) || n < 0))) throw new Error(`--shapes: counts of tokens by sequence, "1,1,1,1;68": got ${values.shapes}`);
const sequences = Math.max(...shapes.map((s) => s.length));
const promptTokens = Number(values["prompt-tokens"]);
const longest = Math.max(...shapes.flat());

/** The calls of node-llama-cpp's context binding this bench makes: the slot loop's own. */
type Binding = Pick<SlotLoopBinding, "initBatch" | "addToBatch" | "decodeBatch" | "removeTokenCellsFromSequence">;

let llama: Llama | null = null;
if (values["engine-build"]) {
  llama = await loadEngineBuild({ logLevel: LlamaLogLevel.error });
  if (!llama) throw new Error("--engine-build: this machine has no current `svc engine build` build");
} else {
  llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
}
// The weights as the server holds them on Linux: read into memory, in huge pages where the system has them.
const hugePages = transparentHugePageMode();
const loaded = await intoHugePages(() => llama.loadModel({ modelPath: values.model!, useMmap: hugePages === undefined }), 0, hugePages);
const model = loaded.result;
const createContext = () =>
  model.createContext({
    contextSize: promptTokens + longest + 256,
    sequences,
    threads: Number(values.threads),
    flashAttention: values["flash-attention"] === "on",
    batchSize: 512,
  });
const made = values["kv-huge-pages"] ? await intoHugePages(createContext, 0, hugePages) : { result: await createContext(), hugePageBytes: 0 };
const context = made.result;
const ids = Array.from({ length: sequences }, () => context.getSequence()).map((s) => (s as unknown as { _sequenceId: number })._sequenceId);
const binding = (context as unknown as { _ctx: Binding })._ctx;

// Text long enough for the prompt and the longest part of a shape, whatever the vocabulary.
const words = "Write something new about these notes. alpha beta gamma delta river stone cloud lamp quiet orange seven paper window ";
let text = words;
while (model.tokenize(text).length < promptTokens + longest) text += words;
const tokens = model.tokenize(text);
const prompt = tokens.slice(0, promptTokens);
const added = tokens.slice(promptTokens, promptTokens + longest);
for (const id of ids) {
  for (let at = 0; at < prompt.length; at += 256) {
    const chunk = prompt.slice(at, at + 256);
    binding.initBatch(chunk.length);
    binding.addToBatch(id, at, Uint32Array.from(chunk), Uint32Array.of(chunk.length - 1));
    await binding.decodeBatch();
  }
}

async function decode(shape: number[]): Promise<number> {
  binding.initBatch(shape.reduce((a, n) => a + n, 0));
  shape.forEach((n, i) => {
    if (n > 0) binding.addToBatch(ids[i]!, promptTokens, Uint32Array.from(added.slice(0, n)), Uint32Array.from({ length: n }, (_, j) => j));
  });
  const started = performance.now();
  await binding.decodeBatch();
  const ms = performance.now() - started;
  shape.forEach((n, i) => {
    if (n > 0) binding.removeTokenCellsFromSequence(ids[i]!, promptTokens, promptTokens + n);
  });
  return ms;
}

const times = new Map(shapes.map((s) => [s.join(","), [] as number[]]));
for (const shape of shapes) await decode(shape); // each shape's first decode (cold) left out
for (let round = 0; round < Number(values.rounds); round++) for (const shape of shapes) times.get(shape.join(","))!.push(await decode(shape));

console.log(`${values.model}; threads ${values.threads}; flash attention ${values["flash-attention"]}; ${values["engine-build"] ? "svc engine build" : "prebuilt binaries"}; weights ${loaded.hugePageBytes > 0 ? `${(loaded.hugePageBytes / 2 ** 20).toFixed(0)} MiB in huge pages` : "not in huge pages"}, KV cache ${made.hugePageBytes > 0 ? `${(made.hugePageBytes / 2 ** 20).toFixed(0)} MiB in huge pages` : "not in huge pages"}; ${promptTokens}-token prompt in each of ${sequences} sequences; ${values.rounds} rounds\n`);
console.log("| tokens by sequence | median ms | least ms | median ms a token |\n|---|---|---|---|");
for (const [shape, ms] of times) {
  ms.sort((a, b) => a - b);
  const median = ms[Math.floor(ms.length / 2)]!;
  const count = shape.split(",").reduce((a, n) => a + Number(n), 0);
  console.log(`| ${shape} | ${median.toFixed(1)} | ${ms[0]!.toFixed(1)} | ${(median / count).toFixed(2)} |`);
}
await context.dispose();
await model.dispose();
await llama.dispose();
