import { describe, expect, it } from "vitest";
import { joinTokens, jsonQuotedText, PROMPT_LOOKUP_DEFAULTS, PromptLookupIndex, promptLookupDraft } from "../../server/engine/prompt-lookup.js";

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

describe("PromptLookupIndex", () => {
  it("drafts what promptLookupDraft drafts, on random sequences as they grow and lose their tail", () => {
    let seed = 12345;
    const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    for (let run = 0; run < 40; run++) {
      const vocab = 3 + Math.floor(random() * 6);
      const options = { maxNgram: 4, minNgram: 2, maxDraft: 1 + Math.floor(random() * 8) };
      const index = new PromptLookupIndex(options);
      const context: number[] = [];
      for (let step = 0; step < 200; step++) {
        if (random() < 0.05 && context.length > 4) context.length -= 1 + Math.floor(random() * 4);
        const next = Math.floor(random() * vocab);
        expect(index.draft(context, next), `run ${run} step ${step}`).toEqual(promptLookupDraft(context, options, next));
        context.push(next);
      }
    }
  });

  it("drafts from parts joined without a copy as from the one array they make", () => {
    const held = [1, 2, 3, 4, 5, 9, 2, 3];
    const joined = joinTokens(held, [7, 8], [2]);
    expect(joined.length).toBe(11);
    expect([joined.at(0), joined.at(8), joined.at(10), joined.at(11)]).toEqual([1, 7, 2, undefined]);
    expect(new PromptLookupIndex().draft(joined, 3)).toEqual(new PromptLookupIndex().draft([...held, 7, 8, 2], 3));
    expect(new PromptLookupIndex().draft(joined, 3)).toEqual([7, 8, 2, 3]);
  });

  it("never drafts from a tail that was erased and written again with other tokens", () => {
    const index = new PromptLookupIndex({ maxNgram: 4, minNgram: 2, maxDraft: 4 });
    expect(index.draft([1, 2, 3, 4, 5, 6], 1)).toEqual([]);
    // The sequence lost "4 5 6" (refused guesses), then went on with "9 9 9 3".
    expect(index.draft([1, 2, 3], 9)).toEqual([]);
    // "3 4" was recorded where a 9 is now: passed over.
    expect(index.draft([1, 2, 3, 9, 9, 9, 3], 4)).toEqual([]);
    expect(index.draft([1, 2, 3, 9, 9, 9, 3, 4, 1], 2)).toEqual([3, 9, 9, 9]);
  });

  it("with a prefix (Chat's prediction after the prompt's last tokens): drafts from it as if it came before the sequence, the sequence's own occurrences first", () => {
    const options = { maxNgram: 4, minNgram: 2, maxDraft: 4 };
    // The prompt ends "7 8"; the prediction is "20 21 22 23 24 25".
    const index = new PromptLookupIndex(options, [7, 8, 20, 21, 22, 23, 24, 25]);
    // The answer's first token, 20, after the prompt's "7 8": the prediction's start follows.
    expect(index.draft([1, 2, 7, 8], 20)).toEqual([21, 22, 23, 24]);
    // The draft ends with the prediction: the sequence's start is not what follows it.
    expect(index.draft([1, 2, 7, 8, 20, 21], 22)).toEqual([23, 24, 25]);
    // Short of its end, as the same virtual sequence would: the prefix, then the sequence.
    const virtual = [7, 8, 20, 21, 22, 23, 24, 25, 1, 2, 7, 8, 20, 21];
    const short = { ...options, maxDraft: 2 };
    expect(new PromptLookupIndex(short, [7, 8, 20, 21, 22, 23, 24, 25]).draft(virtual.slice(8), 22)).toEqual(promptLookupDraft(virtual, short, 22));
    expect(new PromptLookupIndex(short, [7, 8, 20, 21, 22, 23, 24, 25]).draft(virtual.slice(8), 22)).toEqual([23, 24]);
  });

  it("refuses a minimum n-gram under 2 (it matches bigrams)", () => {
    expect(() => new PromptLookupIndex({ maxNgram: 3, minNgram: 1, maxDraft: 8 })).toThrow();
  });
});

describe("jsonQuotedText", () => {
  it("gives the texts JSON escapes as a JSON string writes them, in their quotes, one to a line", () => {
    expect(jsonQuotedText(["no escapes here", 'a "quote"', "two\nlines\\"], 1000)).toBe('"a \\"quote\\""\n"two\\nlines\\\\"');
    expect(jsonQuotedText(["tab\there", "bell\u0007"], 1000)).toBe('"tab\\there"\n"bell\\u0007"');
    expect(jsonQuotedText(["plain", "words"], 1000)).toBe("");
  });

  it("keeps the latest texts within maxChars, the latest whole and the one before it cut at its start", () => {
    const older = "first\nfile";
    const newer = "second\nfile";
    expect(jsonQuotedText([older, newer], 14)).toBe('"second\\nfile"');
    expect(jsonQuotedText([older, newer], 19)).toBe('file"\n"second\\nfile"');
  });
});

describe("prompt lookup inside a JSON string that quotes the prompt", () => {
  // Token ids stand for pieces: the file "a b\nc d\ne f" as the prompt holds it (newline 9), and as a JSON
  // string holds it (backslash 7, n 8).
  const raw = [1, 2, 9, 3, 4, 9, 5, 6];
  const escaped = [1, 2, 7, 8, 3, 4, 7, 8, 5, 6];
  it("guesses across the escaped line breaks from the escaped copy, where the raw copy stops at a line's end", () => {
    // The prompt: other tokens, the raw file, more; the answer so far: the string's first line and its escape.
    const prompt = [40, 41, ...raw, 42, 43];
    const answer = [30, 1, 2, 7, 8];
    const withoutCopy = new PromptLookupIndex(PROMPT_LOOKUP_DEFAULTS);
    // After "8 3" (n, c): nothing in the raw prompt (there a newline comes before c).
    expect(withoutCopy.draft([...prompt, ...answer], 3)).toEqual([]);
    // After "3 4" (c d): the raw copy, whose next token is a real newline.
    expect(withoutCopy.draft([...prompt, ...answer, 3], 4)).toEqual([9, 5, 6, 42, 43, 30, 1, 2, 7, 8, 3, 4]);
    const withCopy = new PromptLookupIndex(PROMPT_LOOKUP_DEFAULTS, escaped);
    expect(withCopy.draft([...prompt, ...answer], 3)).toEqual([4, 7, 8, 5, 6]);
    // Both copies match "c d"; the escaped one matches further back (the escape before it) and wins.
    expect(withCopy.draft([...prompt, ...answer, 3], 4)).toEqual([7, 8, 5, 6]);
  });

  it("starts the string from the copy in quotes, not from the latest two tokens that match (a forced call's \"arguments\")", () => {
    // Quote 50; the answer's fed opening ends `"arguments": {"content": "`: a 61, g 1, u 2, ments 70, then
    // colon 60 and the string's quote; the string's first two tokens are the file's a b (1 2).
    const prompt = [40, 41, ...raw, 42, 43];
    const answer = [50, 61, 1, 2, 70, 50, 60, 50, 1];
    const inQuotes = new PromptLookupIndex(PROMPT_LOOKUP_DEFAULTS, [50, ...escaped, 50]);
    expect(inQuotes.draft([...prompt, ...answer], 2)).toEqual([7, 8, 3, 4, 7, 8, 5, 6, 50]);
    // Without its quote the copy matches two tokens back, as "arguments" does later on: that one wins.
    const bare = new PromptLookupIndex(PROMPT_LOOKUP_DEFAULTS, escaped);
    expect(bare.draft([...prompt, ...answer], 2)[0]).toBe(70);
  });

  it("still takes the latest occurrence where two match as far back", () => {
    expect(promptLookupDraft([5, 1, 2, 3, 6, 1, 2, 3, 7, 1, 2], PROMPT_LOOKUP_DEFAULTS, 3)).toEqual([7, 1, 2, 3]);
  });
});
