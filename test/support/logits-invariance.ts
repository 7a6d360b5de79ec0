// A token's logits on `svc engine build`'s binaries, decoded in steps of every shape the slot loop makes:
// alone (at 1 and at 2 threads), with 16 guesses after it (speculation's verification), beside three other
// sequences' tokens, and beside them with guesses each. Speculation keeps a greedy answer only where these are
// the same to the bit (docs/performance.md sections 47 and 49). Random-weight models (logits far from
// one-hot), heads of 64 and of 128 values, F32, Q8_0, Q4_0, Q4_K, Q6_K and Q2_K layers, 600 tokens of context (past
// the 512 where llama.cpp splits a lone query's keys between threads). Prints what it found as JSON. Run by
// test/engine-build/engine-build.test.ts: node --import tsx test/support/logits-invariance.ts
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LlamaLogLevel } from "node-llama-cpp";
import { ensurePeerModel } from "../../bench/peer-model.js";
import { newSampler, type Binding } from "../../server/engine/context-binding.js";
import { loadEngineBuild } from "../../server/engine/engine-build.js";

/** The binding's sampleToken with its fifth argument: every logit (node-llama-cpp's addon). */
type LogitsBinding = Omit<Binding, "sampleToken"> & {
  sampleToken(index: number, sampler: unknown, probabilities: boolean, confidence: boolean, logits: boolean): Promise<[number, unknown, unknown, number[]]>;
};

const dir = mkdtempSync(join(tmpdir(), "svc-logits-"));
// Native decodes do not keep the event loop alive.
const keepAlive = setInterval(() => undefined, 1000);
const llama = await loadEngineBuild({ logLevel: LlamaLogLevel.error });
if (!llama) {
  console.log(JSON.stringify({ build: "prebuilt" }));
  process.exit(0);
}

const CONTEXT = 600;
const GUESSES = 16;
const tokens = (n: number, seed: number) => Uint32Array.from({ length: n }, (_, i) => 3 + ((i * 7919 + seed * 104729) % 290));

async function shape(nHead: number, blockWeights: "f32" | "q8_0" | "q4_0" | "q4_k" | "q6_k" | "q2_k" = "f32"): Promise<Record<string, boolean>> {
  const modelPath = ensurePeerModel(join(dir, `random-h${nHead}-${blockWeights}.gguf`), { nEmbd: 256, nLayers: 2, nHead, nFf: 256, contextLength: 4096, seed: 31, blockWeights });
  const model = await llama!.loadModel({ modelPath, gpuLayers: 0 });
  const context = await model.createContext({ contextSize: 4 * 1024, sequences: 4, threads: 2 });
  const sequences = [0, 1, 2, 3].map(() => context.getSequence());
  const binding = (context as unknown as { _ctx: LogitsBinding })._ctx;
  const sampler = newSampler(model);
  sampler.applyConfig((sequences[0] as unknown as { _resolveSamplerConfig(o: object): unknown })._resolveSamplerConfig({ temperature: 0 }));
  for (let s = 0; s < 4; s++) {
    const prompt = tokens(CONTEXT, s);
    for (let at = 0; at < CONTEXT; at += 256) {
      const part = prompt.subarray(at, at + 256);
      binding.initBatch(part.length);
      binding.addToBatch(s, at, part, new Uint32Array(0));
      await binding.decodeBatch();
    }
  }
  /** Sequence 0's logits at position CONTEXT, decoded with `width` tokens of each of `count` sequences; the cells taken out again. */
  const logits = async (count: number, width: number, threads: number): Promise<number[]> => {
    binding.initBatch(count * width);
    const at = Array.from({ length: count }, (_, s) => binding.addToBatch(s, CONTEXT, tokens(width, 100 + s), Uint32Array.of(0))[0]!);
    binding.setThreads(threads);
    await binding.decodeBatch();
    const [, , , values] = await binding.sampleToken(at[0]!, sampler, false, false, true);
    for (let s = 0; s < count; s++) binding.removeTokenCellsFromSequence(s, CONTEXT, CONTEXT + width);
    return values;
  };
  const alone = await logits(1, 1, 1);
  const same = (other: number[]) => other.length > 0 && other.length === alone.length && other.every((v, i) => Object.is(v, alone[i]));
  const found = {
    logits: alone.length > 0,
    aloneTwoThreads: same(await logits(1, 1, 2)),
    withGuesses: same(await logits(1, 1 + GUESSES, 2)),
    besideOthers: same(await logits(4, 1, 2)),
    besideOthersWithGuesses: same(await logits(4, 1 + GUESSES, 2)),
  };
  await context.dispose();
  await model.dispose();
  return found;
}

// Quantized layers: Q8_0 goes through llamafile's code (sgemm-few-columns.patch), Q4_0, Q4_K (most of a Q4_K_M
// model's layers) and Q2_K (with AVX-512) through llama.cpp's repacked kernels on x86, a lone token in a gemv,
// four or more in a gemm (repack-gemv-order.patch makes Q4_K's and Q2_K's sums the same); Q6_K (the rest of a
// Q4_K_M model's) through our q6k-cols.h (sgemm-q6k-cols.patch), for any number of tokens.
const result = {
  build: "local",
  heads64: await shape(4),
  heads128: await shape(2),
  heads128Q8_0: await shape(2, "q8_0"),
  heads128Q4_0: await shape(2, "q4_0"),
  heads128Q4K: await shape(2, "q4_k"),
  heads128Q6K: await shape(2, "q6_k"),
  heads128Q2K: await shape(2, "q2_k"),
};
clearInterval(keepAlive);
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify(result));
process.exit(0);
