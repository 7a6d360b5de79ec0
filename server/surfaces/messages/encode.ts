// Canonical result → Messages response object. Pure, apart from the per-process key that signs thoughts.
import { createHmac, randomBytes } from "node:crypto";
import type { InferenceResult, StopReason, ToolCall, Usage } from "../../core/inference.js";
import type { ThinkingDisplay } from "./decode.js";
import { parsePartialJson } from "./partial-json.js";

export interface MessagesEnvelope {
  id: string;
  /** The model string the client sent, echoed as is. */
  model: string;
  thinkingDisplay: ThinkingDisplay;
}

export type MessagesStopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" | "refusal";

/** `refused`: strict refusal mode withheld the answer (result.refusal). */
export function stopReasonOf(stop: StopReason, refused = false): MessagesStopReason {
  if (refused) return "refusal";
  switch (stop) {
    case "stop_sequence":
      return "stop_sequence";
    case "max_tokens":
      return "max_tokens";
    case "tool_calls":
      return "tool_use";
    default:
      // end_turn; glassbox (low_confidence / abstained) is not offered on this surface.
      return "end_turn";
  }
}

/** The engine's call ids are call_<random>; this surface shows the same random part as toolu_<random>. */
export function toolUseId(callId: string): string {
  return `toolu_${callId.startsWith("call_") ? callId.slice(5) : callId}`;
}

/** Tool input as an object: arguments are grammar-constrained JSON; anything else (cut short) gives {}. */
export function toolInput(args: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(args);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

const SIGNING_KEY = randomBytes(32);

/**
 * An opaque signature for a thinking block. Clients must send thinking blocks back unchanged, and this server
 * drops them on input, so nothing verifies it; it is an HMAC so that it is bound to the text all the same.
 */
export function thinkingSignature(thinking: string): string {
  return createHmac("sha256", SIGNING_KEY).update(thinking, "utf8").digest("base64");
}

/**
 * input_tokens + cache_read_input_tokens + cache_creation_input_tokens = the prompt. Cache reads are the
 * prefix reused from the engine's cache; cache writes are the tokens evaluated now up to the last breakpoint.
 */
export function encodeMessagesUsage(usage: Pick<Usage, "promptTokens" | "cachedTokens" | "cacheWriteTokens">) {
  return {
    input_tokens: Math.max(0, usage.promptTokens - usage.cachedTokens - usage.cacheWriteTokens),
    cache_creation_input_tokens: usage.cacheWriteTokens,
    cache_read_input_tokens: usage.cachedTokens,
    cache_creation: { ephemeral_5m_input_tokens: usage.cacheWriteTokens, ephemeral_1h_input_tokens: 0 },
  };
}

/** Usage at the end of a run: the input breakdown, output tokens and the nullable fields the SDK types require. */
export function encodeMessagesFinalUsage(result: InferenceResult) {
  return {
    ...encodeMessagesUsage(result.usage),
    output_tokens: result.usage.completionTokens,
    output_tokens_details: { thinking_tokens: result.usage.reasoningTokens },
    server_tool_use: null,
    service_tier: "standard" as const,
    inference_geo: null,
    speed: null,
  };
}

export function encodeToolUseBlock(call: ToolCall) {
  return { type: "tool_use" as const, id: toolUseId(call.id), name: call.name, input: toolInput(call.arguments), caller: { type: "direct" as const } };
}

/** What of a cut call's arguments is complete, as an object (what the SDK's stream accumulator shows too). */
export function partialToolInput(args: string): Record<string, unknown> {
  try {
    const value = parsePartialJson(args);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** A call cut off by max_tokens: the last block, as Anthropic documents (stop_reason max_tokens). */
export function encodeIncompleteToolUseBlock(call: ToolCall) {
  return { ...encodeToolUseBlock(call), input: partialToolInput(call.arguments) };
}

export function encodeMessagesResponse(result: InferenceResult, envelope: MessagesEnvelope) {
  const content: unknown[] = [];
  if (result.reasoning !== "")
    content.push({
      type: "thinking",
      thinking: envelope.thinkingDisplay === "omitted" ? "" : result.reasoning,
      signature: thinkingSignature(result.reasoning),
    });
  // No `citations` key: Anthropic leaves it out when a block cites nothing, and the AI SDK's provider
  // rejects `citations: null` (its schema takes an array or nothing).
  if (result.text !== "") content.push({ type: "text", text: result.text });
  for (const call of result.toolCalls) content.push(encodeToolUseBlock(call));
  if (result.incompleteToolCall) content.push(encodeIncompleteToolUseBlock(result.incompleteToolCall));
  return {
    id: envelope.id,
    type: "message" as const,
    role: "assistant" as const,
    model: envelope.model,
    content,
    stop_reason: stopReasonOf(result.stopReason, result.refusal !== undefined),
    stop_sequence: result.stopSequence,
    stop_details: null,
    container: null,
    diagnostics: null,
    usage: encodeMessagesFinalUsage(result),
  };
}
