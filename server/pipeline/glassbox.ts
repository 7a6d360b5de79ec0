// Glassbox: how sure the model was of its answer, from the probabilities of the tokens it sampled, and what
// the server does with that (finish low_confidence, abstain, or refuse in strict mode). docs/api.md, "Glassbox".
import type { InferenceRequest, InferenceResult, StopReason, Trace, WeakSpan } from "../core/inference.js";
import type { ScoredToken } from "../engine/types.js";

/** Tokens per weak span: long enough to be a phrase, short enough to point at one. */
export const SPAN_TOKENS = 4;
/** Weak spans reported, weakest first. */
export const MAX_SPANS = 3;
/** Strict refusal mode refuses below this confidence when the caller set no glassbox threshold. */
export const STRICT_REFUSAL_BAR = 0.5;

export interface ConfidenceScore {
  /** Geometric mean of the scored tokens' probabilities: exp(mean log p). Null when nothing was scored. */
  confidence: number | null;
  weakest: WeakSpan[];
  /** Tokens scored. */
  scored: number;
}

const round = (x: number) => Math.round(x * 10000) / 10000;

/**
 * The answer's confidence: the geometric mean of its tokens' probabilities (one unlikely token in ten
 * lowers it, unlike the product, which shrinks with length). The weakest spans are the windows of
 * SPAN_TOKENS tokens with the lowest geometric mean, not overlapping, weakest first.
 */
export function scoreConfidence(tokens: readonly ScoredToken[]): ConfidenceScore {
  if (tokens.length === 0) return { confidence: null, weakest: [], scored: 0 };
  let sum = 0;
  for (const t of tokens) sum += t.logprob;
  const confidence = round(Math.exp(sum / tokens.length));
  const width = Math.min(SPAN_TOKENS, tokens.length);
  const windows: Array<{ start: number; mean: number }> = [];
  let window = 0;
  for (let i = 0; i < tokens.length; i++) {
    window += tokens[i]!.logprob;
    if (i >= width) window -= tokens[i - width]!.logprob;
    if (i >= width - 1) windows.push({ start: i - width + 1, mean: window / width });
  }
  windows.sort((a, b) => a.mean - b.mean || a.start - b.start);
  const weakest: WeakSpan[] = [];
  const taken: number[] = [];
  for (const w of windows) {
    if (weakest.length >= MAX_SPANS) break;
    if (taken.some((s) => Math.abs(s - w.start) < width)) continue;
    taken.push(w.start);
    weakest.push({
      text: tokens.slice(w.start, w.start + width).map((t) => t.text).join(""),
      confidence: round(Math.exp(w.mean)),
      token_offset: w.start,
      tokens: width,
    });
  }
  return { confidence, weakest, scored: tokens.length };
}

/** Whether the answer's probabilities are needed: glassbox confidence, or strict refusal mode. */
export function wantsConfidence(request: InferenceRequest): boolean {
  return (request.glassbox !== undefined && request.glassbox.confidence !== false) || request.refusalMode === "strict";
}

/** Whether a stream must hold the answer back until its confidence is known (it may be withheld). */
export function holdsAnswerBack(request: InferenceRequest): boolean {
  return (request.glassbox?.abstainBelow !== undefined && request.glassbox.confidence !== false) || request.refusalMode === "strict";
}

export interface Judgement {
  stopReason: StopReason;
  /** The answer is withheld: abstained (glassbox) or refused (strict refusal mode). */
  withheld: boolean;
  refusal: string | null;
  score: ConfidenceScore;
}

/**
 * What happens to an answer with this confidence. Below abstain_below: abstained, the answer withheld.
 * Below the threshold: finish low_confidence (unless the output was cut by max_tokens, which says more).
 * Strict refusal mode refuses instead of answering below its bar (the threshold, or 0.5).
 */
export function judgeAnswer(request: InferenceRequest, modelStop: StopReason, scored: readonly ScoredToken[] | undefined): Judgement {
  const score = wantsConfidence(request) && scored ? scoreConfidence(scored) : { confidence: null, weakest: [], scored: 0 };
  const c = score.confidence;
  const glassbox = request.glassbox;
  const scoring = glassbox !== undefined && glassbox.confidence !== false;
  if (c === null) return { stopReason: modelStop, withheld: false, refusal: null, score };
  if (scoring && glassbox.abstainBelow !== undefined && c < glassbox.abstainBelow)
    return { stopReason: "abstained", withheld: true, refusal: null, score };
  const low = scoring && glassbox.threshold !== undefined && c < glassbox.threshold && modelStop !== "max_tokens";
  const stopReason = low ? "low_confidence" : modelStop;
  if (request.refusalMode === "strict") {
    const bar = glassbox?.threshold ?? STRICT_REFUSAL_BAR;
    if (c < bar)
      return {
        stopReason,
        withheld: true,
        refusal: `I am not confident enough to answer this reliably (confidence ${c.toFixed(2)}, below ${bar.toFixed(2)}), so I will not guess.`,
        score,
      };
  }
  return { stopReason, withheld: false, refusal: null, score };
}

export function buildTrace(request: InferenceRequest, result: Omit<InferenceResult, "trace">, modelStop: StopReason, judgement: Judgement): Trace {
  const scoring = request.glassbox?.confidence !== false;
  return {
    confidence: scoring ? judgement.score.confidence : null,
    confidence_method: scoring && judgement.score.confidence !== null ? "geometric_mean" : null,
    scored_tokens: scoring ? judgement.score.scored : 0,
    weakest_spans: scoring ? judgement.score.weakest : [],
    mode: result.mode,
    effort: request.reasoning.effort,
    reasoning_budget: result.complexity.reasoning_budget,
    reasoning_tokens: result.usage.reasoningTokens,
    cached_tokens: result.usage.cachedTokens,
    stop_reason: result.stopReason,
    model_stop_reason: modelStop,
    threshold: request.glassbox?.threshold ?? null,
    abstain_below: request.glassbox?.abstainBelow ?? null,
    refusal_mode: request.refusalMode ?? "soft",
    refusal: judgement.refusal,
    session_id: request.sessionId ?? null,
  };
}
