// How the engine fits the machine: GPU backends to try, threads, memory budget and context sizing.
import { describe, expect, it } from "vitest";
import { agentContextNeed } from "../../server/engine/context-advice.js";
import {
  ALL_CORES_MIN_MODEL_BYTES,
  attentionHeadSizes,
  chooseThreads,
  DEFAULT_MAX_CONTEXT_SIZE,
  estimateContextBytes,
  fitMemoryModel,
  gpuCandidates,
  kvCacheTypesFor,
  linuxGpuDeviceFiles,
  memoryBudget,
  planContext,
  threadCandidates,
  type MemoryModel,
} from "../../server/engine/resource-plan.js";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

describe("linuxGpuDeviceFiles", () => {
  it("a render node, NVIDIA's device files or WSL's /dev/dxg are a GPU's; none of them: no Vulkan or CUDA device can exist", () => {
    expect(linuxGpuDeviceFiles(["null", "zero"], ["card0", "renderD128"])).toBe(true);
    expect(linuxGpuDeviceFiles(["nvidia0", "nvidiactl", "nvidia-uvm"], [])).toBe(true);
    expect(linuxGpuDeviceFiles(["nvidiactl"], [])).toBe(true);
    expect(linuxGpuDeviceFiles(["dxg"], [])).toBe(true);
    // A container or VM without GPUs: /dev/dri absent (listed as nothing), a framebuffer console's card only.
    expect(linuxGpuDeviceFiles(["null", "zero", "tty0", "fb0"], [])).toBe(false);
    expect(linuxGpuDeviceFiles(["null"], ["card0", "by-path"])).toBe(false);
    expect(linuxGpuDeviceFiles(["nvidia-uvm", "nvidia-modeset"], [])).toBe(false);
  });
});

describe("gpuCandidates", () => {
  it("auto tries the detected GPU backends, best first, then the CPU", () => {
    expect(gpuCandidates("auto", ["vulkan", "cuda", false])).toEqual(["cuda", "vulkan", false]);
    expect(gpuCandidates("auto", ["metal", false])).toEqual(["metal", false]);
  });

  it("auto on a machine without a usable GPU goes straight to the CPU", () => {
    expect(gpuCandidates("auto", [false])).toEqual([false]);
    expect(gpuCandidates("auto", [])).toEqual([false]);
  });

  it("a named backend is tried even when detection missed it, with the CPU as fallback", () => {
    expect(gpuCandidates("vulkan", [false])).toEqual(["vulkan", false]);
    expect(gpuCandidates("cuda", ["cuda", "vulkan", false])).toEqual(["cuda", false]);
  });

  it("cpu never touches a GPU", () => {
    expect(gpuCandidates("cpu", ["cuda", "vulkan", false])).toEqual([false]);
  });
});

describe("chooseThreads", () => {
  it("uses one thread on one or two cores (more made generation many times slower there)", () => {
    expect(chooseThreads({ cores: 1 })).toBe(1);
    expect(chooseThreads({ cores: 2 })).toBe(1);
  });

  it("uses both of 2 cores for a model of 32 MiB and up when the decodes run on one libuv pool thread", () => {
    const big = ALL_CORES_MIN_MODEL_BYTES;
    expect(chooseThreads({ cores: 2, modelBytes: big, poolThreads: 1 })).toBe(2);
    expect(chooseThreads({ cores: 2, modelBytes: 4 * GiB, poolThreads: 1 })).toBe(2);
    expect(chooseThreads({ cores: 2, modelBytes: big - 1, poolThreads: 1 })).toBe(1); // toy models: thread waits outweigh the work
    expect(chooseThreads({ cores: 2, modelBytes: 4 * GiB, poolThreads: 4 })).toBe(1); // decodes hopping between pool threads
    expect(chooseThreads({ cores: 2, modelBytes: 4 * GiB })).toBe(1);
    expect(chooseThreads({ cores: 1, modelBytes: 4 * GiB, poolThreads: 1 })).toBe(1);
    expect(chooseThreads({ cores: 8, modelBytes: 4 * GiB, poolThreads: 1 })).toBe(4);
  });

  it("uses half the logical cores (no hyper-threads), leaving cores free, at most 8", () => {
    expect(chooseThreads({ cores: 4 })).toBe(2);
    expect(chooseThreads({ cores: 6 })).toBe(3);
    expect(chooseThreads({ cores: 8 })).toBe(4);
    expect(chooseThreads({ cores: 16 })).toBe(8);
    expect(chooseThreads({ cores: 64 })).toBe(8);
  });

  it("caps at 4 when every layer runs on the GPU; partial offload keeps the CPU count", () => {
    expect(chooseThreads({ cores: 16, offload: "full" })).toBe(4);
    expect(chooseThreads({ cores: 4, offload: "full" })).toBe(2);
    expect(chooseThreads({ cores: 16, offload: "partial" })).toBe(8);
  });

  it("survives nonsense core counts", () => {
    expect(chooseThreads({ cores: 0 })).toBe(1);
    expect(chooseThreads({ cores: Number.NaN })).toBe(1);
  });
});

describe("threadCandidates", () => {
  it("measures powers of two below the core count, and the core count", () => {
    expect(threadCandidates(1)).toEqual([1]);
    expect(threadCandidates(2)).toEqual([1, 2]);
    expect(threadCandidates(6)).toEqual([1, 2, 4, 6]);
    expect(threadCandidates(16)).toEqual([1, 2, 4, 8, 16]);
  });
});

describe("fitMemoryModel", () => {
  it("recovers the KV cache and scratch costs from three estimates and predicts others", () => {
    // node-llama-cpp's estimates for the tiny test model on the CPU (bytes).
    const memory = fitMemoryModel({ c1: 2048, c2: 4096, c1s1: 9_975_808, c2s1: 15_218_688, c2s2: 21_510_144 });
    expect(memory.bytesPerSequenceToken).toBe(1536); // 2 (K and V) x 384 dims x 2 bytes (f16) x 1 layer
    expect(memory.bytesPerContextToken).toBe(1024);
    // The library's own estimate for 2 x 16384 tokens was 71,841,792 bytes.
    expect(estimateContextBytes(memory, 16384, 2)).toBe(71_841_792);
  });

  it("clamps negative terms from rounding to zero and rejects a bad sample layout", () => {
    const memory = fitMemoryModel({ c1: 1024, c2: 2048, c1s1: 100, c2s1: 90, c2s2: 80 });
    expect(memory.bytesPerSequenceToken).toBe(0);
    expect(memory.bytesPerContextToken).toBe(0);
    expect(memory.fixedBytes).toBe(100);
    expect(() => fitMemoryModel({ c1: 2048, c2: 1024, c1s1: 1, c2s1: 1, c2s2: 1 })).toThrow();
  });
});

describe("memoryBudget", () => {
  it("on a GPU: free VRAM less 5% (at least 256 MiB)", () => {
    const budget = memoryBudget({ onGpu: true, vramFreeBytes: 6 * GiB, vramTotalBytes: 8 * GiB, ramFreeBytes: 0, ramTotalBytes: 0, mappedModelBytes: 0 });
    expect(budget).toBe(6 * GiB - 0.05 * 8 * GiB);
    expect(memoryBudget({ onGpu: true, vramFreeBytes: 1 * GiB, vramTotalBytes: 2 * GiB, ramFreeBytes: 0, ramTotalBytes: 0, mappedModelBytes: 0 })).toBe(
      1 * GiB - 256 * MiB,
    );
  });

  it("on the CPU: free RAM less 10% (at least 1 GiB) less the memory-mapped model", () => {
    const budget = memoryBudget({
      onGpu: false,
      vramFreeBytes: 0,
      vramTotalBytes: 0,
      ramFreeBytes: 10 * GiB,
      ramTotalBytes: 16 * GiB,
      mappedModelBytes: 2.5e9,
    });
    expect(budget).toBe(10 * GiB - 1.6 * GiB - 2.5e9);
  });

  it("is never negative", () => {
    expect(memoryBudget({ onGpu: false, vramFreeBytes: 0, vramTotalBytes: 0, ramFreeBytes: GiB, ramTotalBytes: 4 * GiB, mappedModelBytes: 3 * GiB })).toBe(0);
  });
});

describe("planContext", () => {
  // Qwen3 4B in f16 KV: 36 layers x 8 KV heads x 128 dims x 2 (K, V) x 2 bytes = 147,456 bytes per token.
  const qwen4b: MemoryModel = { fixedBytes: 300 * MiB, bytesPerContextToken: 2048, bytesPerSequenceToken: 147_456 };
  // The same with a q8_0 KV cache: about half.
  const qwen4bQ8: MemoryModel = { fixedBytes: 300 * MiB, bytesPerContextToken: 2048, bytesPerSequenceToken: 78_336 };
  const tiny: MemoryModel = { fixedBytes: 4_732_928, bytesPerContextToken: 1024, bytesPerSequenceToken: 1536 };
  // What Claude Code's first request needs with Qwen's tokenizer (about 0.27 tokens per character).
  const agents = agentContextNeed(0.27).contextSize;

  it("with room to spare: the model's full training length, as many sequences as allowed", () => {
    const plan = planContext({ budgetBytes: 20 * GiB, memory: tiny, trainContextSize: 65536 });
    expect(plan).toMatchObject({ contextSize: 65536, sequences: 2, kvCache: "f16", fits: true, auto: { contextSize: true, sequences: true } });
    expect(planContext({ budgetBytes: 60 * GiB, memory: qwen4b, trainContextSize: 40960, limits: { maxSequences: 4 } })).toMatchObject({
      contextSize: 40960,
      sequences: 4,
    });
  });

  it("caps the automatic context at 128k tokens, whatever the model was trained on", () => {
    expect(planContext({ budgetBytes: 200 * GiB, memory: tiny, trainContextSize: 1_048_576 }).contextSize).toBe(DEFAULT_MAX_CONTEXT_SIZE);
    expect(DEFAULT_MAX_CONTEXT_SIZE).toBe(131072);
  });

  it("an 8 GB laptop: two sequences with the largest context that fits, still enough for coding agents", () => {
    const plan = planContext({ budgetBytes: 8 * GiB, memory: qwen4b, trainContextSize: 40960, limits: { agentContextSize: agents } });
    expect(plan.sequences).toBe(2);
    expect(plan.contextSize % 256).toBe(0);
    expect(plan.contextSize).toBeGreaterThanOrEqual(agents);
    expect(plan.contextSize).toBeLessThan(40960);
    expect(plan.fits).toBe(true);
    // The next step up would not fit.
    expect(estimateContextBytes(qwen4b, plan.contextSize + 256, 2)).toBeGreaterThan(8 * GiB);
  });

  it("fewer sequences before a context too short for coding agents", () => {
    // Two sequences of the agents' size do not fit; one does.
    const budget = estimateContextBytes(qwen4b, agents, 1) + 64 * MiB;
    expect(estimateContextBytes(qwen4b, agents, 2)).toBeGreaterThan(budget);
    const plan = planContext({ budgetBytes: budget, memory: qwen4b, quantizedMemory: qwen4bQ8, trainContextSize: 40960, limits: { agentContextSize: agents } });
    expect(plan).toMatchObject({ sequences: 1, kvCache: "f16", fits: true });
    expect(plan.contextSize).toBeGreaterThanOrEqual(agents);
  });

  it("then an 8-bit KV cache, before a context too short for coding agents", () => {
    const budget = estimateContextBytes(qwen4bQ8, agents, 1) + 16 * MiB;
    expect(estimateContextBytes(qwen4b, agents, 1)).toBeGreaterThan(budget);
    const plan = planContext({ budgetBytes: budget, memory: qwen4b, quantizedMemory: qwen4bQ8, trainContextSize: 40960, limits: { agentContextSize: agents } });
    expect(plan).toMatchObject({ sequences: 1, kvCache: "q8_0", fits: true });
    expect(plan.contextSize).toBeGreaterThanOrEqual(agents);
    // Without a quantized memory model the KV cache stays f16, and the context falls short.
    const f16 = planContext({ budgetBytes: budget, memory: qwen4b, trainContextSize: 40960, limits: { agentContextSize: agents } });
    expect(f16).toMatchObject({ sequences: 1, kvCache: "f16", fits: true });
    expect(f16.contextSize).toBeLessThan(agents);
  });

  it("below what agents need only when nothing else fits: the longest single context there is room for", () => {
    const plan = planContext({ budgetBytes: 1 * GiB, memory: qwen4b, quantizedMemory: qwen4bQ8, trainContextSize: 40960, limits: { agentContextSize: agents } });
    expect(plan).toMatchObject({ sequences: 1, kvCache: "q8_0", fits: true });
    expect(plan.contextSize).toBeLessThan(agents);
    expect(plan.contextSize).toBeGreaterThan(4096);
  });

  it("tighter still, without an agents' floor: one longer sequence rather than two below 4096 tokens", () => {
    const plan = planContext({ budgetBytes: 1 * GiB, memory: qwen4b, trainContextSize: 40960 });
    expect(plan.sequences).toBe(1);
    expect(plan.contextSize).toBeGreaterThan(4096);
    expect(plan.fits).toBe(true);
  });

  it("when nothing fits: the smallest context, one sequence, reported as not fitting", () => {
    const plan = planContext({ budgetBytes: 100 * MiB, memory: qwen4b, trainContextSize: 40960 });
    expect(plan).toMatchObject({ contextSize: 512, sequences: 1, fits: false });
  });

  it("with one sequence allowed, shrinks that sequence's context rather than failing", () => {
    const plan = planContext({ budgetBytes: 1 * GiB, memory: qwen4b, trainContextSize: 40960, limits: { maxSequences: 1 } });
    expect(plan.sequences).toBe(1);
    expect(plan.contextSize).toBeLessThan(16384);
    expect(plan.fits).toBe(true);
    expect(planContext({ budgetBytes: 20 * GiB, memory: qwen4b, trainContextSize: 40960, limits: { maxSequences: 1 } })).toMatchObject({
      contextSize: 40960,
      sequences: 1,
    });
  });

  it("never exceeds the model's training context or the cap", () => {
    expect(planContext({ budgetBytes: 20 * GiB, memory: tiny, trainContextSize: 4096 }).contextSize).toBe(4096);
    expect(planContext({ budgetBytes: 20 * GiB, memory: tiny, trainContextSize: 32768, limits: { maxContextSize: 8192 } }).contextSize).toBe(8192);
    // A model that does not say how long it was trained: the cap.
    expect(planContext({ budgetBytes: 20 * GiB, memory: tiny, trainContextSize: 0 }).contextSize).toBe(DEFAULT_MAX_CONTEXT_SIZE);
    // Not even for agents: a model trained shorter than they need keeps its training length (and a note says so).
    expect(planContext({ budgetBytes: 20 * GiB, memory: tiny, trainContextSize: 32768, limits: { agentContextSize: agentContextNeed(0.98).contextSize } }).contextSize).toBe(32768);
  });

  it("keeps a given context size and picks the sequences that fit around it, then an 8-bit KV cache", () => {
    expect(planContext({ budgetBytes: 3 * GiB, memory: qwen4b, trainContextSize: 40960, contextSize: 8192 })).toMatchObject({
      contextSize: 8192,
      sequences: 2,
      kvCache: "f16",
      auto: { contextSize: false, sequences: true },
    });
    expect(planContext({ budgetBytes: 1.5 * GiB, memory: qwen4b, trainContextSize: 40960, contextSize: 8192 }).sequences).toBe(1);
    const budget = estimateContextBytes(qwen4bQ8, 32768, 1) + MiB;
    expect(planContext({ budgetBytes: budget, memory: qwen4b, quantizedMemory: qwen4bQ8, trainContextSize: 40960, contextSize: 32768 })).toMatchObject({
      contextSize: 32768,
      sequences: 1,
      kvCache: "q8_0",
      fits: true,
    });
  });

  it("keeps given sequences and sizes the context around them", () => {
    const plan = planContext({ budgetBytes: 3 * GiB, memory: qwen4b, trainContextSize: 40960, sequences: 4 });
    expect(plan.sequences).toBe(4);
    expect(estimateContextBytes(qwen4b, plan.contextSize, 4)).toBeLessThanOrEqual(3 * GiB);
    expect(plan.auto).toEqual({ contextSize: true, sequences: false });
  });

  it("takes both values as given, saying when they do not fit", () => {
    expect(planContext({ budgetBytes: 1 * GiB, memory: qwen4b, trainContextSize: 40960, contextSize: 32768, sequences: 4 })).toMatchObject({
      contextSize: 32768,
      sequences: 4,
      fits: false,
    });
  });
});

describe("the KV cache types a model can take", () => {
  it("reads the head sizes as llama.cpp does: key_length / value_length, else the embedding over the heads", () => {
    expect(attentionHeadSizes({ embedding_length: 384, attention: { head_count: 24 } })).toEqual({ key: [16], value: [16] });
    expect(attentionHeadSizes({ embedding_length: 2560, attention: { head_count: 32, key_length: 128, value_length: 128 } })).toEqual({ key: [128], value: [128] });
    // Per-layer head counts: the first layer's, as llama.cpp's n_head().
    expect(attentionHeadSizes({ embedding_length: 1024, attention: { head_count: [8, 16] } })).toEqual({ key: [128], value: [128] });
    // Sliding-window layers with heads of their own.
    expect(attentionHeadSizes({ embedding_length: 2048, attention: { head_count: 8, key_length: 256, value_length: 256, key_length_swa: 48 } })).toEqual({
      key: [256, 48],
      value: [256],
    });
    expect(attentionHeadSizes({ embedding_length: 384 })).toBeNull();
    expect(attentionHeadSizes(undefined)).toBeNull();
    expect(attentionHeadSizes({ embedding_length: 100, attention: { head_count: 3 } })).toBeNull();
  });

  it("q8_0 only where its 32-value blocks divide every K and V head; f16 always", () => {
    expect(kvCacheTypesFor({ key: [128], value: [128] })).toEqual(["f16", "q8_0"]);
    expect(kvCacheTypesFor({ key: [64], value: [64] })).toEqual(["f16", "q8_0"]);
    expect(kvCacheTypesFor({ key: [16], value: [16] })).toEqual(["f16"]);
    expect(kvCacheTypesFor({ key: [96], value: [80] })).toEqual(["f16"]);
    expect(kvCacheTypesFor({ key: [256, 48], value: [256] })).toEqual(["f16"]);
    expect(kvCacheTypesFor(null)).toEqual(["f16"]);
  });
});
