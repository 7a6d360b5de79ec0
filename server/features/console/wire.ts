// The API's JSON as the desktop window reads it: files, audit records, message batches and their results,
// agent runs, and the error bodies. One module, types only and importing nothing, so the layer rules let the
// renderer import it (like contract.ts) without pulling in any server code. test/unit/wire-types.test.ts
// checks each type against the server's own (FileOut, AuditRecord, MessageBatchObject, RunObject, ...) at
// compile time, so a field added or changed on one side and not the other fails the typecheck.

// ---- Files (docs/api.md, "The file object") ----

export interface FileOut {
  id: string;
  object: "file";
  filename: string;
  purpose: string;
  mime_type: string;
  size: number;
  bytes: number;
  status: "uploaded" | "processed" | "error";
  status_details: string | null;
  content_kind: string;
  token_estimate: number;
  created_at: number;
  expires_at: number;
  /** Images only: "vision" (the model sees the image) or "ocr" (a text-only model reads it with OCR). */
  svc_image_input?: "vision" | "ocr";
}

export interface FileList {
  object: "list";
  data: FileOut[];
  has_more: boolean;
  first_id: string | null;
  last_id: string | null;
}

// ---- Audit (docs/api.md, "Audit") ----

export interface AuditUsage {
  input_tokens: number | null;
  output_tokens: number | null;
  reasoning_tokens: number | null;
  cached_tokens: number | null;
}

export interface AuditRecord {
  id: string;
  object: "audit.record";
  request_id: string;
  created_at: number;
  account_id: string;
  key_id: string;
  surface: string;
  method: string;
  path: string;
  model: string | null;
  mode: string | null;
  status: number;
  error_code: string | null;
  stop_reason: string | null;
  aborted: boolean;
  latency_ms: number;
  ttft_ms: number | null;
  queued_ms: number | null;
  usage: AuditUsage;
  session_id: string | null;
  batch_id: string | null;
  run_id: string | null;
  run_status: string | null;
  run_steps: number | null;
}

export interface AuditList {
  object: "list";
  data: AuditRecord[];
  has_more: boolean;
  first_id: string | null;
  last_id: string | null;
}

export interface Percentiles {
  p50: number | null;
  p95: number | null;
}

export interface TokenTotals {
  input: number;
  output: number;
  reasoning: number;
  cached: number;
}

export interface AuditDay {
  date: string;
  requests: number;
  errors: number;
  tokens: TokenTotals;
  latency_ms: Percentiles;
}

export interface AuditStats {
  object: "audit.stats";
  timezone: string;
  since: number | null;
  until: number | null;
  requests: number;
  errors: number;
  error_rate: number;
  aborted: number;
  tokens: TokenTotals;
  latency_ms: Percentiles;
  ttft_ms: Percentiles;
  surfaces: Record<string, number>;
  days: AuditDay[];
  retention_days: number;
}

// ---- Message batches (docs/api.md, "Message batches") ----

export interface BatchRequestCounts {
  processing: number;
  succeeded: number;
  errored: number;
  canceled: number;
  expired: number;
}

export interface MessageBatch {
  id: string;
  type: "message_batch";
  processing_status: "in_progress" | "canceling" | "ended";
  request_counts: BatchRequestCounts;
  created_at: string;
  ended_at: string | null;
  expires_at: string;
  cancel_initiated_at: string | null;
  archived_at: string | null;
  results_url: string | null;
}

export interface MessageBatchList {
  data: MessageBatch[];
  has_more: boolean;
  first_id: string | null;
  last_id: string | null;
}

/** A block of a Messages response as a batch result holds it (text, thinking, tool_use, ...). */
export interface ResultContentBlock {
  type: string;
  text?: string;
  thinking?: string;
  name?: string;
  input?: unknown;
}

/** One line of GET /v1/messages/batches/{id}/results. */
export interface BatchResultLine {
  custom_id: string;
  result:
    | { type: "succeeded"; message: { content: ResultContentBlock[]; stop_reason: string | null; usage: { input_tokens: number; output_tokens: number } } }
    | { type: "errored"; error: AnthropicErrorBody }
    | { type: "canceled" }
    | { type: "expired" };
}

// ---- Agent runs (docs/api.md, "Agent runs") ----

export interface RunUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface ModelStep {
  id: string;
  object: "agent.run.step";
  type: "model_call";
  index: number;
  status: "in_progress" | "completed" | "cancelled" | "incomplete" | "failed";
  created_at: number;
  completed_at: number | null;
  duration_ms: number | null;
  text: string;
  reasoning?: string;
  tool_calls: Array<{ call_id: string; name: string; arguments: string }>;
  stop_reason: string | null;
  usage: RunUsage;
}

export interface ToolStep {
  id: string;
  object: "agent.run.step";
  type: "tool_call";
  index: number;
  status: "in_progress" | "completed" | "failed" | "requires_action";
  created_at: number;
  completed_at: number | null;
  duration_ms: number | null;
  tool_type: "built_in" | "function";
  call_id: string;
  name: string;
  arguments: string;
  output: string | null;
  result: unknown;
  error: { code: string; message: string } | null;
}

export type RunStep = ModelStep | ToolStep;

export type RunStatus = "queued" | "in_progress" | "requires_action" | "completed" | "failed" | "cancelled" | "incomplete";

/** The run object, with the fields the window reads (the server's has more: tools, output items, ...). */
export interface RunObject {
  id: string;
  run_id: string;
  object: "agent.run";
  created_at: number;
  completed_at: number | null;
  status: RunStatus;
  file_ids: string[] | null;
  max_steps: number;
  steps: RunStep[];
  output_text: string;
  incomplete_details: { reason: "max_steps" | "timeout" | "max_output_tokens" } | null;
  error: { code: string; message: string } | null;
  usage: RunUsage;
}

/** The stream's events (each also carries sequence_number). */
export type RunEvent =
  | { type: "run.created" | "run.in_progress" | "run.completed" | "run.requires_action" | "run.incomplete" | "run.cancelled" | "run.failed"; run: RunObject }
  | { type: "run.step.created" | "run.step.completed"; step: RunStep }
  | { type: "run.output_text.delta" | "run.reasoning.delta"; step_id: string; delta: string }
  | { type: "run.function_call_arguments.delta"; step_id: string; call_id: string; name: string; delta: string };

// ---- Errors (docs/api.md, "Requests and errors common to every surface", "Context length") ----

/**
 * Why a prompt did not fit the context, and what would take it (context-advice.ts's ContextRemedy):
 * `training`: the model was trained on fewer tokens, so no setting helps, another model does; `setting`:
 * a context of `figure` tokens would (`automatic`: what the server sizes by itself, when that is enough);
 * `sequences`: the memory holds `sequences` answers at once of `figure` tokens; `memory`: the free memory
 * holds at most `room` tokens.
 */
export type ContextRemedy =
  | { reason: "training"; figure: number }
  | { reason: "setting"; figure: number; automatic: number | null }
  | { reason: "sequences"; figure: number; sequences: number }
  | { reason: "memory"; figure: number; room: number };

/** The facts of a context_length_exceeded error (`svc_context` on the error object). */
export interface ContextErrorFacts {
  context_size: number;
  prompt_tokens: number;
  /** What the model was trained on; 0 when its file does not say. */
  train_context_size: number;
  /** null when the prompt would fit a context of this size (it did not only by its margin). */
  remedy: ContextRemedy | null;
}

/** The OpenAI error body (Chat, Responses, Files, Audit, Agent). */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null; svc_context?: ContextErrorFacts };
}

/** The Anthropic error body (Messages and its batches). */
export interface AnthropicErrorBody {
  type: "error";
  error: { type: string; message: string; details?: { error_code: string; param?: string; errors?: unknown[]; svc_context?: ContextErrorFacts } };
  request_id: string;
}
