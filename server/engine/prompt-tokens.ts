// Reading a rendered prompt into tokens with its cost bounded, so one request can never hold the server.
//
// llama.cpp tokenizes synchronously, and some inputs cost far more than their size: with the test model's
// tokenizer a run of one repeated character is quadratic (256 KB of "x" took 6 s, 1 MB 73 s, with every
// other request, /health included, waiting). So the plain text of the prompt is tokenized in pieces of a
// few KB, which bounds the cost of each call (a few ms); between pieces the event loop runs, the caller's
// deadline and abort signal are checked, and reading stops as soon as the prompt has more tokens than the
// context holds (the rest cannot fit anyway). Pieces end just before a space that follows a non-space,
// where every pre-tokenizer we know (GPT-2 and Llama 3 style regexes, Qwen's, SentencePiece's word
// pieces) starts a new token anyway, so ordinary text tokenizes as it would whole; only a run of several
// KB with no such boundary is cut mid-word (its text is unchanged, its tokens may differ at the cut).
//
// Self-contained on purpose: the same function serves an engine on the main thread (where the yields keep
// the server responsive) or in a worker (where the deadline and the early stop still bound the work).
import { setImmediate as nextTurn } from "node:timers/promises";
import { SpecialToken, SpecialTokensText, type LlamaText, type Token, type Tokenizer } from "node-llama-cpp";

/** Characters per tokenizer call: about 2 ms for the worst input measured (a run of one character). */
export const PIECE_CHARS = 4096;

export interface TokenizeLimits {
  /** Reading stops (PromptTooLongError) once the prompt has more tokens than this. */
  maxTokens: number;
  /** performance.now() value after which reading is abandoned (TokenizeDeadlineError). */
  deadline: number;
  /** Aborting stops the reading (the signal's reason is thrown). */
  signal?: AbortSignal;
  /** Piece size; tests make it small. */
  pieceChars?: number;
}

export class PromptTooLongError extends Error {
  override name = "PromptTooLongError";
  constructor(
    /** Tokens read when reading stopped: the prompt has at least this many. */
    readonly atLeastTokens: number,
    /** The whole prompt's tokens, extrapolated from the share of its text read so far. */
    readonly estimatedTokens = atLeastTokens,
  ) {
    super(`The prompt has more than ${atLeastTokens - 1} tokens.`);
  }
}

export class TokenizeDeadlineError extends Error {
  override name = "TokenizeDeadlineError";
  constructor(readonly elapsedMs: number) {
    super(`Reading the prompt did not finish in ${Math.round(elapsedMs)} ms.`);
  }
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09 || code === 0x0b || code === 0x0c;
}

/** Where the piece starting at `start` ends (exclusive): at most `size` characters on. */
export function pieceEnd(text: string, start: number, size: number): number {
  const limit = start + size;
  if (limit >= text.length) return text.length;
  // The last space that follows a non-space, in the second half of the window.
  for (let i = limit; i > start + (size >> 1); i--) if (text.charCodeAt(i) === 0x20 && !isSpace(text.charCodeAt(i - 1))) return i;
  // No boundary: cut, but never between the halves of a surrogate pair.
  const code = text.charCodeAt(limit - 1);
  return code >= 0xd800 && code <= 0xdbff ? limit - 1 : limit;
}

/**
 * The same tokens as LlamaText.tokenize (special-token parts whole, plain text with special tokens off and
 * no leading-space prefix), with the plain text read in pieces under the limits above.
 */
export async function tokenizeWithin(text: LlamaText, tokenizer: Tokenizer, limits: TokenizeLimits): Promise<Token[]> {
  const size = limits.pieceChars ?? PIECE_CHARS;
  const started = performance.now();
  const out: Token[] = [];
  let totalChars = 0;
  for (const value of text.values) if (typeof value === "string") totalChars += value.length;
  let charsRead = 0;
  const push = (tokens: readonly Token[]) => {
    for (const token of tokens) out.push(token);
    if (out.length > limits.maxTokens)
      throw new PromptTooLongError(out.length, Math.max(out.length, Math.ceil((out.length * totalChars) / Math.max(1, charsRead))));
  };
  const checkpoint = async () => {
    await nextTurn();
    limits.signal?.throwIfAborted();
    const now = performance.now();
    if (now > limits.deadline) throw new TokenizeDeadlineError(now - started);
  };
  let plain = "";
  const flushPlain = async () => {
    let start = 0;
    while (start < plain.length) {
      const end = pieceEnd(plain, start, size);
      charsRead += end - start;
      // As LlamaText.tokenize does for all plain text: no space prefix from the tokenizer.
      push(tokenizer(plain.slice(start, end), false, "trimLeadingSpace"));
      start = end;
      if (start < plain.length) await checkpoint();
    }
    plain = "";
  };
  for (const value of text.values) {
    if (value instanceof SpecialToken) {
      await flushPlain();
      push(value.tokenize(tokenizer));
    } else if (value instanceof SpecialTokensText) {
      const hasContent = out.length > 0 || plain.length > 0;
      await flushPlain();
      push(value.tokenize(tokenizer, hasContent));
    } else plain += value;
  }
  await flushPlain();
  return out;
}

/**
 * The most characters (UTF-16 units) one token of the vocabulary can stand for, from the GGUF token list (a
 * token's stored text is never shorter than the text it decodes to: byte-level BPE stores one character per
 * byte, SentencePiece "▁" for a space, byte tokens as "<0xNN>"). A prompt needs at least its text's length
 * divided by this many tokens, which bounds what can fit a context before anything is tokenized.
 */
export function longestTokenChars(vocabulary: readonly string[] | undefined, fallback = 1024): number {
  if (!vocabulary || vocabulary.length === 0) return fallback;
  let longest = 1;
  for (const token of vocabulary) if (token.length > longest) longest = token.length;
  return longest;
}
