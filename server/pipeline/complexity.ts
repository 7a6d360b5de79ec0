// svc_complexity: an estimate, made before generation from signals a developer can read, of how demanding a
// request is; it scales the reasoning budget within the cap reasoning_effort sets (docs/api.md, "Glassbox").
import type { Complexity, InferenceRequest } from "../core/inference.js";
import type { EngineOutcome } from "../engine/types.js";

/** How much reasoning each effort label asks for, 0..1 (labels from reasoning-policy.ts). */
const REASONING_ASKED: Record<string, number> = {
  none: 0,
  minimal: 0,
  disabled: 0,
  haiku: 0,
  low: 0.25,
  medium: 0.5,
  sonnet: 0.5,
  high: 0.75,
  xhigh: 0.9,
  max: 1,
  opus: 1,
};

/** The smallest share of the cap a request gets, however simple it looks. */
export const MIN_BUDGET_SHARE = 0.25;

export interface ComplexityPlan {
  score: number;
  level: Complexity["level"];
  /** The hard cap: the effort's budget, and max_reasoning_tokens (0 in fast mode). */
  cap: number;
  /** The budget that applies: cap × (0.25 + 0.75 × score), within the cap; the cap itself when not steered. */
  budget: number;
  steered: boolean;
  estimatedPromptTokens: number;
}

/**
 * Score = 0.4 × prompt size (log10(tokens + 1) / 5, capped at 1) + 0.2 if tools are offered + 0.15 for
 * structured output + 0.25 × the reasoning asked for (none 0 … medium 0.5 … max 1).
 */
export function planComplexity(request: InferenceRequest, estimatedPromptTokens: number): ComplexityPlan {
  const size = Math.min(1, Math.log10(Math.max(0, estimatedPromptTokens) + 1) / 5);
  const effort = request.reasoning.effort;
  const asked = REASONING_ASKED[effort] ?? (effort.startsWith("enabled:") ? 0.5 : 0.5);
  const raw = 0.4 * size + (request.tools.length > 0 ? 0.2 : 0) + (request.output.type !== "text" ? 0.15 : 0) + 0.25 * asked;
  const score = Math.round(Math.min(1, raw) * 1000) / 1000;
  const thinking = request.reasoning.mode === "thinking";
  const cap = thinking ? request.reasoning.budgetTokens : 0;
  const within = request.reasoning.steerWithin;
  const steered = thinking && within !== undefined;
  const budget = steered ? Math.min(cap, Math.max(1, Math.round(within * (MIN_BUDGET_SHARE + (1 - MIN_BUDGET_SHARE) * score)))) : cap;
  return { score, level: score < 0.34 ? "low" : score < 0.67 ? "medium" : "high", cap, budget, steered, estimatedPromptTokens };
}

export function assessComplexity(request: InferenceRequest, outcome: EngineOutcome, plan: ComplexityPlan): Complexity {
  return {
    score: plan.score,
    level: plan.level,
    mode: outcome.mode,
    effort: request.reasoning.effort,
    reasoning_cap: plan.cap,
    reasoning_budget: plan.budget,
    reasoning_tokens: outcome.usage.reasoningTokens,
    prompt_tokens: outcome.usage.promptTokens,
    tools: request.tools.length,
    structured_output: request.output.type !== "text",
  };
}
