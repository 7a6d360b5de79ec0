// How a model fits this machine when it loads (LlamaEngine.load's plan, kept apart from the engine): the
// memory its context may take once its weights (and a draft model's) are in, sized from node-llama-cpp's
// estimates (resource-plan.ts does the arithmetic), and how many tokens a coding agent's prompt is under its
// tokenizer (context-advice.ts turns that into the context agents need).
import { stat } from "node:fs/promises";
import { freemem, totalmem } from "node:os";
import { GgmlType, type Llama, type LlamaModel } from "node-llama-cpp";
import type { ContextMemory } from "./context-advice.js";
import {
  attentionHeadSizes,
  DEFAULT_MAX_CONTEXT_SIZE,
  defaultMaxSequences,
  fitMemoryModel,
  kvCacheTypesFor,
  memoryBudget,
  planContext,
  type AttentionMetadata,
  type ContextPlan,
} from "./resource-plan.js";

/** What the plan reads of a load's options; draftModelPath only where speculation will use it. */
export interface FitOptions {
  sequences?: number;
  contextSize?: number;
  maxContextSize?: number;
  draftModelPath?: string;
}

/**
 * Text like what coding agents send (instructions, a tool schema, code), to measure how many tokens this
 * model's tokenizer makes per character of it.
 */
const AGENT_TEXT_SAMPLE = `You are an interactive agent that helps users with software engineering tasks. Use the instructions below and the tools available to you to assist the user.

# Doing tasks
- Read the relevant files before you change them, and keep changes small.
- Run the tests after each change; never skip a failing test.

{"name": "Read", "description": "Reads a file from the local filesystem.", "schema": {"type": "object", "properties": {"file_path": {"type": "string", "description": "The absolute path to the file to read"}, "offset": {"type": "number"}}, "required": ["file_path"], "additionalProperties": false}}

export async function loadConfig(path: string): Promise<Config> {
  const text = await readFile(path, "utf8");
  return JSON.parse(text) as Config;
}
`;

/** Tokens per character of agent-like text under this model's tokenizer. */
export function agentTokensPerChar(model: LlamaModel): number {
  return model.tokenize(AGENT_TEXT_SAMPLE, false).length / AGENT_TEXT_SAMPLE.length;
}

/**
 * Sizes the context to the memory left once the model is loaded (see resource-plan.ts). Also says what that
 * memory holds, and the context the server would choose without a given --context-size, for the advice
 * when a context is too short (context-advice.ts).
 */
export async function planForModel(
  llama: Llama,
  model: LlamaModel,
  options: FitOptions,
  agentContext: number,
): Promise<{ plan: ContextPlan; budget: number; onGpu: boolean; memory: ContextMemory; automaticContextSize: number }> {
  const onGpu = llama.gpu !== false && model.gpuLayers > 0;
  const estimate = async (contextSize: number, sequences: number, quantized = false) => {
    const r = await model.fileInsights.estimateContextResourceRequirementsV2({
      contextSize,
      modelGpuLayers: model.gpuLayers,
      sequences,
      ...(quantized ? { kvCacheKeyType: GgmlType.Q8_0, kvCacheValueType: GgmlType.Q8_0, flashAttention: true } : {}),
    });
    return onGpu ? r.gpuVram : r.cpuRam;
  };
  const fit = async (quantized: boolean) => {
    const [c1s1, c2s1, c2s2] = await Promise.all([estimate(1024, 1, quantized), estimate(2048, 1, quantized), estimate(2048, 2, quantized)]);
    return fitMemoryModel({ c1: 1024, c2: 2048, c1s1, c2s1, c2s2 });
  };
  // Also with both values given: the estimates then choose the KV cache type (q8_0 where only that fits).
  const memory = await fit(false);
  // Only for heads that q8_0's blocks divide: for others each estimate would make llama.cpp log an error.
  const kvTypes = kvCacheTypesFor(attentionHeadSizes(model.fileInfo.architectureMetadata as AttentionMetadata));
  const quantizedMemory = kvTypes.includes("q8_0") ? await fit(true).catch(() => undefined) : undefined;
  const vram = onGpu ? await llama.getVramState() : { free: 0, total: 0 };
  // A draft model (--draft-model) loads after this context: its weights and a KV cache of its own, about its
  // file's size and a quarter more (a small model's cache per token is small), are left out of the budget.
  const draftBytes = options.draftModelPath ? await stat(options.draftModelPath).then((s) => s.size * DRAFT_MEMORY_FACTOR, () => 0) : 0;
  const budget = Math.max(0, memoryBudget({
    onGpu,
    vramFreeBytes: vram.free,
    vramTotalBytes: vram.total,
    ramFreeBytes: freemem(),
    ramTotalBytes: totalmem(),
    mappedModelBytes: onGpu || !model.useMmap ? 0 : model.size,
  }) - draftBytes);
  const input = {
    budgetBytes: budget,
    memory,
    quantizedMemory,
    trainContextSize: model.trainContextSize,
    sequences: options.sequences,
    limits: {
      maxContextSize: options.maxContextSize ?? DEFAULT_MAX_CONTEXT_SIZE,
      maxSequences: defaultMaxSequences(onGpu),
      agentContextSize: agentContext,
    },
  };
  const plan = planContext({ ...input, contextSize: options.contextSize });
  const automaticContextSize = options.contextSize === undefined ? plan.contextSize : planContext(input).contextSize;
  const costs = quantizedMemory ? [memory, quantizedMemory] : [memory];
  return { plan, budget, onGpu, memory: { kind: onGpu ? "VRAM" : "RAM", budgetBytes: budget, costs }, automaticContextSize };
}

/** What a draft model takes beside the served one, in multiples of its file's size (see planForModel). */
const DRAFT_MEMORY_FACTOR = 1.25;

