import { describe, expect, it } from "vitest";
import { promptLookupDraft } from "../../server/engine/prompt-lookup.js";

describe("promptLookupDraft", () => {
  it("proposes what followed the latest earlier occurrence of the context's last n-gram", () => {
    //                 0  1  2  3  4  5  6  7  8  9 10
    const context = [1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 2, 3];
    // "2 3" occurred at 1 and 6: the latest (6) goes on with 7 8 2 3.
    expect(promptLookupDraft(context, { maxNgram: 2, minNgram: 2, maxDraft: 8 })).toEqual([7, 8, 2, 3]);
    expect(promptLookupDraft(context, { maxNgram: 2, minNgram: 2, maxDraft: 2 })).toEqual([7, 8]);
  });

  it("prefers the longest n-gram that matches", () => {
    const context = [5, 2, 3, 6, 1, 2, 3, 4, 0, 1, 2, 3];
    // "1 2 3" matches at 4 (then 4 0); "2 3" alone would take the latest, at 5 (then 4 0 too) or 1 (6 1...).
    expect(promptLookupDraft(context, { maxNgram: 3, minNgram: 1, maxDraft: 3 })).toEqual([4, 0, 1]);
    expect(promptLookupDraft([9, 2, 3, 6, 7, 1, 2, 3], { maxNgram: 3, minNgram: 2, maxDraft: 2 })).toEqual([6, 7]);
  });

  it("proposes nothing when no n-gram of the allowed sizes repeats", () => {
    expect(promptLookupDraft([1, 2, 3, 4, 5], { maxNgram: 3, minNgram: 2, maxDraft: 8 })).toEqual([]);
    expect(promptLookupDraft([1], { maxNgram: 3, minNgram: 1, maxDraft: 8 })).toEqual([]);
    expect(promptLookupDraft([], { maxNgram: 3, minNgram: 1, maxDraft: 8 })).toEqual([]);
  });

  it("follows a repeating pattern into its own tail", () => {
    expect(promptLookupDraft([7, 8, 7, 8, 7, 8], { maxNgram: 2, minNgram: 2, maxDraft: 5 })).toEqual([7, 8]);
  });
});

describe("promptLookupDraft with the next token apart", () => {
  it("reads the context and then the token about to be fed, as one sequence", () => {
    const held = [1, 2, 3, 4, 5, 9, 2];
    expect(promptLookupDraft(held, { maxNgram: 2, minNgram: 2, maxDraft: 8 }, 3)).toEqual(promptLookupDraft([...held, 3], { maxNgram: 2, minNgram: 2, maxDraft: 8 }));
    expect(promptLookupDraft(held, { maxNgram: 2, minNgram: 2, maxDraft: 8 }, 3)).toEqual([4, 5, 9, 2, 3]);
    expect(promptLookupDraft([], { maxNgram: 2, minNgram: 1, maxDraft: 8 }, 3)).toEqual([]);
    expect(promptLookupDraft(held, { maxNgram: 2, minNgram: 2, maxDraft: 0 }, 3)).toEqual([]);
  });
});
