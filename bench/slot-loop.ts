// The slot loop (server/engine/slot-loop.ts) against node-llama-cpp's own evaluate, called directly on the
// same context, in one process, alternated: 4 sequences generating at once with plain text, with a JSON
// grammar, and with token probabilities (the phases that went through node-llama-cpp's evaluate before the
// loop took them), and a long prompt arriving while 3 others generate (their longest wait for a token, and
// the prompt's time to its first token). Prints tokens/s and ratios (ours ÷ evaluate); claim the worst row.
//
//   npm run bench:slot-loop -- [--threads 1] [--rounds 3] [--tokens 96] [--model .cache/peer/model.gguf]
import { join } from "node:path";
import { parseArgs } from "node:util";
import { getLlama, LlamaGrammarEvaluationState, LlamaLogLevel, type LlamaContextSequence, type SequenceEvaluateOptions, type Token } from "node-llama-cpp";
import { SlotLoop } from "../server/engine/slot-loop.js";
import type { SampledToken, TokenMetadata } from "../server/engine/token-probabilities.js";
import { ensurePeerModel } from "./peer-model.js";

const { values } = parseArgs({
  options: {
    threads: { type: "string", default: "1" },
    rounds: { type: "string", default: "3" },
    tokens: { type: "string", default: "96" },
    model: { type: "string" },
  },
});
const threads = Number(values.threads);
const rounds = Number(values.rounds);
const tokens = Number(values.tokens);
const modelPath = values.model ?? ensurePeerModel(join(process.cwd(), ".cache", "peer", "model.gguf"));

const llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ contextSize: 4096, sequences: 4, threads });
const loop = new SlotLoop(context, model);
const grammar = await llama.createGrammarForJsonSchema({ type: "object", properties: { note: { type: "string" } }, required: ["note"] });
const sequences = [context.getSequence(), context.getSequence(), context.getSequence(), context.getSequence()];
const prompt = (text: string) => model.tokenize(`<|im_start|>user\n${text}<|im_end|>\n<|im_start|>assistant\n`, true);

type Evaluate = (sequence: LlamaContextSequence, feed: Token[], metadata: TokenMetadata, options: SequenceEvaluateOptions) => AsyncIterable<SampledToken>;
const ours: Evaluate = (s, feed, metadata, options) => loop.evaluate(s, feed, metadata, options);
const theirs: Evaluate = (s, feed, metadata, options) => s.evaluateWithMetadata(feed, metadata, options) as AsyncIterable<SampledToken>;

/** Up to n tokens (fewer when the model ends its turn); the gaps between them, in ms. */
async function stream(evaluate: Evaluate, s: LlamaContextSequence, feed: Token[], n: number, metadata: TokenMetadata, options: SequenceEvaluateOptions) {
  const gaps: number[] = [];
  let last = performance.now();
  let count = 0;
  const start = last;
  let first = 0;
  for await (const t of evaluate(s, feed, metadata, options)) {
    const now = performance.now();
    if (count === 0) first = now - start;
    else gaps.push(now - last);
    last = now;
    if (model.isEogToken(t.token) || ++count === n) break;
  }
  return { count, gaps, first };
}

async function clear(): Promise<void> {
  for (const s of sequences) await s.clearHistory();
}

const greedy = (): SequenceEvaluateOptions => ({ temperature: 0, yieldEogToken: true });
const workloads: Record<string, () => { metadata: TokenMetadata; options: SequenceEvaluateOptions }> = {
  "4 streams, plain text": () => ({ metadata: {}, options: greedy() }),
  "4 streams, JSON grammar": () => ({ metadata: {}, options: { ...greedy(), grammarEvaluationState: new LlamaGrammarEvaluationState({ model, grammar }) } }),
  "4 streams, token probabilities": () => ({ metadata: { probabilities: true, confidence: true }, options: greedy() }),
};

async function together(evaluate: Evaluate, make: () => { metadata: TokenMetadata; options: SequenceEvaluateOptions }): Promise<number> {
  await clear();
  const start = performance.now();
  const results = await Promise.all(
    sequences.map((s, i) => {
      const { metadata, options } = make();
      return stream(evaluate, s, prompt(`stream ${i} of four, tell me a story`), tokens, metadata, options);
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  return results.reduce((n, r) => n + r.count, 0) / seconds;
}

/**
 * 3 streams generating; a prompt of ~2700 tokens arrives after their 10th token. The others' worst wait for a
 * token while the prompt is read (every gap that overlaps the read, the one that ends after it included), and
 * the prompt's time to its first token.
 */
async function promptArrives(evaluate: Evaluate): Promise<{ worstGapMs: number; promptFirstMs: number }> {
  await clear();
  const long = prompt(Array.from({ length: 700 }, (_, i) => `w${i % 97}`).join(" "));
  let arrival: Promise<{ first: number }> | undefined;
  let arrivedAt = Number.POSITIVE_INFINITY;
  let doneAt = Number.POSITIVE_INFINITY;
  const gaps: Array<[number, number]> = [];
  const runs = sequences.slice(0, 3).map(async (s, i) => {
    let last = performance.now();
    let count = 0;
    for await (const t of evaluate(s, prompt(`stream ${i}`), {}, greedy())) {
      const now = performance.now();
      gaps.push([last, now]);
      last = now;
      if (++count === 10 && i === 0) {
        arrivedAt = now;
        arrival = stream(evaluate, sequences[3]!, long, 1, {}, greedy()).then((r) => ((doneAt = performance.now()), r));
      }
      if (model.isEogToken(t.token) || (doneAt < now && count >= 20) || count >= 4000) break;
    }
  });
  await Promise.all(runs);
  const r = await arrival!;
  const during = gaps.filter(([from, to]) => to > arrivedAt && from < doneAt).map(([from, to]) => to - Math.max(from, arrivedAt));
  return { worstGapMs: Math.max(0, ...during), promptFirstMs: r.first };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows: Array<{ name: string; ours: number[]; theirs: number[]; unit: string; higherIsBetter: boolean }> = [];
for (const name of Object.keys(workloads)) rows.push({ name, ours: [], theirs: [], unit: "tokens/s", higherIsBetter: true });
rows.push({ name: "prompt arrives: others' worst token gap", ours: [], theirs: [], unit: "ms", higherIsBetter: false });
rows.push({ name: "prompt arrives: its first token", ours: [], theirs: [], unit: "ms", higherIsBetter: false });

console.log(`${loop.describe()}; model ${modelPath}, threads ${threads}, ${tokens} tokens a stream, ${rounds} alternated rounds`);
for (let round = 0; round < rounds; round++) {
  for (const [who, evaluate] of (round % 2 === 0 ? [["ours", ours], ["theirs", theirs]] : [["theirs", theirs], ["ours", ours]]) as Array<["ours" | "theirs", Evaluate]>) {
    let i = 0;
    for (const make of Object.values(workloads)) rows[i++]![who].push(await together(evaluate, make));
    const p = await promptArrives(evaluate);
    rows[i++]![who].push(p.worstGapMs);
    rows[i]![who].push(p.promptFirstMs);
  }
}
console.log("| Workload | slot loop | node-llama-cpp's evaluate | ratio (better > 1) | spread of ratios |");
console.log("|---|---|---|---|---|");
for (const row of rows) {
  const ratios = row.ours.map((o, i) => (row.higherIsBetter ? o / row.theirs[i]! : row.theirs[i]! / o));
  console.log(
    `| ${row.name} | ${median(row.ours).toFixed(1)} ${row.unit} | ${median(row.theirs).toFixed(1)} ${row.unit} | ${median(ratios).toFixed(2)} | ${Math.min(...ratios).toFixed(2)} to ${Math.max(...ratios).toFixed(2)} |`,
  );
}
for (const s of sequences) s.dispose();
await context.dispose();
await model.dispose();
