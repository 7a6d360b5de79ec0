// The Messages surface's reasoning: the model name picks the mode, and `thinking` overrides it.
import type { ReasoningRequest } from "../../core/inference.js";
import { DEFAULT_EFFORT, EFFORT_BUDGETS } from "../../pipeline/reasoning-policy.js";

/**
 * Messages surface: the model name picks the mode (haiku → fast; opus → the largest budget; sonnet, svc and
 * any other name → thinking), and an explicit `thinking` parameter overrides it.
 */
export function reasoningForMessages(
  model: string,
  thinking: { type: "enabled"; budget_tokens: number } | { type: "disabled" } | { type: string } | undefined,
): ReasoningRequest {
  if (thinking?.type === "disabled") return { mode: "fast", budgetTokens: 0, effort: "disabled" };
  if (thinking?.type === "enabled" && "budget_tokens" in thinking)
    return { mode: "thinking", budgetTokens: thinking.budget_tokens, effort: `enabled:${thinking.budget_tokens}` };
  const name = model.toLowerCase();
  if (name.includes("haiku")) return { mode: "fast", budgetTokens: 0, effort: "haiku" };
  if (name.includes("opus")) return { mode: "thinking", budgetTokens: EFFORT_BUDGETS.max, effort: "opus", steerWithin: EFFORT_BUDGETS.max };
  if (name.includes("sonnet")) return { mode: "thinking", budgetTokens: EFFORT_BUDGETS.medium, effort: "sonnet", steerWithin: EFFORT_BUDGETS.medium };
  return { mode: "thinking", budgetTokens: EFFORT_BUDGETS.medium, effort: DEFAULT_EFFORT, steerWithin: EFFORT_BUDGETS.medium };
}
