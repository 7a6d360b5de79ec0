// Canonical result → Responses objects. Pure. The stream encoder builds its final event from the same
// functions, so a streamed response ends with exactly the object a non-streamed request returns.
import type { InferenceResult, Mode, TokenLogprob, ToolCall } from "../../core/inference.js";
import { modelIdOfMode } from "../../core/inference.js";
import { newId } from "../../core/ids.js";
import { compactionItem, type CompactionItem } from "./compaction.js";
import type { ResponseEcho } from "./decode.js";
import type { NamespacedName } from "./decode-tools.js";

export interface ResponsesEnvelope {
  id: string;
  createdAt: number;
  /** The key's reasoning-trace flag: the thought is shown as a reasoning item's summary. */
  trace: boolean;
  echo: ResponseEcho;
}

export type ResponseStatus = "in_progress" | "completed" | "incomplete" | "failed";
type ItemStatus = "in_progress" | "completed" | "incomplete";

export interface LogprobEntry {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

export interface OutputText {
  type: "output_text";
  text: string;
  annotations: never[];
  /** Filled with include: ["message.output_text.logprobs"]; otherwise empty. */
  logprobs: LogprobEntry[];
}

/** Strict refusal mode: the answer withheld, in its place the refusal. */
export interface OutputRefusal {
  type: "refusal";
  refusal: string;
}

export interface MessageItem {
  id: string;
  type: "message";
  role: "assistant";
  status: ItemStatus;
  content: Array<OutputText | OutputRefusal>;
}

export interface FunctionCallItem {
  id: string;
  type: "function_call";
  status: ItemStatus;
  call_id: string;
  name: string;
  /** Set for a function of a namespace tool; `name` is then its name within the namespace. */
  namespace?: string;
  arguments: string;
}

export interface ReasoningItem {
  id: string;
  type: "reasoning";
  summary: Array<{ type: "summary_text"; text: string }>;
}

export type OutputItem = MessageItem | FunctionCallItem | ReasoningItem | CompactionItem;

/** Item ids a stream already announced; missing ones are made up. */
export interface OutputIds {
  reasoning?: string;
  message?: string;
  calls?: Map<string, string>;
  compaction?: string;
}

export const newReasoningId = () => newId("rs_");
export const newMessageId = () => newId("msg_");
export const newFunctionCallId = () => newId("fc_");

export function encodeOutputText(text: string, logprobs: readonly TokenLogprob[] = []): OutputText {
  return { type: "output_text", text, annotations: [], logprobs: encodeLogprobEntries(logprobs) };
}

export function encodeLogprobEntries(tokens: readonly TokenLogprob[]): LogprobEntry[] {
  return tokens.map((t) => ({
    token: t.token,
    logprob: t.logprob,
    bytes: t.bytes,
    top_logprobs: t.top.map((a) => ({ token: a.token, logprob: a.logprob, bytes: a.bytes })),
  }));
}

export function encodeFunctionCallItem(
  id: string,
  call: ToolCall,
  status: ItemStatus,
  namespaced: ReadonlyMap<string, NamespacedName> = new Map(),
): FunctionCallItem {
  const inNamespace = namespaced.get(call.name);
  const name = inNamespace ? { name: inNamespace.name, namespace: inNamespace.namespace } : { name: call.name };
  return { id, type: "function_call", status, call_id: call.id, ...name, arguments: call.arguments };
}

export function statusOf(result: InferenceResult, envelope?: ResponsesEnvelope): "completed" | "incomplete" {
  // A compaction always completes: its item holds whatever summary was written.
  if (envelope?.echo.compaction) return "completed";
  return result.stopReason === "max_tokens" ? "incomplete" : "completed";
}

/** The summary a compaction request produced: the answer, else the thought (a model that only thought). */
export function compactionSummaryOf(result: InferenceResult): string {
  return result.text.trim() || result.reasoning.trim();
}

/**
 * The output items, in the order the model produced them: the reasoning item (only with the key's trace
 * flag, and only when it thought), the message (when there is text, or nothing else to show), then one
 * function_call item per call, the last one incomplete when max_output_tokens cut it.
 */
export function encodeOutput(result: InferenceResult, envelope: ResponsesEnvelope, ids: OutputIds = {}): OutputItem[] {
  if (envelope.echo.compaction) return [compactionItem(compactionSummaryOf(result), ids.compaction)];
  const { trace } = envelope;
  const namespaced = envelope.echo.namespaced;
  const output: OutputItem[] = [];
  const status = statusOf(result);
  if (trace && result.reasoning !== "")
    output.push({ id: ids.reasoning ?? newReasoningId(), type: "reasoning", summary: [{ type: "summary_text", text: result.reasoning }] });
  const cut = result.incompleteToolCall;
  if (result.refusal !== undefined)
    output.push({ id: ids.message ?? newMessageId(), type: "message", role: "assistant", status, content: [{ type: "refusal", refusal: result.refusal }] });
  else if (result.text !== "" || (result.toolCalls.length === 0 && !cut))
    output.push({
      id: ids.message ?? newMessageId(),
      type: "message",
      role: "assistant",
      status,
      content: [encodeOutputText(result.text, result.logprobs)],
    });
  for (const call of result.toolCalls)
    output.push(encodeFunctionCallItem(ids.calls?.get(call.id) ?? newFunctionCallId(), call, "completed", namespaced));
  // A call cut off by max_output_tokens: status incomplete, with the arguments written so far.
  if (cut) output.push(encodeFunctionCallItem(ids.calls?.get(cut.id) ?? newFunctionCallId(), cut, "incomplete", namespaced));
  return output;
}

export function encodeUsage(result: InferenceResult) {
  const u = result.usage;
  return {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cachedTokens, cache_write_tokens: u.cacheWriteTokens },
    output_tokens: u.completionTokens,
    // A subset of output_tokens, counted whether or not the key may see the thought.
    output_tokens_details: { reasoning_tokens: u.reasoningTokens },
    total_tokens: u.promptTokens + u.completionTokens,
  };
}

export interface ResponseState {
  status: ResponseStatus;
  mode: Mode;
  output: OutputItem[];
  result?: InferenceResult;
  error?: { code: string; message: string };
}

/** The response object: the final one (with result), or a lifecycle snapshot while streaming. */
export function encodeResponseObject(state: ResponseState, envelope: ResponsesEnvelope) {
  const echo = envelope.echo;
  const { result } = state;
  return {
    id: envelope.id,
    object: "response" as const,
    created_at: envelope.createdAt,
    status: state.status,
    background: false,
    error: state.error ?? null,
    incomplete_details: state.status === "incomplete" ? { reason: "max_output_tokens" as const } : null,
    instructions: echo.instructions,
    max_output_tokens: echo.maxOutputTokens,
    metadata: echo.metadata,
    model: modelIdOfMode(state.mode),
    output: state.output,
    parallel_tool_calls: echo.parallelToolCalls,
    previous_response_id: null,
    reasoning: echo.reasoning,
    store: false,
    temperature: echo.temperature,
    text: { format: echo.textFormat },
    tool_choice: echo.toolChoice,
    tools: echo.tools,
    top_p: echo.topP,
    truncation: echo.truncation,
    usage: result ? encodeUsage(result) : null,
    ...(result ? { svc_complexity: result.complexity } : {}),
    ...(result?.trace ? { svc_trace: result.trace } : {}),
  };
}

export function encodeResponse(result: InferenceResult, envelope: ResponsesEnvelope, ids: OutputIds = {}) {
  return encodeResponseObject(
    { status: statusOf(result, envelope), mode: result.mode, output: encodeOutput(result, envelope, ids), result },
    envelope,
  );
}
