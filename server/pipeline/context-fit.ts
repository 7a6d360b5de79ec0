// Prompts and the context window: `truncation: "auto"` (the oldest turns make way for the newest).
import { AppError } from "../core/errors.js";
import type { CanonicalMessage, InferenceRequest } from "../core/inference.js";
import type { Engine, EngineRequest } from "../engine/types.js";

/** Tokens kept for the answer when a truncated prompt must leave room for one (at most a quarter of the context). */
const ANSWER_ROOM = 2048;
/** What the engine keeps free at the end of the context for forced markers. */
const ENGINE_MARGIN = 16;

/**
 * The messages to send so the prompt fits the context with room for the answer: the leading system messages,
 * then as many of the latest turns as fit, cut at a user message. Unchanged when everything fits, and when
 * even the last turn alone does not (the engine then refuses the request as too long).
 */
export async function fitToContext(
  engine: Engine,
  request: InferenceRequest,
  toEngineRequest: (request: InferenceRequest) => EngineRequest,
): Promise<CanonicalMessage[]> {
  const contextSize = engine.status().model?.contextSize;
  const messages = request.messages;
  if (!contextSize) return messages;
  const room = Math.min(request.maxTokens ?? ANSWER_ROOM, ANSWER_ROOM, Math.floor(contextSize / 4)) + ENGINE_MARGIN;
  const fits = async (candidate: CanonicalMessage[]) =>
    (await engine.countPromptTokens(toEngineRequest({ ...request, messages: candidate }))) + room <= contextSize;
  if (await fits(messages)) return messages;

  let lead = 0;
  while (lead < messages.length && messages[lead]!.role === "system") lead++;
  // Places where the kept part may start: at a user message, after the first turn, never past the last message.
  const cuts: number[] = [];
  for (let i = lead + 1; i < messages.length; i++) if (messages[i]!.role === "user") cuts.push(i);
  if (cuts.length === 0) return messages;
  const keep = (cut: number) => [...messages.slice(0, lead), ...messages.slice(cut)];
  // Fewer kept turns, fewer tokens: find the earliest cut that fits.
  let lo = 0;
  let hi = cuts.length - 1;
  if (!(await fits(keep(cuts[hi]!)))) return keep(cuts[hi]!);
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (await fits(keep(cuts[mid]!))) hi = mid;
    else lo = mid + 1;
  }
  return keep(cuts[lo]!);
}

/**
 * A context-too-long error names the conversation (the internal param `messages`; each surface gives its own
 * name for it when it answers, server/http/errors.ts), whichever engine raised it.
 */
export function nameInputParam(err: unknown): unknown {
  if (!(err instanceof AppError) || err.code !== "context_length_exceeded" || err.param === "messages") return err;
  return new AppError(err.kind, err.message, { code: err.code, param: "messages", details: err.details, retryAfter: err.retryAfter, cause: err });
}
