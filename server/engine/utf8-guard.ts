// Keeps grammar-constrained output valid UTF-8, so that what the grammar counted is what the text holds.
//
// llama.cpp's grammar matches code points, decoding each token's bytes leniently (src/llama-grammar.cpp,
// decode_utf8): inside a token it does not check that a lead byte is followed by continuation bytes, and
// across tokens it does not reject overlong forms (E0 82 80 passes as U+0080), surrogates (ED A0 80) or
// values above U+10FFFF (F4 90.., F5..FF). Byte-fallback tokens let a model write exactly those, and the
// text then holds replacement characters the grammar never counted: a string the grammar held to
// maxLength 20 came back with 23 characters, or failed its pattern.
//
// So in grammar phases every token that would make the bytes so far ill-formed is banned before sampling.
// Well-formed UTF-8 is a small automaton (the Unicode standard's table 3-7); its state after the tokens
// sampled so far says which bytes may come next. A token whose text is whole characters can only follow
// a finished character, and the grammar already rejects it in the middle of one (its first byte is not a
// continuation byte); the bans needed are those of the few tokens with partial or ill-formed bytes, per
// state, worked out once per model.
//
// The grammar never reaches a dead end for it: llama.cpp lets a token end in a partial character only when
// the code points it could complete to meet the grammar's ranges, and those ranges are exact once the first
// byte of a three- or four-byte form rules out the overlong ones (it raises them to U+0800 and U+10000);
// the one-byte tokens of byte-fallback and byte-level vocabularies then always leave a well-formed way on.
import type { LlamaModel, Token } from "node-llama-cpp";

/**
 * Where the automaton is: a character boundary, or inside a character with 1 to 3 bytes to go, the next
 * one within a range (the first continuation byte after E0, ED, F0 and F4 is narrower).
 */
export const enum Utf8State {
  Boundary = 0,
  /** 1, 2 or 3 continuation bytes (80..BF) to go. */
  Need1 = 1,
  Need2 = 2,
  Need3 = 3,
  /** After E0: A0..BF, then one more. */
  AfterE0 = 4,
  /** After ED: 80..9F (no surrogates), then one more. */
  AfterED = 5,
  /** After F0: 90..BF, then two more. */
  AfterF0 = 6,
  /** After F4: 80..8F (nothing above U+10FFFF), then two more. */
  AfterF4 = 7,
}
export const UTF8_STATES = 8;
/** Not a state: the bytes are ill-formed. */
export const UTF8_INVALID = -1;

/** The state after `byte` in `state`, or UTF8_INVALID. */
export function stepUtf8(state: Utf8State, byte: number): Utf8State | typeof UTF8_INVALID {
  const continuation = (lo: number, hi: number, next: Utf8State) => (byte >= lo && byte <= hi ? next : UTF8_INVALID);
  switch (state) {
    case Utf8State.Boundary:
      if (byte <= 0x7f) return Utf8State.Boundary;
      if (byte >= 0xc2 && byte <= 0xdf) return Utf8State.Need1;
      if (byte === 0xe0) return Utf8State.AfterE0;
      if (byte === 0xed) return Utf8State.AfterED;
      if (byte >= 0xe1 && byte <= 0xef) return Utf8State.Need2;
      if (byte === 0xf0) return Utf8State.AfterF0;
      if (byte >= 0xf1 && byte <= 0xf3) return Utf8State.Need3;
      if (byte === 0xf4) return Utf8State.AfterF4;
      return UTF8_INVALID;
    case Utf8State.Need1:
      return continuation(0x80, 0xbf, Utf8State.Boundary);
    case Utf8State.Need2:
      return continuation(0x80, 0xbf, Utf8State.Need1);
    case Utf8State.Need3:
      return continuation(0x80, 0xbf, Utf8State.Need2);
    case Utf8State.AfterE0:
      return continuation(0xa0, 0xbf, Utf8State.Need1);
    case Utf8State.AfterED:
      return continuation(0x80, 0x9f, Utf8State.Need1);
    case Utf8State.AfterF0:
      return continuation(0x90, 0xbf, Utf8State.Need2);
    case Utf8State.AfterF4:
      return continuation(0x80, 0x8f, Utf8State.Need2);
  }
}

/** The state after all of `bytes`, or UTF8_INVALID as soon as they go wrong. */
export function walkUtf8(state: Utf8State, bytes: Uint8Array): Utf8State | typeof UTF8_INVALID {
  let s: Utf8State | typeof UTF8_INVALID = state;
  for (const byte of bytes) {
    s = stepUtf8(s, byte);
    if (s === UTF8_INVALID) return s;
  }
  return s;
}

/** Where a token leads from each state (UTF8_INVALID where it may not follow). */
type Transitions = Int8Array;

/**
 * The bans of one vocabulary. Built from each token's bytes; a token whose bytes cannot be read exactly is
 * banned in every state of a grammar phase (none is, in the vocabularies llama.cpp reads with byte tokens).
 */
export class Utf8TokenGuard {
  private readonly bans: Token[][];
  private readonly transitions = new Map<Token, Transitions>();

  /**
   * `irregular`: the tokens whose bytes are not whole characters, with their bytes (null: unknown).
   * Every other token is whole characters: it may follow a boundary only, and leads back to one.
   */
  constructor(private readonly irregular: ReadonlyMap<Token, Uint8Array | null>) {
    this.bans = Array.from({ length: UTF8_STATES }, () => []);
    for (const [token, bytes] of irregular) {
      const row = new Int8Array(UTF8_STATES).fill(UTF8_INVALID);
      if (bytes !== null) for (let s = 0; s < UTF8_STATES; s++) row[s] = walkUtf8(s as Utf8State, bytes);
      this.transitions.set(token, row);
      for (let s = 0; s < UTF8_STATES; s++) if (row[s] === UTF8_INVALID) this.bans[s]!.push(token);
    }
  }

  /** The tokens that may not be sampled in `state` (beyond those the grammar rejects itself). */
  banned(state: Utf8State): readonly Token[] {
    return this.bans[state]!;
  }

  /** The state after `token` was sampled in `state` (a token the guard let through). */
  next(state: Utf8State, token: Token): Utf8State {
    const row = this.transitions.get(token);
    if (row === undefined) return Utf8State.Boundary;
    const s = row[state]!;
    return s === UTF8_INVALID ? Utf8State.Boundary : (s as Utf8State);
  }

  /** The guard of `model`'s vocabulary, worked out on first use (a pass over the vocabulary). */
  static for(model: LlamaModel): Utf8TokenGuard {
    let guard = guards.get(model);
    if (guard === undefined) {
      guard = new Utf8TokenGuard(irregularTokens(model));
      guards.set(model, guard);
    }
    return guard;
  }
}

const guards = new WeakMap<LlamaModel, Utf8TokenGuard>();

/**
 * The tokens of `model` whose piece (what llama.cpp's grammar decodes: the token's text with special tokens
 * written out) is not whole characters, with its bytes. The piece reaches JavaScript as a string with
 * U+FFFD for each ill-formed part, so those tokens' bytes are read from the vocabulary's own text (the
 * GGUF's tokenizer.ggml.tokens, which llama.cpp's token_to_piece starts from).
 */
export function irregularTokens(model: LlamaModel): Map<Token, Uint8Array | null> {
  const out = new Map<Token, Uint8Array | null>();
  const vocabulary = (model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: readonly string[] } } }).tokenizer?.ggml?.tokens ?? [];
  const decoder = new TextDecoder();
  for (let t = 0; t < vocabulary.length; t++) {
    const token = t as Token;
    const text = model.detokenize([token], true);
    if (!text.includes("\uFFFD")) continue;
    const bytes = pieceBytes(model, token, vocabulary[t]!);
    // Bytes read right decode to the same text (the piece may lose a leading space: SPM's prefix rule).
    const checks = bytes !== null && decoder.decode(bytes).trimStart() === text.trimStart();
    // A literal U+FFFD is a whole character.
    if (checks && walkUtf8(Utf8State.Boundary, bytes) === Utf8State.Boundary) continue;
    out.set(token, checks ? bytes : null);
  }
  return out;
}

/** A token's bytes as llama.cpp's token_to_piece writes them, from its vocabulary text; null if unsure. */
function pieceBytes(model: LlamaModel, token: Token, text: string): Uint8Array | null {
  const type = model.vocabularyType;
  const attributes = model.getTokenAttributes(token);
  if ((type === "spm" || type === "ugm") && attributes.byte) {
    const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(text);
    return m ? Uint8Array.of(parseInt(m[1]!, 16)) : null;
  }
  if (type === "bpe" && (attributes.normal || attributes.byte)) return byteLevelBytes(text);
  return null;
}

/** GPT-2's byte-level alphabet, reversed: each character of a byte-level BPE token stands for one byte. */
function byteLevelBytes(text: string): Uint8Array | null {
  const out: number[] = [];
  for (const ch of text) {
    const byte = BYTE_OF_CHAR.get(ch.codePointAt(0)!);
    if (byte === undefined) return null;
    out.push(byte);
  }
  return Uint8Array.from(out);
}

const BYTE_OF_CHAR: ReadonlyMap<number, number> = (() => {
  const map = new Map<number, number>();
  const direct = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    if (direct(b)) map.set(b, b);
    else map.set(256 + shifted++, b);
  }
  return map;
})();
