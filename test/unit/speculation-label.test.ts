// The Server page's line on speculative decoding (renderer/src/labels.ts, issue 44): what /health's
// `speculation` becomes in the window's words, for each state it can be in, and nothing where it says nothing.
import { describe, expect, it } from "vitest";
import { speculationLabel, speculationModeLabel } from "../../renderer/src/labels.js";

const lookup = (draftedTokens: number, acceptedTokens: number, acceptanceRate: number | null = draftedTokens > 0 ? acceptedTokens / draftedTokens : null) => ({
  mode: "prompt-lookup",
  draftedTokens,
  acceptedTokens,
  acceptanceRate,
});

describe("speculationLabel", () => {
  it("says the rate of accepted drafts, with the count drafted", () => {
    expect(speculationLabel(lookup(1234, 901))).toBe("Prompt lookup, 73% of 1,234 drafted tokens accepted");
    expect(speculationLabel(lookup(1, 1))).toBe("Prompt lookup, 100% of 1 drafted token accepted");
    expect(speculationLabel(lookup(10, 0))).toBe("Prompt lookup, 0% of 10 drafted tokens accepted");
  });

  it("never rounds to 100% while some were rejected, nor to 0% while some were accepted", () => {
    expect(speculationLabel(lookup(1000, 999))).toBe("Prompt lookup, 99% of 1,000 drafted tokens accepted");
    expect(speculationLabel(lookup(1000, 1))).toBe("Prompt lookup, under 1% of 1,000 drafted tokens accepted");
  });

  it("says so before the first draft, and when it is off", () => {
    expect(speculationLabel(lookup(0, 0))).toBe("Prompt lookup, no drafts yet");
    expect(speculationLabel({ mode: "off", draftedTokens: 0, acceptedTokens: 0, acceptanceRate: null })).toBe("Off");
  });

  it("works out the rate where the server sent none", () => {
    expect(speculationLabel({ mode: "prompt-lookup", draftedTokens: 200, acceptedTokens: 50 })).toBe("Prompt lookup, 25% of 200 drafted tokens accepted");
  });

  it("says nothing without a model, for a model served upstream, or from a server that does not report it", () => {
    expect(speculationLabel(null)).toBeNull();
    expect(speculationLabel(undefined)).toBeNull();
  });

  it("names the draft model in draft-model mode", () => {
    expect(speculationLabel({ mode: "draft-model", draftModel: "Qwen2.5 0.5B", draftedTokens: 10, acceptedTokens: 6, acceptanceRate: 0.6 })).toBe("Draft model Qwen2.5 0.5B, 60% of 10 drafted tokens accepted");
    expect(speculationLabel({ mode: "draft-model", draftModel: "Qwen2.5 0.5B", draftedTokens: 0, acceptedTokens: 0, acceptanceRate: null })).toBe("Draft model Qwen2.5 0.5B, no drafts yet");
    expect(speculationModeLabel("draft-model")).toBe("Draft model");
  });

  it("names a mode it does not know yet by its own name", () => {
    expect(speculationLabel({ mode: "draft-model", draftedTokens: 4, acceptedTokens: 3, acceptanceRate: 0.75 })).toBe("Draft model, 75% of 4 drafted tokens accepted");
  });
});
