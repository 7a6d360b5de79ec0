// How a reasoning effort becomes a mode and a reasoning-token budget. One table for every surface; each
// surface turns its own parameters into an effort or a budget (the Messages surface: surfaces/messages/reasoning.ts).
import type { ReasoningRequest } from "../core/inference.js";

/** Reasoning-token budgets per effort (docs/api.md, "Reasoning"). */
export const EFFORT_BUDGETS = {
  low: 1024,
  medium: 4096,
  high: 16384,
  xhigh: 32768,
  max: 65536,
} as const;

export const DEFAULT_EFFORT = "medium";

/**
 * An effort label: none and minimal give fast; low brief thinking;
 * medium thinking; high, xhigh and max larger budgets; anything else falls back to thinking (never an error).
 * `maxReasoningTokens` caps the budget; a cap of 0 means no reasoning, i.e. fast.
 */
export function reasoningForEffort(effort: string | undefined | null, maxReasoningTokens?: number): ReasoningRequest {
  const label = effort ?? DEFAULT_EFFORT;
  let budget: number;
  if (label === "none" || label === "minimal") return { mode: "fast", budgetTokens: 0, effort: label };
  if (Object.hasOwn(EFFORT_BUDGETS, label)) budget = EFFORT_BUDGETS[label as keyof typeof EFFORT_BUDGETS];
  else budget = EFFORT_BUDGETS.medium;
  return capped({ mode: "thinking", budgetTokens: budget, effort: label, steerWithin: budget }, maxReasoningTokens);
}

function capped(reasoning: ReasoningRequest, maxReasoningTokens: number | undefined): ReasoningRequest {
  if (maxReasoningTokens === undefined) return reasoning;
  if (maxReasoningTokens === 0) return { mode: "fast", budgetTokens: 0, effort: reasoning.effort };
  // The steered budget is capped again by budgetTokens, so max_reasoning_tokens stays a hard cap.
  return { ...reasoning, budgetTokens: Math.min(reasoning.budgetTokens, maxReasoningTokens) };
}
