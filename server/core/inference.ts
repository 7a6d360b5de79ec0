// The canonical request and event stream. Every surface decodes into InferenceRequest and encodes from
// InferenceEvent / InferenceResult; batches and agent runs use the same types. No vendor's JSON lives here.

export type JsonSchema = Record<string, unknown>;

export type Mode = "fast" | "thinking";

/** Where a file's bytes come from. Resolved to text by the ingest step before the engine sees the request. */
export type FileSource =
  | { kind: "file_id"; fileId: string }
  | { kind: "base64"; mediaType: string; data: string }
  | { kind: "url"; url: string }
  | { kind: "text"; mediaType: string; text: string };

/**
 * `cacheBreakpoint` marks the end of a cacheable prefix (Messages surface `cache_control`). `param` is where a
 * surface found a file or image part (e.g. "messages[1].content[0].content[2]"), for errors about it: the
 * canonical message list does not always have the client's indices.
 */
export type ContentPart =
  | { type: "text"; text: string; cacheBreakpoint?: boolean }
  | { type: "file"; source: FileSource; filename?: string; title?: string; cacheBreakpoint?: boolean; param?: string }
  | { type: "image"; source: FileSource; cacheBreakpoint?: boolean; param?: string };

export interface ToolCall {
  id: string;
  name: string;
  /** JSON text of the arguments object. */
  arguments: string;
  /** Cache breakpoint after this call (Messages surface). */
  cacheBreakpoint?: boolean;
}

export type CanonicalMessage =
  | { role: "system"; content: ContentPart[] }
  | { role: "user"; content: ContentPart[] }
  | { role: "assistant"; content: ContentPart[]; reasoning?: string; toolCalls?: ToolCall[] }
  | { role: "tool"; toolCallId: string; content: ContentPart[]; isError?: boolean };

export interface ToolDefinition {
  name: string;
  description?: string;
  /** A JSON schema for the arguments object. */
  parameters: JsonSchema;
  /** Cache breakpoint after this tool's definition (Messages surface). */
  cacheBreakpoint?: boolean;
  /** Where the surface found the schema (e.g. "tools[0].function.parameters"), for error messages. */
  param?: string;
  /** The caller asked for strict adherence to the schema: a keyword the grammar cannot hold is a 400. */
  strict?: boolean;
}

export type ToolChoice =
  | { type: "auto" }
  | { type: "none" }
  | { type: "required" }
  | { type: "tool"; name: string };

export type OutputFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; name?: string; schema: JsonSchema; strict?: boolean; param?: string };

export interface SamplingOptions {
  temperature?: number;
  topP?: number;
  topK?: number;
  seed?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
}

export interface ReasoningRequest {
  /** fast: no reasoning; thinking: reasoning up to budgetTokens. */
  mode: Mode;
  /** Upper bound on reasoning tokens (already capped by max_reasoning_tokens; max_tokens caps it again in the engine). */
  budgetTokens: number;
  /** What the client asked for, for svc_complexity and traces: e.g. "medium", "haiku", "enabled:2048". */
  effort: string;
  /**
   * The effort's own budget, within which svc_complexity steers (docs/api.md, "Glassbox"); absent when the
   * caller set the budget exactly (Messages `thinking.budget_tokens`). `budgetTokens` stays the hard cap.
   */
  steerWithin?: number;
}

export interface GlassboxOptions {
  /** Score the answer from its token probabilities (default true); false gives the trace with confidence null. */
  confidence?: boolean;
  /** Below this confidence the answer finishes with low_confidence. */
  threshold?: number;
  /** Below this confidence the service abstains (finish abstained). */
  abstainBelow?: number;
}

export type RefusalMode = "soft" | "strict";

export type SurfaceName = "chat" | "responses" | "messages" | "batch" | "agent";

export interface InferenceRequest {
  surface: SurfaceName;
  /** System and developer prompts come first, as system messages. */
  messages: CanonicalMessage[];
  tools: ToolDefinition[];
  toolChoice: ToolChoice;
  parallelToolCalls?: boolean;
  output: OutputFormat;
  reasoning: ReasoningRequest;
  /** Bounds reasoning plus answer tokens. Undefined: up to the context window. */
  maxTokens?: number;
  /** Applied to the visible answer only. */
  stopSequences: string[];
  sampling: SamplingOptions;
  glassbox?: GlassboxOptions;
  /** Chat `logprobs` / Responses `include: ["message.output_text.logprobs"]`: per-token log-probabilities. */
  logprobs?: { top: number };
  refusalMode?: RefusalMode;
  sessionId?: string;
  /**
   * Chat's `prediction` (OpenAI's Predicted Outputs): text the answer is expected to repeat much of (a file
   * being edited), which speculation then guesses from as it does from the prompt. Never changes the answer.
   */
  prediction?: string;
  metadata?: Record<string, unknown>;
  /**
   * "auto": when the prompt does not fit the context, the oldest turns (after the leading system messages)
   * are left out until it does, keeping room for the answer. Otherwise such a prompt is refused.
   */
  truncation?: "auto";
}

/** Why generation ended. Surfaces map these to finish_reason / stop_reason / status. */
export type StopReason =
  | "end_turn" // the model finished its answer
  | "stop_sequence" // a stop sequence hit (stopSequence holds it)
  | "max_tokens" // max_tokens reached, or reasoning spent the whole budget
  | "tool_calls" // the model called one or more tools
  | "low_confidence" // glassbox: below the caller's threshold
  | "abstained"; // glassbox: below the hard cutoff

export interface Usage {
  promptTokens: number;
  /** Prompt tokens served from the prefix cache (a subset of promptTokens). */
  cachedTokens: number;
  /** Prompt tokens written at cache breakpoints (Messages surface), a subset of promptTokens - cachedTokens. */
  cacheWriteTokens: number;
  /** Reasoning plus answer tokens. */
  completionTokens: number;
  /** A subset of completionTokens. */
  reasoningTokens: number;
  /**
   * Speculation: tokens guessed (prompt lookup) and checked while generating, and those of them the answer
   * took, a subset of completionTokens. Absent where the engine does not guess.
   */
  draftedTokens?: number;
  acceptedDraftTokens?: number;
}

/** One answer token and its log-probability under the model (docs/api.md, "Glassbox"). */
export interface TokenLogprob {
  token: string;
  bytes: number[];
  logprob: number;
  /** The most likely tokens at this position, most likely first (as many as top_logprobs asked). */
  top: Array<{ token: string; bytes: number[]; logprob: number }>;
}

/** svc_complexity: an estimate, before generation, of how demanding the request is. See docs/api.md. */
export interface Complexity {
  /** 0..1, from prompt size, tools, structured output and the reasoning asked for. */
  score: number;
  level: "low" | "medium" | "high";
  mode: Mode;
  effort: string;
  /** The effort's cap (and max_reasoning_tokens'); 0 in fast mode. */
  reasoning_cap: number;
  /** The budget that applied: the cap scaled by the score (docs/api.md). */
  reasoning_budget: number;
  reasoning_tokens: number;
  prompt_tokens: number;
  tools: number;
  structured_output: boolean;
}

/** A stretch of answer tokens with the lowest geometric-mean probability. */
export interface WeakSpan {
  text: string;
  confidence: number;
  /** Index of its first token among the scored answer tokens. */
  token_offset: number;
  tokens: number;
}

/** svc_trace: present when glassbox was requested. */
export interface Trace {
  /** 0..1, the geometric mean of the answer tokens' probabilities; null when confidence is off. */
  confidence: number | null;
  /** How `confidence` was computed (null when off). */
  confidence_method: "geometric_mean" | null;
  /** Answer tokens that were scored (text and tool-call tokens the model sampled). */
  scored_tokens: number;
  weakest_spans: WeakSpan[];
  mode: Mode;
  effort: string;
  reasoning_budget: number;
  reasoning_tokens: number;
  cached_tokens: number;
  stop_reason: StopReason;
  /** Why the model itself stopped, before glassbox or the refusal mode judged the answer. */
  model_stop_reason: StopReason;
  threshold: number | null;
  abstain_below: number | null;
  refusal_mode: RefusalMode;
  /** Set when strict refusal mode withheld the answer, with why. */
  refusal: string | null;
  session_id: string | null;
  /**
   * The request's images and how the model got them: "vision", the images themselves through the model's
   * vision encoder (tokens: the prompt tokens they took); "ocr", a text-only model's fallback, the text OCR
   * read in them and their facts (tokens null). Absent without images.
   */
  images?: { count: number; read_by: "vision" | "ocr"; tokens: number | null };
  /**
   * Speculation (docs/api.md, "Speculation"): tokens guessed from the conversation and checked in the steps
   * that wrote the answer, and those of them the answer took. Absent where the engine does not guess
   * (upstream inference servers, the vision path).
   */
  speculation?: { drafted_tokens: number; accepted_tokens: number };
}

export interface InferenceResult {
  /** The resolved mode, shown as svc-fast / svc-thinking. */
  mode: Mode;
  text: string;
  reasoning: string;
  /** Complete calls only. */
  toolCalls: ToolCall[];
  /**
   * A call cut off by max_tokens (stopReason max_tokens): its name and the arguments written so far, exactly
   * the concatenation of its streamed deltas (possibly "" or incomplete JSON).
   */
  incompleteToolCall?: ToolCall;
  stopReason: StopReason;
  stopSequence: string | null;
  usage: Usage;
  complexity: Complexity;
  trace?: Trace;
  /** The answer's tokens with their log-probabilities, when the request asked for logprobs. */
  logprobs?: TokenLogprob[];
  /** Strict refusal mode withheld the answer: why (text is then empty). */
  refusal?: string;
}

export type InferenceEvent =
  /** First event of every run: the prompt is evaluated and generation has begun. */
  | {
      type: "start";
      mode: Mode;
      promptTokens: number;
      cachedTokens: number;
      /** Prompt tokens evaluated now up to the last cache breakpoint (0 or absent without breakpoints). */
      cacheWriteTokens?: number;
    }
  | { type: "reasoning.delta"; text: string }
  /** `logprobs`: the tokens this text completes, when the request asked for logprobs (text may then be ""). */
  | { type: "text.delta"; text: string; logprobs?: TokenLogprob[] }
  | { type: "tool_call.start"; index: number; id: string; name: string }
  | { type: "tool_call.delta"; index: number; argumentsDelta: string }
  | { type: "tool_call.end"; index: number; arguments: string }
  | { type: "done"; result: InferenceResult };

export function modelIdOfMode(mode: Mode): "svc-fast" | "svc-thinking" {
  return mode === "fast" ? "svc-fast" : "svc-thinking";
}
