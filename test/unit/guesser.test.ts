// Speculation's guessing policy for one evaluation (server/engine/speculation.ts): how far a step guesses, how
// that follows what verifications kept, and where a new evaluation starts (the loop's recent keep rate).
import { describe, expect, it } from "vitest";
import { guessLength, Guesser, KeepRateHistory, SPECULATION_FIRST_KEEP_RATE, SPECULATION_SOLO_AFTER, STEP_GUESSES_MAX } from "../../server/engine/speculation.js";
import type { Token } from "node-llama-cpp";

/** A context that repeats 0..29 twice, so that prompt lookup can guess 16 tokens after any of them. */
const context = [...Array.from({ length: 30 }, (_, i) => i), ...Array.from({ length: 10 }, (_, i) => i)];
const next = 10 as Token;

describe("Guesser", () => {
  it("a lone evaluation guesses at most STEP_GUESSES_MAX tokens a step: with its token, fewer than the 64 queries where llama.cpp's tiled attention (other sums) starts", () => {
    // 0..199 twice: prompt lookup could continue for 190 tokens after the 10.
    const long = [...Array.from({ length: 200 }, (_, i) => i), ...Array.from({ length: 10 }, (_, i) => i)];
    const guesser = new Guesser();
    let longest = 0;
    for (let step = 0; step < 12; step++) {
      const guess = guesser.guess(long, next, 1000, 1) as Token[];
      longest = Math.max(longest, guess.length);
      guesser.checked(guess.length, guess.length);
    }
    expect(STEP_GUESSES_MAX).toBe(62);
    expect(longest).toBe(STEP_GUESSES_MAX);
  });

  it("with several evaluations on the loop, starts with one guess and guesses further as verifications keep them", () => {
    const guesser = new Guesser();
    const lengths: number[] = [];
    for (let step = 0; step < 8; step++) {
      const guess = guesser.guess(context, next, 1000, 4) as Token[];
      lengths.push(guess.length);
      guesser.checked(guess.length, guess.length);
    }
    expect(lengths[0]).toBe(guessLength(SPECULATION_FIRST_KEEP_RATE, 4));
    expect(lengths[0]).toBe(1);
    expect(lengths).toEqual([...lengths].sort((a, b) => a - b));
    expect(lengths.at(-1)).toBe(16);
  });

  it("a new evaluation starts where the loop's last ones ended: all their guesses kept, it guesses 16 at once", () => {
    const history = new KeepRateHistory();
    expect(history.first).toBe(SPECULATION_FIRST_KEEP_RATE);
    const earlier = new Guesser(null, 0, [], history);
    for (let step = 0; step < 30; step++) {
      const guess = earlier.guess(context, next, 1000, 4) as Token[];
      earlier.checked(guess.length, guess.length);
    }
    expect(history.first).toBeGreaterThan(0.99);
    const later = new Guesser(null, 1, [], history);
    expect((later.guess(context, next, 1000, 4) as Token[]).length).toBe(16);
    // One step whose guesses are all refused brings its own rate down at once: it stops guessing for a while.
    later.checked(16, 0);
    expect(later.keepRate).toBeLessThan(0.75);
    expect((later.guess(context, next, 1000, 4) as Token[]).length).toBe(0);
  });

  it("never starts below the first keep rate, however often the loop's guesses were refused", () => {
    const history = new KeepRateHistory();
    for (let i = 0; i < 50; i++) history.record(0);
    expect(history.first).toBe(SPECULATION_FIRST_KEEP_RATE);
    expect(new Guesser(null, 0, [], history).keepRate).toBe(SPECULATION_FIRST_KEEP_RATE);
  });
});

describe("Guesser.declined", () => {
  it("lets a low estimate drift back up to where evaluations start, and leaves a higher one where it is", () => {
    const low = new Guesser();
    low.checked(16, 0);
    const fallen = low.keepRate;
    low.declined();
    expect(low.keepRate).toBeGreaterThan(fallen);
    for (let i = 0; i < 500; i++) low.declined();
    expect(low.keepRate).toBeCloseTo(SPECULATION_FIRST_KEEP_RATE, 6);
    expect(low.keepRate).toBeLessThanOrEqual(SPECULATION_FIRST_KEEP_RATE);

    const high = new Guesser();
    high.checked(4, 4);
    const kept = high.keepRate;
    expect(kept).toBeGreaterThan(SPECULATION_FIRST_KEEP_RATE);
    for (let i = 0; i < 10; i++) high.declined();
    expect(high.keepRate).toBe(kept);
  });
});

describe("Guesser.droppedByPrice", () => {
  it("a draft model is not asked for 2, then 4, 8 ... tokens after lone steps that dropped all its guesses, until a step checks them; prompt lookup, and a draft model sharing its steps, keep guessing", async () => {
    let asked = 0;
    const drafts = new Guesser({ draft: async () => (asked++, [1 as Token]) });
    const askedAt: number[] = [];
    for (let token = 0; token < 40; token++) {
      const before = asked;
      await drafts.guess(context, next, 1000, 1);
      if (asked > before) {
        askedAt.push(token);
        drafts.droppedByPrice(true);
      }
    }
    expect(askedAt).toEqual([0, 3, 8, 17, 34]);
    // After a step that checks its guesses, the next drop waits 2 tokens again, not 64.
    for (let token = 40; token <= 67; token++) await drafts.guess(context, next, 1000, 1);
    expect(asked).toBe(6);
    drafts.checked(1, 1);
    await drafts.guess(context, next, 1000, 1);
    expect(asked).toBe(7);
    drafts.droppedByPrice(true);
    for (let token = 0; token < 3; token++) await drafts.guess(context, next, 1000, 1);
    expect(asked).toBe(8);

    const lookup = new Guesser();
    for (let token = 0; token < 5; token++) {
      expect((lookup.guess(context, next, 1000, 1) as Token[]).length).toBeGreaterThan(0);
      lookup.droppedByPrice(true);
    }
    // Nor a draft model that shared the step with other sequences: asked at every token.
    const shared = new Guesser({ draft: async () => (asked++, [1 as Token]) });
    asked = 0;
    for (let token = 0; token < 5; token++) {
      await shared.guess(context, next, 1000, 4);
      shared.droppedByPrice(false);
    }
    expect(asked).toBe(5);
  });
});

describe("Guesser.wouldGuessAfterRun", () => {
  it("reads a solo run's context as the sequence's tokens, the run's feed and the tokens sampled before the last", () => {
    // The sequence holds 0..29 and 0..5; the run was fed 6 and sampled 7, 8, 9: after 9 (at "8 9") the
    // lookup guesses 10, 11, ...
    const held = [...Array.from({ length: 30 }, (_, i) => i), 0, 1, 2, 3, 4, 5] as Token[];
    expect(new Guesser().wouldGuessAfterRun(held, [6 as Token], [7, 8, 9] as Token[])).toBe(true);
    // Sampled tokens that never came before: nothing to guess from.
    expect(new Guesser().wouldGuessAfterRun(held, [6 as Token], [7, 8, 99] as Token[])).toBe(false);
    expect(new Guesser().wouldGuessAfterRun(held, [6 as Token], [])).toBe(false);
  });
});

describe("Guesser.settled", () => {
  it("lets a solo run start only after SPECULATION_SOLO_AFTER tokens in a row had no guess, counting a run's tokens too", () => {
    const guesser = new Guesser();
    // An evaluation starts unsettled: an answer that repeats its prompt finds its first guess within a token or two.
    expect(guesser.settled).toBe(false);
    const nothing = 99 as Token;
    for (let i = 0; i < SPECULATION_SOLO_AFTER - 1; i++) expect(guesser.guess(context, nothing, 1000, 1)).toEqual([]);
    expect(guesser.settled).toBe(false);
    expect(guesser.guess(context, nothing, 1000, 1)).toEqual([]);
    expect(guesser.settled).toBe(true);
    // A guess found unsettles it again, whatever the verification then keeps.
    expect((guesser.guess(context, next, 1000, 1) as Token[]).length).toBeGreaterThan(0);
    expect(guesser.settled).toBe(false);
    // All refused: the back-off waits 2 tokens, which count as tokens with no guess; so do a solo run's (passed).
    guesser.checked(16, 0);
    expect(guesser.guess(context, next, 1000, 1)).toEqual([]);
    expect(guesser.guess(context, next, 1000, 1)).toEqual([]);
    for (let i = 2; i < SPECULATION_SOLO_AFTER - 1; i++) guesser.passed();
    expect(guesser.settled).toBe(false);
    guesser.passed();
    expect(guesser.settled).toBe(true);
  });
});
