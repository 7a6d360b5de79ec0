// Glassbox's pure parts: confidence and weak spans, the judgement (thresholds, abstention, strict refusal),
// undoing the temperature in reported probabilities, the steered reasoning budget, and session affinity.
import { describe, expect, it } from "vitest";
import type { InferenceRequest } from "../../server/core/inference.js";
import { pickSlot } from "../../server/engine/sequence-pool.js";
import { scoreToken } from "../../server/engine/token-probabilities.js";
import { planComplexity } from "../../server/pipeline/complexity.js";
import { judgeAnswer, scoreConfidence } from "../../server/pipeline/glassbox.js";
import { reasoningForEffort } from "../../server/pipeline/reasoning-policy.js";

const request = (extra: Partial<InferenceRequest> = {}): InferenceRequest => ({
  surface: "chat",
  messages: [{ role: "user", content: [{ type: "text", text: "Hi" }] }],
  tools: [],
  toolChoice: { type: "auto" },
  output: { type: "text" },
  reasoning: reasoningForEffort("medium"),
  stopSequences: [],
  sampling: {},
  ...extra,
});
const tokens = (...ps: number[]) => ps.map((p, i) => ({ text: `t${i}`, logprob: Math.log(p) }));

describe("scoreConfidence", () => {
  it("is the geometric mean of the token probabilities, with the weakest window first", () => {
    const ps = [0.9, 0.9, 0.9, 0.95, 0.1, 0.2, 0.3, 0.9, 0.9];
    const score = scoreConfidence(tokens(...ps));
    expect(score.confidence).toBeCloseTo(Math.exp(ps.reduce((s, p) => s + Math.log(p), 0) / ps.length), 4);
    expect(score.scored).toBe(9);
    expect(score.weakest[0]).toMatchObject({ text: "t4t5t6t7", token_offset: 4, tokens: 4 });
    expect(score.weakest[0]!.confidence).toBeCloseTo(Math.exp((Math.log(0.1) + Math.log(0.2) + Math.log(0.3) + Math.log(0.9)) / 4), 4);
    // Spans do not overlap.
    for (const [i, a] of score.weakest.entries())
      for (const b of score.weakest.slice(i + 1)) expect(Math.abs(a.token_offset - b.token_offset)).toBeGreaterThanOrEqual(4);
  });

  it("is null when no answer token was scored", () => {
    expect(scoreConfidence([])).toEqual({ confidence: null, weakest: [], scored: 0 });
  });
});

describe("judgeAnswer", () => {
  const half = tokens(0.5, 0.5, 0.5);
  it("keeps the model's finish above the threshold, low_confidence below it, abstained below the cutoff", () => {
    expect(judgeAnswer(request({ glassbox: { threshold: 0.4 } }), "end_turn", half).stopReason).toBe("end_turn");
    expect(judgeAnswer(request({ glassbox: { threshold: 0.6 } }), "end_turn", half)).toMatchObject({ stopReason: "low_confidence", withheld: false });
    expect(judgeAnswer(request({ glassbox: { threshold: 0.9, abstainBelow: 0.6 } }), "end_turn", half)).toMatchObject({ stopReason: "abstained", withheld: true });
    // A cut answer says `length`, not low_confidence.
    expect(judgeAnswer(request({ glassbox: { threshold: 0.6 } }), "max_tokens", half).stopReason).toBe("max_tokens");
    // Confidence off: nothing is judged.
    expect(judgeAnswer(request({ glassbox: { confidence: false } }), "end_turn", half).score.confidence).toBeNull();
  });

  it("strict refusal mode refuses below its bar (the threshold, else 0.5); soft never does", () => {
    expect(judgeAnswer(request({ refusalMode: "strict" }), "end_turn", tokens(0.4, 0.4)).refusal).toMatch(/below 0\.50/);
    expect(judgeAnswer(request({ refusalMode: "strict" }), "end_turn", tokens(0.6, 0.6)).refusal).toBeNull();
    expect(judgeAnswer(request({ refusalMode: "strict", glassbox: { threshold: 0.7 } }), "end_turn", tokens(0.6, 0.6))).toMatchObject({
      stopReason: "low_confidence",
      withheld: true,
    });
    expect(judgeAnswer(request({ refusalMode: "soft", glassbox: { threshold: 0.7 } }), "end_turn", tokens(0.1)).refusal).toBeNull();
  });
});

describe("scoreToken", () => {
  type Token = Parameters<typeof scoreToken>[0]["token"];
  const tok = (i: number) => i as unknown as Token;
  const logits = [2, 1, 0.5, -1];
  const softmax = (t: number) => {
    const e = logits.map((l) => Math.exp(l / t));
    const z = e.reduce((a, b) => a + b, 0);
    return new Map(e.map((x, i) => [tok(i), x / z] as [Token, number]).sort((a, b) => b[1] - a[1]));
  };
  it("undoes the temperature: the values are the temperature-1 distribution", () => {
    const truth = softmax(1);
    for (const t of [0.3, 0.7, 1.5]) {
      const s = scoreToken({ token: tok(2), probabilities: softmax(t) }, t, 3);
      expect(s.logprob).toBeCloseTo(Math.log(truth.get(tok(2))!), 6);
      expect(s.top.map((a) => a.token)).toEqual([0, 1, 2]);
      for (const a of s.top) expect(a.logprob).toBeCloseTo(Math.log(truth.get(a.token)!), 6);
    }
  });
  it("takes greedy probabilities as they are", () => {
    const p = softmax(1);
    expect(scoreToken({ token: tok(0), confidence: p.get(tok(0))!, probabilities: p }, 0, 2)).toEqual({
      logprob: Math.log(p.get(tok(0))!),
      top: [
        { token: 0, logprob: Math.log(p.get(tok(0))!) },
        { token: 1, logprob: Math.log(p.get(tok(1))!) },
      ],
    });
  });
});

describe("planComplexity", () => {
  it("scales the effort's budget by the score, within the cap", () => {
    const simple = planComplexity(request(), 10);
    const hard = planComplexity(
      request({ tools: [{ name: "f", parameters: {} }], output: { type: "json_object" } }),
      5000,
    );
    expect(simple.cap).toBe(4096);
    expect(hard.score).toBeGreaterThan(simple.score);
    expect(hard.budget).toBeGreaterThan(simple.budget);
    expect(simple.budget).toBeGreaterThanOrEqual(1024);
    expect(hard.budget).toBeLessThanOrEqual(4096);
    // max_reasoning_tokens stays a hard cap; an explicit budget is not steered; fast has none.
    expect(planComplexity(request({ reasoning: reasoningForEffort("high", 100) }), 10).budget).toBe(100);
    expect(planComplexity(request({ reasoning: { mode: "thinking", budgetTokens: 2048, effort: "enabled:2048" } }), 10)).toMatchObject({ budget: 2048, steered: false });
    expect(planComplexity(request({ reasoning: reasoningForEffort("none") }), 10).budget).toBe(0);
  });
});

describe("pickSlot with sessions", () => {
  it("gives a session its own sequence, and keeps others off it while another is free", () => {
    // Slot 0 holds session A (sharing a long system prompt with this request); slot 1 is empty.
    const slots = [
      { shared: 300, held: 330, lastUsed: 1, otherSession: true },
      { shared: 0, held: 0, lastUsed: 0 },
    ];
    expect(pickSlot(310, slots)).toBe(1);
    // Without sessions the shared prefix wins.
    expect(pickSlot(310, slots.map(({ otherSession: _, ...s }) => s))).toBe(0);
    // A's own next request goes back to slot 0.
    expect(pickSlot(360, [{ ...slots[0]!, otherSession: false, ownSession: true }, slots[1]!])).toBe(0);
    // Every free slot is another session's: the cheapest is reused.
    expect(pickSlot(310, [slots[0]!, { shared: 5, held: 50, lastUsed: 2, otherSession: true }])).toBe(0);
  });
});
