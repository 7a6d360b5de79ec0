// The engine's contract with the pipeline. Nothing here names node-llama-cpp, so the pipeline and the
// contract tests can run against a scripted fake engine.
import type {
  CanonicalMessage,
  InferenceEvent,
  Mode,
  OutputFormat,
  SamplingOptions,
  StopReason,
  TokenLogprob,
  ToolCall,
  ToolChoice,
  ToolDefinition,
} from "../core/inference.js";
import type { ContextRemedy } from "./context-advice.js";

/**
 * The end of one block of the request, where a cacheable prefix ends: after tools[tool]'s definition, after
 * messages[message].content[part], or after messages[message].toolCalls[call].
 */
export type CacheBreakpoint =
  | { kind: "tool"; tool: number }
  | { kind: "content"; message: number; part: number }
  | { kind: "tool_call"; message: number; call: number };

export interface EngineRequest {
  messages: CanonicalMessage[];
  tools: ToolDefinition[];
  toolChoice: ToolChoice;
  parallelToolCalls: boolean;
  output: OutputFormat;
  mode: Mode;
  /** Cap on reasoning tokens (the engine caps it again by maxTokens). */
  reasoningBudget: number;
  /** Bounds reasoning plus answer. Undefined: as much as the context allows. */
  maxTokens?: number;
  stopSequences: string[];
  sampling: SamplingOptions;
  /** Where cacheable prefixes end, in request order (the pipeline keeps at most 4). */
  cacheBreakpoints?: CacheBreakpoint[];
  /**
   * Score the answer's sampled tokens with their probabilities (and the `top` most likely alternatives);
   * absent: no probability is computed, at no cost.
   */
  tokenProbabilities?: { top: number };
  /** Requests of one session prefer the sequence that served the session last (cache affinity). */
  sessionId?: string;
  /** Text the answer is expected to repeat (Chat's `prediction`): speculation guesses from it too. */
  prediction?: string;
}

/** A sampled answer or tool-call token and its log-probability under the model. */
export interface ScoredToken {
  text: string;
  logprob: number;
}

export interface EngineUsage {
  promptTokens: number;
  cachedTokens: number;
  /** Prompt tokens evaluated now up to the last cache breakpoint: max(0, breakpoint offset - cachedTokens). */
  cacheWriteTokens?: number;
  completionTokens: number;
  reasoningTokens: number;
  /**
   * Speculation (slot-loop.ts): tokens guessed and checked while generating, and those of them the answer
   * took (each a completion token that cost no step of its own). Absent from engines that do not guess.
   */
  draftedTokens?: number;
  acceptedDraftTokens?: number;
}

export interface EngineOutcome {
  mode: Mode;
  text: string;
  reasoning: string;
  toolCalls: ToolCall[];
  /** A call cut off by the token budget (stop reason max_tokens): its name and the arguments written so far. */
  incompleteToolCall?: ToolCall;
  stopReason: Exclude<StopReason, "low_confidence" | "abstained">;
  stopSequence: string | null;
  usage: EngineUsage;
  /** With tokenProbabilities: the visible answer's tokens, as the text.delta events carried them. */
  logprobs?: TokenLogprob[];
  /** With tokenProbabilities: every sampled answer and tool-call token (what confidence is computed from). */
  scored?: ScoredToken[];
  /** The request's images went to the vision encoder: how many, and the prompt tokens they took. */
  vision?: { images: number; imageTokens: number };
}

export type EngineEvent = Exclude<InferenceEvent, { type: "done" }> | { type: "done"; outcome: EngineOutcome };

export interface GpuInfo {
  /** What the engine runs on: cuda, vulkan, metal, or cpu. */
  backend: "cuda" | "vulkan" | "metal" | "cpu";
  devices: string[];
  vramTotalBytes: number;
  vramFreeBytes: number;
  /** GPU backends passed over on the way to this one, and why. */
  skipped?: Array<{ backend: string; reason: string }>;
  /**
   * Which llama.cpp binaries run: node-llama-cpp's prebuilt ones (what `npm install` gives) or a build made
   * on this machine (docs/performance.md: faster prompts and batches on a CPU). Absent where not known.
   */
  build?: "prebuilt" | "local";
  /**
   * With a local build: "full" (`svc engine build` for the CPU: llama.cpp and our addon compiled here) or
   * "addon" (our addon alone, compiled here against node-llama-cpp's prebuilt llama.cpp libraries: a GPU
   * backend's build, or `--addon-only`). Absent for the prebuilt binaries, and for a local build not ours.
   */
  localBuild?: "full" | "addon";
}

export interface LoadedModelInfo {
  path: string;
  name: string;
  sizeBytes: number;
  trainContextSize: number;
  contextSize: number;
  sequences: number;
  threads: number;
  /** Layers offloaded to the GPU, of totalLayers. */
  gpuLayers?: number;
  totalLayers?: number;
  /** The most one request can generate: the context less the margin kept for forced markers. */
  maxOutputTokens?: number;
  /** The KV cache's type: f16, or q8_0 when that was needed to fit the context in memory. */
  kvCache?: "f16" | "q8_0";
  /** The context a coding agent's first request needs with this model's tokenizer. */
  agentContextSize?: number;
  /** Warm start (warm-start.ts), when it is on: where the saved prefixes are, and the shortest one saved. */
  warmStart?: { dir: string; minTokens: number } | null;
  /** Why the context is too short for coding agents and what would help (context-advice.ts); null when it is not. */
  contextNote?: string | null;
  /** The same as facts (context-advice.ts's contextRemedy for a coding agent's first request); null when it fits. */
  contextRemedy?: ContextRemedy | null;
  /**
   * The most characters one token stands for: a prompt whose text is longer than contextSize times this
   * cannot fit, which the pipeline checks before anything is rendered or tokenized.
   */
  maxTokenChars?: number;
  /**
   * Served by inference servers upstream (upstream-engine.ts): each replica, whether it serves now, its slots
   * and context per slot, the model file it names, and why it is drained. Absent for the built-in engine.
   */
  upstreams?: Array<{ url: string; healthy: boolean; slots: number; contextSize: number; model: string; error: string | null }>;
  /**
   * Speculation (slot-loop.ts): guesses checked as the answers are written, from prompt lookup or a draft
   * model (--draft-model, named in draftModel), or off. Absent upstream.
   */
  speculation?: "prompt-lookup" | "draft-model" | "off";
  /** The draft model speculation guesses with (its name and file); null or absent: none. */
  draftModel?: { name: string; path: string } | null;
  /**
   * The vision projector loaded beside the model (images go to the model); null or absent: text only.
   * devices: where the vision process runs ("CPU", "CUDA0", ...); gpuLayers: the model's layers it offloaded;
   * note: why it is not on the GPU the text engine uses.
   */
  vision?: { projector: string; devices: string[]; gpuLayers: number; note?: string } | null;
}

export type EngineState = "no_model" | "loading" | "ready" | "error";

export interface EngineStatus {
  state: EngineState;
  model: LoadedModelInfo | null;
  gpu: GpuInfo | null;
  error: string | null;
}

/** Speculation's counts since the server started (EngineHost.speculation; /health's and the window's). */
export interface SpeculationCounts {
  mode: "prompt-lookup" | "draft-model" | "off";
  /** The draft model's name, in draft-model mode; otherwise null. */
  draftModel: string | null;
  draftedTokens: number;
  acceptedTokens: number;
  /** accepted ÷ drafted; null before any guess. */
  acceptanceRate: number | null;
}

export interface Engine {
  status(): EngineStatus;
  /**
   * Runs one generation. The first event is `start` (prompt evaluated), the last is `done`. Throws AppError
   * (before the first event) for requests the model cannot take, e.g. a prompt longer than the context.
   * Aborting the signal stops generation and frees the sequence; the generator then ends without `done`.
   * Callers run at most `status().model.sequences` generations at once (the pipeline's scheduler sees to it).
   */
  generate(request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent, void, void>;
  /** Exact prompt token count for a request, without generating. */
  countPromptTokens(request: EngineRequest): Promise<number>;
  close(): Promise<void>;
  /**
   * Engines that can die on their own (an engine process: a native abort, the OOM killer) call `listener`
   * when they do, with how; their running generations have failed by then. Returns an unsubscribe.
   */
  onFailure?(listener: (reason: string) => void): () => void;
  /**
   * Engines whose sequences come and go while loaded (upstream replicas drained and back) call `listener`
   * when status().model.sequences may have changed. Returns an unsubscribe.
   */
  onCapacityChange?(listener: () => void): () => void;
  /** The GPU with its free memory as of now (engines in another process ask it there). */
  gpuNow?(): Promise<GpuInfo | null>;
}
