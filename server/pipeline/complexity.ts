// svc_complexity: a cheap, deterministic description of how demanding a request was (docs/api.md).
import type { Complexity, InferenceRequest } from "../core/inference.js";
import type { EngineOutcome } from "../engine/types.js";

export function assessComplexity(request: InferenceRequest, outcome: EngineOutcome): Complexity {
  const promptTokens = outcome.usage.promptTokens;
  const structured = request.output.type !== "text";
  const budget = outcome.mode === "thinking" ? request.reasoning.budgetTokens : 0;
  // Prompt size on a log scale (1 at ~100k tokens), tools, structured output, and how much of the
  // reasoning budget was used.
  const size = Math.min(1, Math.log10(promptTokens + 1) / 5);
  const reasoningUse = budget > 0 ? Math.min(1, outcome.usage.reasoningTokens / budget) : 0;
  const raw = 0.4 * size + (request.tools.length > 0 ? 0.2 : 0) + (structured ? 0.1 : 0) + 0.3 * reasoningUse;
  const score = Math.round(Math.min(1, raw) * 1000) / 1000;
  return {
    score,
    level: score < 0.34 ? "low" : score < 0.67 ? "medium" : "high",
    mode: outcome.mode,
    effort: request.reasoning.effort,
    reasoning_budget: budget,
    reasoning_tokens: outcome.usage.reasoningTokens,
    prompt_tokens: promptTokens,
    tools: request.tools.length,
    structured_output: structured,
  };
}
