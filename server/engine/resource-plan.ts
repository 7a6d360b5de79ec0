// How the engine fits the machine: which GPU backends to try, how many CPU threads to use, and how large a
// context (and how many parallel sequences) the free memory holds. Pure functions over measured inputs, so
// the choices can be tested without a GPU; llama-engine.ts feeds them what node-llama-cpp reports.

export type GpuPreference = "auto" | "cuda" | "vulkan" | "metal" | "cpu";
/** A backend node-llama-cpp can load; false is the CPU. */
export type GpuBackend = "cuda" | "vulkan" | "metal" | false;

/** Best first: Metal only exists on macOS, and where both exist CUDA is faster than Vulkan on NVIDIA cards. */
const GPU_ORDER: Array<Exclude<GpuBackend, false>> = ["metal", "cuda", "vulkan"];

/**
 * The backends to try, in order, ending with the CPU. `supported` is what the library detected on this
 * machine (its prebuilt binaries and the drivers it found). An explicitly named backend is tried even when
 * detection missed it; the CPU is always the last resort, so a broken GPU driver never stops the server.
 */
export function gpuCandidates(preference: GpuPreference, supported: readonly GpuBackend[]): GpuBackend[] {
  if (preference === "cpu") return [false];
  if (preference !== "auto") return [preference, false];
  return [...GPU_ORDER.filter((gpu) => supported.includes(gpu)), false];
}

/** Why a Vulkan or CUDA backend is passed over on Linux without loading it (linuxGpuDeviceFiles). */
export const NO_GPU_DEVICE_FILE = "no GPU device file (/dev/dri/renderD*, /dev/nvidia*, /dev/dxg)";

/**
 * Linux: whether a GPU's device file is there, from the names in /dev and /dev/dri: a DRM render node (Mesa's,
 * AMD's and Intel's Vulkan drivers open one), NVIDIA's device files (its CUDA and Vulkan drivers), WSL's
 * /dev/dxg. Without one no Vulkan or CUDA device can exist, and trying the backend costs over a second of
 * every engine start (node-llama-cpp tests its prebuilt binary in a process of its own, then loads it).
 */
export function linuxGpuDeviceFiles(dev: readonly string[], dri: readonly string[]): boolean {
  return dri.some((f) => /^renderD\d+$/.test(f)) || dev.some((f) => /^nvidia(\d+|ctl)$/.test(f) || f === "dxg");
}

/** Thread counts worth measuring: 1, 2, 4, ... below the logical cores, and the cores themselves. */
export function threadCandidates(cores: number): number[] {
  const top = Number.isFinite(cores) ? Math.max(1, Math.floor(cores)) : 1;
  const out: number[] = [];
  for (let n = 1; n < top; n *= 2) out.push(n);
  out.push(top);
  return out;
}

export type Offload = "none" | "partial" | "full";

/** Models at least this big get both cores of a 2-core machine (when the decodes run on one pool thread). */
export const ALL_CORES_MIN_MODEL_BYTES = 32 * 1024 * 1024;

/**
 * CPU threads for generation. On a 2-core machine, 4 threads (the library's default) made generation 130 to
 * 400 times slower than 1, because busy-waiting threads fight over the cores. 2 threads are faster than 1
 * when `svc` decodes on one libuv pool thread (`poolThreads` 1) and the model is not a toy: a lone answer
 * 1.4 times as fast, 4 answers 1.6 times, prompts twice as fast with the 110 MB model of
 * docs/performance.md; from 14 MB up generation was no slower and prompts twice as fast, while the 3.6 MB
 * test model generated 1.8 times slower with 2. With another process busy on a core the engine caps each
 * decode at the cores left (thread-policy.ts), so 2 threads then run as 1 would. Without one pool thread
 * (the desktop app), a lone answer's steps would use 1 thread anyway, and 1 and 2 cores get 1 thread.
 * Above 2 cores a core is always left free, and hyper-threads are not counted (half the logical cores).
 * With every layer on the GPU the CPU only schedules work, and more than 4 threads buy nothing.
 */
export function chooseThreads(input: { cores: number; offload?: Offload; modelBytes?: number; poolThreads?: number }): number {
  const cores = Number.isFinite(input.cores) ? Math.max(1, Math.floor(input.cores)) : 1;
  const bothCores = cores === 2 && input.poolThreads === 1 && (input.modelBytes ?? 0) >= ALL_CORES_MIN_MODEL_BYTES;
  const cpu = cores <= 2 ? (bothCores ? 2 : 1) : Math.max(1, Math.min(8, Math.floor(cores / 2)));
  return input.offload === "full" ? Math.min(cpu, 4) : cpu;
}

/**
 * Memory a context needs, linear in its shape: fixed buffers, per-token scratch that grows with the context
 * size, and the KV cache, which grows with context size times sequences.
 */
export interface MemoryModel {
  fixedBytes: number;
  bytesPerContextToken: number;
  bytesPerSequenceToken: number;
}

export function estimateContextBytes(memory: MemoryModel, contextSize: number, sequences: number): number {
  return memory.fixedBytes + memory.bytesPerContextToken * contextSize + memory.bytesPerSequenceToken * contextSize * sequences;
}

/**
 * Fits the memory model to three estimates taken at (c1, 1), (c2, 1) and (c2, 2) sequences, c1 < c2.
 * Negative terms (rounding in the estimates) are clamped to zero.
 */
export function fitMemoryModel(samples: { c1: number; c2: number; c1s1: number; c2s1: number; c2s2: number }): MemoryModel {
  const { c1, c2, c1s1, c2s1, c2s2 } = samples;
  if (!(c2 > c1 && c1 > 0)) throw new Error("fitMemoryModel needs 0 < c1 < c2");
  const bytesPerSequenceToken = Math.max(0, (c2s2 - c2s1) / c2);
  const slope = (c2s1 - c1s1) / (c2 - c1);
  const bytesPerContextToken = Math.max(0, slope - bytesPerSequenceToken);
  const fixedBytes = Math.max(0, c1s1 - (bytesPerContextToken + bytesPerSequenceToken) * c1);
  return { fixedBytes, bytesPerContextToken, bytesPerSequenceToken };
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/**
 * Bytes the context may take. On a GPU: free VRAM after the model loaded, less a margin for the driver and
 * other programs. On the CPU: free RAM less a larger margin (the desktop and browser live there too), and
 * less the model file itself, whose memory-mapped pages still count as free until they are read.
 */
export function memoryBudget(input: {
  onGpu: boolean;
  vramFreeBytes: number;
  vramTotalBytes: number;
  ramFreeBytes: number;
  ramTotalBytes: number;
  /** Model bytes on the CPU that are mapped but may not be resident yet. */
  mappedModelBytes: number;
}): number {
  if (input.onGpu) {
    const reserve = Math.max(256 * MiB, input.vramTotalBytes * 0.05);
    return Math.max(0, input.vramFreeBytes - reserve);
  }
  const reserve = Math.max(1 * GiB, input.ramTotalBytes * 0.1);
  return Math.max(0, input.ramFreeBytes - reserve - input.mappedModelBytes);
}

export interface ContextPlanLimits {
  /** Largest context per sequence chosen automatically. */
  maxContextSize: number;
  /** Smallest context worth running. */
  minContextSize: number;
  /** Most sequences chosen automatically. */
  maxSequences: number;
  /**
   * The context a coding agent's first request needs with this model (tokens; 0: none). Contexts are not
   * shortened below it (nor below preferTwoSequencesDownTo) while fewer sequences or a quantized KV cache
   * still reach it.
   */
  agentContextSize: number;
  /** Below this context size, two sequences give way to one longer one. */
  preferTwoSequencesDownTo: number;
  /** Context sizes are rounded down to a multiple of this. */
  step: number;
}

/**
 * No cap below the model's training length up to 128k tokens: coding agents send 10k to 50k tokens before the
 * user's first word, and memory, not a fixed cap, is what should bound the context.
 */
export const DEFAULT_MAX_CONTEXT_SIZE = 131072;

export const DEFAULT_PLAN_LIMITS: ContextPlanLimits = {
  maxContextSize: DEFAULT_MAX_CONTEXT_SIZE,
  minContextSize: 512,
  maxSequences: 2,
  agentContextSize: 0,
  preferTwoSequencesDownTo: 4096,
  step: 256,
};

/** On a GPU parallel sequences raise throughput; on a CPU they only share the same cores. */
export function defaultMaxSequences(onGpu: boolean): number {
  return onGpu ? 4 : 2;
}

/** f16 is llama.cpp's default; q8_0 (with flash attention) halves the KV cache at a small cost in quality. */
export type KvCacheType = "f16" | "q8_0";

/** Values per block of each KV cache type: llama.cpp refuses a quantized cache whose block does not divide a head. */
const KV_BLOCK_SIZE: Record<KvCacheType, number> = { f16: 1, q8_0: 32 };

/** The attention metadata of a GGUF model's architecture (`<arch>.embedding_length`, `<arch>.attention.*`). */
export interface AttentionMetadata {
  embedding_length?: number;
  attention?: {
    head_count?: number | readonly number[];
    key_length?: number;
    value_length?: number;
    key_length_swa?: number;
    value_length_swa?: number;
  };
}

/**
 * The sizes of the model's K and V heads, read as llama.cpp reads them: key_length / value_length, else the
 * embedding length over the (first layer's) head count; the sliding-window layers' own sizes where the model
 * has them. Null when the metadata does not say.
 */
export function attentionHeadSizes(metadata: AttentionMetadata | undefined): { key: number[]; value: number[] } | null {
  const attention = metadata?.attention;
  const heads = Array.isArray(attention?.head_count) ? attention.head_count[0] : attention?.head_count;
  const derived = heads && metadata?.embedding_length ? metadata.embedding_length / heads : undefined;
  const key = attention?.key_length ?? derived;
  const value = attention?.value_length ?? derived;
  if (!key || !value || !Number.isInteger(key) || !Number.isInteger(value)) return null;
  return {
    key: [...new Set([key, attention?.key_length_swa ?? key])],
    value: [...new Set([value, attention?.value_length_swa ?? value])],
  };
}

/**
 * The KV cache types this model can take, f16 first: q8_0 only where its 32-value blocks divide every K and V
 * head (a 16-wide head would make llama.cpp log an error and refuse the context). Unknown heads: f16 only.
 */
export function kvCacheTypesFor(heads: { key: readonly number[]; value: readonly number[] } | null): KvCacheType[] {
  const fits = (kv: KvCacheType) => heads !== null && [...heads.key, ...heads.value].every((size) => size % KV_BLOCK_SIZE[kv] === 0);
  return ["f16", ...(fits("q8_0") ? (["q8_0"] as const) : [])];
}

export interface ContextPlan {
  contextSize: number;
  sequences: number;
  kvCache: KvCacheType;
  estimatedBytes: number;
  /** False when even the smallest context does not fit the budget (the load may then fail). */
  fits: boolean;
  /** Which inputs were chosen here rather than given. */
  auto: { contextSize: boolean; sequences: boolean };
}

/**
 * Sizes the context to the budget. Given values are kept as they are. Otherwise, in order, the first that
 * fits: the full context (the cap or the model's training length, whichever is smaller) with as many
 * sequences as fit; two sequences with the largest context that fits, down to the floor (what a coding
 * agent needs, at least preferTwoSequencesDownTo); one sequence down to the floor; the same with a q8_0
 * KV cache (when its memory model is given); and last one sequence with the largest context that fits.
 */
export function planContext(input: {
  budgetBytes: number;
  memory: MemoryModel;
  /** The memory model with a q8_0 KV cache; without it the KV cache stays f16. */
  quantizedMemory?: MemoryModel;
  trainContextSize: number;
  contextSize?: number;
  sequences?: number;
  limits?: Partial<ContextPlanLimits>;
}): ContextPlan {
  const limits = { ...DEFAULT_PLAN_LIMITS, ...input.limits };
  const memoryOf = (kv: KvCacheType) => (kv === "q8_0" && input.quantizedMemory ? input.quantizedMemory : input.memory);
  const cost = (c: number, s: number, kv: KvCacheType) => estimateContextBytes(memoryOf(kv), c, s);
  const fits = (c: number, s: number, kv: KvCacheType = "f16") => cost(c, s, kv) <= input.budgetBytes;
  const kvTypes: KvCacheType[] = input.quantizedMemory ? ["f16", "q8_0"] : ["f16"];
  const auto = { contextSize: input.contextSize === undefined, sequences: input.sequences === undefined };
  const result = (contextSize: number, sequences: number, kvCache: KvCacheType = "f16"): ContextPlan => ({
    contextSize,
    sequences,
    kvCache,
    estimatedBytes: Math.round(cost(contextSize, sequences, kvCache)),
    fits: fits(contextSize, sequences, kvCache),
    auto,
  });
  const train = input.trainContextSize > 0 ? input.trainContextSize : limits.maxContextSize;
  const ceiling = Math.max(limits.minContextSize, Math.min(limits.maxContextSize, train));
  const floor = Math.min(ceiling, Math.max(limits.preferTwoSequencesDownTo, limits.agentContextSize));
  /** Largest context ≤ ceiling (a multiple of step) that fits with s sequences, or null below `atLeast`. */
  const largestContext = (s: number, atLeast: number, kv: KvCacheType = "f16"): number | null => {
    const memory = memoryOf(kv);
    const perToken = memory.bytesPerContextToken + memory.bytesPerSequenceToken * s;
    const room = input.budgetBytes - memory.fixedBytes;
    if (room <= 0) return null;
    const raw = perToken > 0 ? Math.floor(room / perToken) : ceiling;
    const c = Math.min(ceiling, Math.floor(raw / limits.step) * limits.step);
    return c >= atLeast ? c : null;
  };

  if (input.contextSize !== undefined && input.sequences !== undefined) {
    const kv = kvTypes.find((k) => fits(input.contextSize!, input.sequences!, k)) ?? "f16";
    return result(input.contextSize, input.sequences, kv);
  }
  if (input.contextSize !== undefined) {
    const c = input.contextSize;
    for (let s = limits.maxSequences; s > 1; s--) if (fits(c, s)) return result(c, s);
    return result(c, 1, kvTypes.find((k) => fits(c, 1, k)) ?? "f16");
  }
  if (input.sequences !== undefined) {
    const s = input.sequences;
    for (const kv of kvTypes) {
      const c = largestContext(s, floor, kv);
      if (c !== null) return result(c, s, kv);
    }
    const best = kvTypes.at(-1)!;
    return result(largestContext(s, limits.minContextSize, best) ?? limits.minContextSize, s, best);
  }
  for (let s = limits.maxSequences; s >= Math.min(2, limits.maxSequences); s--) if (fits(ceiling, s)) return result(ceiling, s);
  if (limits.maxSequences >= 2) {
    const c = largestContext(2, floor);
    if (c !== null) return result(c, 2);
  }
  for (const kv of kvTypes) {
    const c = largestContext(1, floor, kv);
    if (c !== null) return result(c, 1, kv);
  }
  // Below the floor: the longest single context there is room for (a quantized KV cache holds the most).
  const best = kvTypes.at(-1)!;
  return result(largestContext(1, limits.minContextSize, best) ?? limits.minContextSize, 1, best);
}
