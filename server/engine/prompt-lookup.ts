// Prompt lookup (issue 44's first predictor): a guess at the next tokens of a sequence from its own context.
// A coding agent's answer repeats its prompt (an edited file is mostly the file it was given, a patch quotes
// the lines around it), so the tokens that followed the last occurrence of the sequence's most recent n-gram
// are often the ones the model writes next. The guess costs nothing to make; checking it is one batched step
// (the slot loop decodes the guessed tokens with the sequence's next one and keeps those the model agrees
// with), so a wrong guess costs only the extra tokens in that step.
//
// Pure: the tokens in, the draft out; the caller decides when a draft is worth checking.

export interface PromptLookupOptions {
  /** The longest n-gram matched (tried first: a longer match is a better guess). */
  maxNgram: number;
  /** The shortest n-gram matched. */
  minNgram: number;
  /** At most this many tokens are proposed. */
  maxDraft: number;
}

export const PROMPT_LOOKUP_DEFAULTS: Readonly<PromptLookupOptions> = Object.freeze({ maxNgram: 4, minNgram: 2, maxDraft: 8 });

/**
 * The tokens that followed the latest earlier occurrence of the context's last n tokens (n from maxNgram
 * down to minNgram, the first n that matches), at most maxDraft of them; empty when nothing matches.
 * `context` is everything the sequence holds and has sampled, its last token the one about to be fed; or,
 * with `next`, the sequence's tokens and then `next` (the token about to be fed), without a copy.
 */
export function promptLookupDraft(context: ArrayLike<number>, options: PromptLookupOptions = PROMPT_LOOKUP_DEFAULTS, next?: number): number[] {
  const held = context.length;
  const length = next === undefined ? held : held + 1;
  const at = next === undefined ? (i: number) => context[i]! : (i: number) => (i < held ? context[i]! : next);
  if (options.maxDraft <= 0) return [];
  for (let n = Math.min(options.maxNgram, length - 1); n >= options.minNgram; n--) {
    const tail = length - n;
    // The latest occurrence first: the nearest repetition is the likeliest to go on the same way.
    for (let start = tail - 1; start >= 0; start--) {
      let k = 0;
      while (k < n && at(start + k) === at(tail + k)) k++;
      if (k < n) continue;
      const from = start + n;
      const to = Math.min(from + options.maxDraft, length);
      const draft: number[] = [];
      for (let i = from; i < to; i++) draft.push(at(i));
      if (draft.length > 0) return draft;
    }
  }
  return [];
}
