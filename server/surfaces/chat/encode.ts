// Canonical result → chat.completion object. Pure.
import type { InferenceResult, StopReason, TokenLogprob, ToolCall } from "../../core/inference.js";
import { modelIdOfMode } from "../../core/inference.js";

export interface ChatEnvelope {
  id: string;
  created: number;
  sessionId?: string;
}

export function finishReasonOf(stop: StopReason): string {
  switch (stop) {
    case "end_turn":
    case "stop_sequence":
      return "stop";
    case "max_tokens":
      return "length";
    case "tool_calls":
      return "tool_calls";
    case "low_confidence":
      return "low_confidence";
    case "abstained":
      return "abstained";
  }
}

export function encodeToolCalls(calls: ToolCall[]) {
  return calls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: c.arguments } }));
}

/** OpenAI's logprobs object for answer tokens (`refusal` is never scored here). */
export function encodeLogprobs(tokens: readonly TokenLogprob[]) {
  return {
    content: tokens.map((t) => ({
      token: t.token,
      logprob: t.logprob,
      bytes: t.bytes,
      top_logprobs: t.top.map((a) => ({ token: a.token, logprob: a.logprob, bytes: a.bytes })),
    })),
    refusal: null,
  };
}

export function encodeChatUsage(result: InferenceResult) {
  const u = result.usage;
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    // Present when reasoning ran; already counted inside completion_tokens.
    ...(result.mode === "thinking" ? { reasoning_tokens: u.reasoningTokens } : {}),
    prompt_tokens_details: { cached_tokens: u.cachedTokens },
    // OpenAI's Predicted Outputs fields, for speculation's guesses (docs/api.md, "Speculation"): guessed tokens
    // the answer took, and those checked and not taken.
    completion_tokens_details: {
      reasoning_tokens: u.reasoningTokens,
      accepted_prediction_tokens: u.acceptedDraftTokens ?? 0,
      rejected_prediction_tokens: (u.draftedTokens ?? 0) - (u.acceptedDraftTokens ?? 0),
    },
  };
}

/** Fields after usage that every final object carries: svc_complexity always, svc_trace with glassbox. */
export function encodeExtensions(result: InferenceResult, envelope: ChatEnvelope) {
  return {
    svc_complexity: result.complexity,
    ...(result.trace ? { svc_trace: result.trace } : {}),
    ...(envelope.sessionId !== undefined ? { session_id: envelope.sessionId } : {}),
  };
}

export function encodeChatCompletion(result: InferenceResult, envelope: ChatEnvelope) {
  // A call cut off by max_tokens is shown with the arguments written so far (finish_reason length), as
  // the stream showed it.
  const calls = result.incompleteToolCall ? [...result.toolCalls, result.incompleteToolCall] : result.toolCalls;
  const hasCalls = calls.length > 0;
  return {
    id: envelope.id,
    object: "chat.completion" as const,
    created: envelope.created,
    model: modelIdOfMode(result.mode),
    choices: [
      {
        index: 0,
        message: {
          role: "assistant" as const,
          content: result.refusal !== undefined || (hasCalls && result.text === "") ? null : result.text,
          refusal: result.refusal ?? null,
          ...(result.reasoning ? { reasoning_content: result.reasoning } : {}),
          ...(hasCalls ? { tool_calls: encodeToolCalls(calls) } : {}),
        },
        finish_reason: finishReasonOf(result.stopReason),
        logprobs: result.logprobs ? encodeLogprobs(result.logprobs) : null,
      },
    ],
    usage: encodeChatUsage(result),
    ...encodeExtensions(result, envelope),
  };
}
