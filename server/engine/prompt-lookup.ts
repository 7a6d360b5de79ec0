// Prompt lookup (issue 44's first predictor): a guess at the next tokens of a sequence from its own context.
// A coding agent's answer repeats its prompt (an edited file is mostly the file it was given, a patch quotes
// the lines around it), so the tokens that followed the last occurrence of the sequence's most recent n-gram
// are often the ones the model writes next. The guess costs nothing to make; checking it is one batched step
// (the slot loop decodes the guessed tokens with the sequence's next one and keeps those the model agrees
// with), so a wrong guess costs only the extra tokens in that step.
//
// Pure: the tokens in, the draft out; the caller decides when a draft is worth checking. Also the text a JSON
// string would quote the request's texts as (jsonQuotedText), which the engine tokenizes for the lookup to read.

export interface PromptLookupOptions {
  /**
   * The longest n-gram matched (tried first: a longer match is a better guess). Long (32 by default) so that,
   * of two occurrences that both match the last few tokens, the one with more of the context behind it wins:
   * inside a JSON string that quotes the prompt, the escaped copy of the quoted text (jsonQuotedText) over
   * the raw one, whose continuation breaks at the first line break or quote.
   */
  maxNgram: number;
  /** The shortest n-gram matched. */
  minNgram: number;
  /**
   * At most this many tokens are proposed. 64 by default, all of SPECULATION_BATCH_GUESSES: a lone answer that
   * copies long stretches (a rewritten file) guesses as far as its keep rate and the step's measured price say
   * it pays; with 16, a lone echo answer's steps stopped at 17 tokens where a token of a larger step cost 0.95 ms
   * against a step's 5 ms (docs/performance.md section 35). Several answers share the batch's guesses.
   */
  maxDraft: number;
}

export const PROMPT_LOOKUP_DEFAULTS: Readonly<PromptLookupOptions> = Object.freeze({ maxNgram: 32, minNgram: 2, maxDraft: 64 });

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

/** Tokens read by position: an array, or several arrays read as one without copying them (joinTokens). */
export interface TokenRun {
  readonly length: number;
  at(index: number): number | undefined;
}

/** The parts read one after another as one run of tokens, without a copy (a sequence's tokens, then more). */
export function joinTokens(...parts: ReadonlyArray<readonly number[]>): TokenRun {
  const length = parts.reduce((n, p) => n + p.length, 0);
  return {
    length,
    at(index: number) {
      for (const part of parts) {
        if (index < part.length) return part[index];
        index -= part.length;
      }
      return undefined;
    },
  };
}

/**
 * Prompt lookup over a growing sequence without rescanning it (promptLookupDraft reads the whole context each
 * time: 85 µs at 1300 tokens, 3 ms at 40000, a coding agent's prompt). The end position of every bigram is
 * kept by its two tokens; a draft looks at the latest few occurrences of the last bigram, the longest match
 * (up to maxNgram tokens, checked against the tokens themselves) and then the latest winning, as
 * promptLookupDraft chooses. The context may lose its tail and grow again (refused guesses, a stop): entries
 * past its end are passed over and every candidate is checked against the tokens, so a stale entry is never
 * used; the draft is then what promptLookupDraft gives (minNgram at least 2).
 */
export class PromptLookupIndex {
  /** Bigram (a, b) -> the positions of b, ascending (duplicates possible after a tail was rewritten). */
  private readonly ends = new Map<number, number[]>();
  /** Positions below this have their bigram recorded. */
  private indexed = 1;

  /** Up to this many latest occurrences of the last bigram are compared for a longer match. */
  static readonly CANDIDATES = 64;

  /**
   * `prefix`: tokens looked up as if they came before the context (Chat's `prediction`, after the prompt's
   * last tokens so that the answer's first tokens find it; the request's texts as JSON quotes them); fixed
   * for the index's life. A draft taken from it ends at its end.
   */
  constructor(
    private readonly options: PromptLookupOptions = PROMPT_LOOKUP_DEFAULTS,
    private readonly prefix: readonly number[] = [],
  ) {
    if (options.minNgram < 2) throw new Error("PromptLookupIndex matches bigrams and longer (minNgram of 2 or more).");
  }

  /** The draft for `context` followed by `next` (as promptLookupDraft(context, options, next)), at most maxDraft tokens. */
  draft(context: TokenRun, next: number, maxDraft = this.options.maxDraft): number[] {
    if (maxDraft <= 0 || context.length < 1) return [];
    // Positions count the prefix first, then the context.
    const pre = this.prefix.length;
    const held = pre + context.length;
    const token = pre === 0 ? (i: number) => context.at(i)! : (i: number) => (i < pre ? this.prefix[i]! : context.at(i - pre)!);
    // Record the bigrams up to the context's end (a shortened context re-records from where it now ends).
    this.indexed = Math.min(this.indexed, held);
    for (let p = Math.max(1, this.indexed); p < held; p++) {
      const key = token(p - 1) * 0x100000 + token(p);
      const list = this.ends.get(key);
      if (list === undefined) this.ends.set(key, [p]);
      else if (list[list.length - 1] !== p) list.push(p);
    }
    this.indexed = Math.max(this.indexed, held);
    const length = held + 1;
    const at = (i: number) => (i < held ? token(i) : next);
    const last = token(held - 1);
    const candidates = this.ends.get(last * 0x100000 + next);
    if (candidates === undefined) return [];
    const longest = Math.min(this.options.maxNgram, length - 1);
    let best = -1;
    let bestLength = 0;
    let seen = 0;
    for (let c = candidates.length - 1; c >= 0 && seen < PromptLookupIndex.CANDIDATES; c--) {
      const end = candidates[c]!;
      // Occurrences before the tail's own bigram (which ends at `held`), still as recorded.
      if (end >= held || token(end - 1) !== last || token(end) !== next) continue;
      seen++;
      let n = 2;
      while (n < longest && end - n >= 0 && token(end - n) === at(held - n)) n++;
      if (n > bestLength) {
        best = end;
        bestLength = n;
        if (n === longest) break;
      }
    }
    if (best < 0 || bestLength < this.options.minNgram) return [];
    // A draft from the prefix ends where the prefix does: the sequence's start comes after it, not what follows.
    const to = Math.min(best + 1 + Math.min(maxDraft, this.options.maxDraft), best < pre ? pre : length);
    const out: number[] = [];
    for (let i = best + 1; i < to; i++) out.push(at(i));
    return out;
  }
}

/**
 * The request's texts as an answer that writes JSON quotes them inside its strings (a tool call's arguments,
 * structured output): as JSON.stringify writes them, escaped and in quotes. A coding agent's Write or
 * Edit call repeats a file the prompt holds as it is (a tool's result, a user's paste), with real line breaks
 * and quotes, where the call's arguments have `\n` and `\"`; prompt lookup matches tokens, so the raw copy
 * guesses at most to the end of a line. Guessing from this text too, a step's guesses go on across them.
 * The opening quote is kept: a string's first characters then match the copy that opens with them (three
 * tokens with the quote) over any other occurrence of two (the `gu` of a forced call's `"arguments"` just
 * before won the tie, as the latest), and a tokenizer reads the copy's start as it reads the answer's.
 * Only texts that JSON escapes at all (a line break, a quote, a backslash, a control character), the latest
 * first, at most `maxChars` characters together; in the order they came, one to a line.
 */
export function jsonQuotedText(texts: readonly string[], maxChars: number): string {
  const pieces: string[] = [];
  let chars = 0;
  for (let i = texts.length - 1; i >= 0 && chars < maxChars; i--) {
    const text = texts[i]!;
    // eslint-disable-next-line no-control-regex
    if (!/["\\\u0000-\u001f]/.test(text)) continue;
    const escaped = JSON.stringify(text);
    const piece = escaped.length <= maxChars - chars ? escaped : escaped.slice(escaped.length - (maxChars - chars));
    pieces.push(piece);
    chars += piece.length;
  }
  return pieces.reverse().join("\n");
}
