import { describe, expect, it } from "vitest";
import { EFFORT_BUDGETS, reasoningForEffort } from "../../server/pipeline/reasoning-policy.js";
import { reasoningForMessages } from "../../server/surfaces/messages/reasoning.js";

describe("reasoning_effort → mode and budget", () => {
  it.each([
    ["none", "fast", 0],
    ["minimal", "fast", 0],
    ["low", "thinking", EFFORT_BUDGETS.low],
    ["medium", "thinking", EFFORT_BUDGETS.medium],
    ["high", "thinking", EFFORT_BUDGETS.high],
    ["xhigh", "thinking", EFFORT_BUDGETS.xhigh],
    ["max", "thinking", EFFORT_BUDGETS.max],
    ["turbo-deluxe", "thinking", EFFORT_BUDGETS.medium],
  ])("%s → %s with budget %i", (effort, mode, budget) => {
    // A thinking effort's budget is the cap svc_complexity steers within (steerWithin).
    expect(reasoningForEffort(effort)).toEqual({ mode, budgetTokens: budget, effort, ...(mode === "thinking" ? { steerWithin: budget } : {}) });
  });

  it("defaults to medium thinking", () => {
    expect(reasoningForEffort(undefined)).toEqual({ mode: "thinking", budgetTokens: EFFORT_BUDGETS.medium, effort: "medium", steerWithin: EFFORT_BUDGETS.medium });
  });

  it("orders budgets: low is brief, high and above are larger than medium", () => {
    expect(EFFORT_BUDGETS.low).toBeLessThan(EFFORT_BUDGETS.medium);
    expect(EFFORT_BUDGETS.high).toBeGreaterThan(EFFORT_BUDGETS.medium);
    expect(EFFORT_BUDGETS.xhigh).toBeGreaterThan(EFFORT_BUDGETS.high);
    expect(EFFORT_BUDGETS.max).toBeGreaterThan(EFFORT_BUDGETS.xhigh);
  });

  it("caps the budget by max_reasoning_tokens; 0 means fast", () => {
    expect(reasoningForEffort("high", 100).budgetTokens).toBe(100);
    expect(reasoningForEffort("low", 1_000_000).budgetTokens).toBe(EFFORT_BUDGETS.low);
    expect(reasoningForEffort("high", 0).mode).toBe("fast");
  });
});

describe("Messages model name → mode", () => {
  it("haiku is fast, sonnet thinks, opus thinks longest, others think", () => {
    expect(reasoningForMessages("claude-haiku-4-5", undefined).mode).toBe("fast");
    expect(reasoningForMessages("claude-sonnet-4-5", undefined)).toMatchObject({ mode: "thinking", budgetTokens: EFFORT_BUDGETS.medium });
    expect(reasoningForMessages("claude-opus-4-1", undefined)).toMatchObject({ mode: "thinking", budgetTokens: EFFORT_BUDGETS.max });
    expect(reasoningForMessages("svc", undefined).mode).toBe("thinking");
    expect(reasoningForMessages("whatever", undefined).mode).toBe("thinking");
  });

  it("the thinking parameter wins over the name", () => {
    expect(reasoningForMessages("claude-haiku-4-5", { type: "enabled", budget_tokens: 2048 })).toMatchObject({ mode: "thinking", budgetTokens: 2048 });
    expect(reasoningForMessages("claude-opus-4-1", { type: "disabled" }).mode).toBe("fast");
  });
});
