// Canonical result → Responses objects. Pure. The stream encoder builds its final event from the same
// functions, so a streamed response ends with exactly the object a non-streamed request returns.
import type { InferenceResult, Mode, ToolCall } from "../../core/inference.js";
import { modelIdOfMode } from "../../core/inference.js";
import { newId } from "../../core/ids.js";
import type { ResponseEcho } from "./decode.js";

export interface ResponsesEnvelope {
  id: string;
  createdAt: number;
  /** The key's reasoning-trace flag: the thought is shown as a reasoning item's summary. */
  trace: boolean;
  echo: ResponseEcho;
}

export type ResponseStatus = "in_progress" | "completed" | "incomplete" | "failed";
type ItemStatus = "in_progress" | "completed" | "incomplete";

export interface OutputText {
  type: "output_text";
  text: string;
  annotations: never[];
  logprobs: never[];
}

export interface MessageItem {
  id: string;
  type: "message";
  role: "assistant";
  status: ItemStatus;
  content: OutputText[];
}

export interface FunctionCallItem {
  id: string;
  type: "function_call";
  status: ItemStatus;
  call_id: string;
  name: string;
  arguments: string;
}

export interface ReasoningItem {
  id: string;
  type: "reasoning";
  summary: Array<{ type: "summary_text"; text: string }>;
}

export type OutputItem = MessageItem | FunctionCallItem | ReasoningItem;

/** Item ids a stream already announced; missing ones are made up. */
export interface OutputIds {
  reasoning?: string;
  message?: string;
  calls?: Map<string, string>;
}

export const newReasoningId = () => newId("rs_");
export const newMessageId = () => newId("msg_");
export const newFunctionCallId = () => newId("fc_");

export function encodeOutputText(text: string): OutputText {
  return { type: "output_text", text, annotations: [], logprobs: [] };
}

export function encodeFunctionCallItem(id: string, call: ToolCall, status: ItemStatus): FunctionCallItem {
  return { id, type: "function_call", status, call_id: call.id, name: call.name, arguments: call.arguments };
}

export function statusOf(result: InferenceResult): "completed" | "incomplete" {
  return result.stopReason === "max_tokens" ? "incomplete" : "completed";
}

/**
 * The output items, in the order the model produced them: the reasoning item (only with the key's trace
 * flag, and only when it thought), the message (when there is text, or nothing else to show), then one
 * function_call item per call.
 */
export function encodeOutput(result: InferenceResult, trace: boolean, ids: OutputIds = {}): OutputItem[] {
  const output: OutputItem[] = [];
  const status = statusOf(result);
  if (trace && result.reasoning !== "")
    output.push({ id: ids.reasoning ?? newReasoningId(), type: "reasoning", summary: [{ type: "summary_text", text: result.reasoning }] });
  if (result.text !== "" || result.toolCalls.length === 0)
    output.push({ id: ids.message ?? newMessageId(), type: "message", role: "assistant", status, content: [encodeOutputText(result.text)] });
  for (const call of result.toolCalls) output.push(encodeFunctionCallItem(ids.calls?.get(call.id) ?? newFunctionCallId(), call, "completed"));
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
    truncation: "disabled" as const,
    usage: result ? encodeUsage(result) : null,
    ...(result ? { svc_complexity: result.complexity } : {}),
  };
}

export function encodeResponse(result: InferenceResult, envelope: ResponsesEnvelope, ids: OutputIds = {}) {
  return encodeResponseObject(
    { status: statusOf(result), mode: result.mode, output: encodeOutput(result, envelope.trace, ids), result },
    envelope,
  );
}
