// A pass over JSON text as it arrives, before it is parsed, for what parsing and every walk after it would
// pay for by the item rather than by the byte: how deep the text nests, and how many values (array items
// and object members) it holds. It reads the UTF-8 bytes chunk by chunk as they are received (the
// characters it looks for are ASCII, and no byte of a multi-byte character is), so its cost is spread over
// the body's arrival in slices of one network chunk, a body it refuses is never put together nor decoded,
// and it stops looking at the first limit passed: a body of a million empty items costs what reading its
// bytes costs. Long strings are skipped with indexOf (memchr speed). Text that is not valid JSON passes;
// JSON.parse says why.

export interface JsonTextLimits {
  /** Levels of arrays and objects. */
  maxDepth: number;
  /** Array items and object members, all levels together. */
  maxValues: number;
}

export interface JsonTextProblem {
  limit: "depth" | "values";
  /** Where it was passed: the path of its first few levels ("input[0].content"; "" for the body itself). */
  where: string;
}

/** What the pass reads: a Buffer (a chunk as received). */
export interface JsonBytes extends Uint8Array {
  indexOf(value: number, byteOffset?: number): number;
  toString(encoding?: "utf8", start?: number, end?: number): string;
}

/** Path segments kept for the answer: enough to name the field ("messages[1].content[0].input"). */
const NAMED_LEVELS = 6;
/** Bytes of a key kept for naming it. */
const MAX_KEY_BYTES = 256;
/** Bytes looked at one by one before indexOf takes over (a call of Buffer's indexOf costs more than a short string). */
const SHORT = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** The position of the next quote in `bytes` at or after `from`, or -1. */
function nextQuote(bytes: JsonBytes, from: number): number {
  const stop = Math.min(bytes.length, from + SHORT);
  for (let k = from; k < stop; k++) if (bytes[k] === QUOTE) return k;
  return stop < bytes.length ? bytes.indexOf(QUOTE, stop) : -1;
}

export class JsonTextScanner {
  // Per open level (1-based): whether it is an array, the index of its current item, the key of its current member.
  private readonly isArray: boolean[] = [false];
  private readonly index: number[] = [0];
  private readonly keys: string[] = [""];
  private depth = 0;
  private values = 0;
  private expectKey = false;
  /** Inside a string: and how many backslashes end what was read of it (odd: the next byte is escaped). */
  private inString = false;
  private backslashes = 0;
  /** The bytes of a key being read (a key worth naming only), across chunks. */
  private key: Buffer[] | null = null;
  private keyBytes = 0;
  /** A container just opened: its first value is counted at the next byte that is not a space. */
  private opened = false;
  private found: JsonTextProblem | null = null;

  constructor(private readonly limits: JsonTextLimits) {}

  /** The first limit passed so far, or null. */
  get problem(): JsonTextProblem | null {
    return this.found;
  }

  /** Reads the next chunk; returns the first limit passed (then reads nothing more), or null. */
  push(bytes: JsonBytes): JsonTextProblem | null {
    if (this.found) return this.found;
    const n = bytes.length;
    let i = 0;
    while (i < n) {
      if (this.inString) {
        const end = this.stringEnd(bytes, i);
        if (end === -1) return null; // the string goes on in the next chunk
        this.inString = false;
        if (this.key) {
          this.keep(bytes, i, end);
          if (this.depth < NAMED_LEVELS) this.keys[this.depth] = Buffer.concat(this.key).toString("utf8");
          this.key = null;
        }
        i = end + 1;
        continue;
      }
      const c = bytes[i]!;
      if (this.opened && !isSpace(c)) {
        this.opened = false;
        if (c !== CLOSE_ARRAY && c !== CLOSE_OBJECT && ++this.values > this.limits.maxValues) return this.fail("values", this.pathTo(this.depth));
      }
      if (c === QUOTE) {
        this.inString = true;
        this.backslashes = 0;
        if (this.expectKey) {
          this.expectKey = false;
          if (this.depth < NAMED_LEVELS) {
            this.key = [];
            this.keyBytes = 0;
          }
        }
      } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
        this.depth++;
        if (this.depth > this.limits.maxDepth) return this.fail("depth", this.pathTo(this.depth));
        this.isArray[this.depth] = c === OPEN_ARRAY;
        this.index[this.depth] = 0;
        this.keys[this.depth] = "";
        this.expectKey = c === OPEN_OBJECT;
        this.opened = true;
      } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
        if (this.depth > 0) this.depth--;
        this.expectKey = false;
      } else if (c === COMMA && this.depth > 0) {
        if (this.isArray[this.depth]) this.index[this.depth]!++;
        else this.expectKey = true;
        if (++this.values > this.limits.maxValues) return this.fail("values", this.pathTo(this.depth));
      }
      i++;
    }
    return null;
  }

  /** Where the string being read ends in `bytes` (from `from`), or -1 when it goes on past them. */
  private stringEnd(bytes: JsonBytes, from: number): number {
    let at = from;
    for (;;) {
      const end = nextQuote(bytes, at);
      if (end === -1) {
        // Carry how many backslashes end this chunk (all of it since `from`, or the run before its end).
        let k = bytes.length - 1;
        while (k >= at && bytes[k] === BACKSLASH) k--;
        this.backslashes = k < at ? this.backslashes + (bytes.length - at) : bytes.length - 1 - k;
        if (this.key) this.keep(bytes, from, bytes.length);
        return -1;
      }
      // A quote preceded by an odd number of backslashes is part of the string.
      let k = end - 1;
      while (k >= at && bytes[k] === BACKSLASH) k--;
      const run = k < at ? this.backslashes + (end - at) : end - 1 - k;
      if (run % 2 === 0) return end;
      this.backslashes = 0;
      at = end + 1;
    }
  }

  private keep(bytes: JsonBytes, from: number, to: number): void {
    if (!this.key || this.keyBytes >= MAX_KEY_BYTES) return;
    const slice = Buffer.from(bytes.subarray(from, Math.min(to, from + MAX_KEY_BYTES - this.keyBytes)));
    this.key.push(slice);
    this.keyBytes += slice.length;
  }

  private pathTo(level: number): string {
    let path = "";
    for (let l = 1; l < level && l < NAMED_LEVELS; l++) path += this.isArray[l] ? `[${this.index[l]}]` : path ? `.${this.keys[l]}` : this.keys[l];
    return path;
  }

  private fail(limit: JsonTextProblem["limit"], where: string): JsonTextProblem {
    this.found = { limit, where };
    return this.found;
  }
}

/** The first limit `bytes` (UTF-8 JSON text, whole) passes, or null. */
export function checkJsonText(bytes: JsonBytes, limits: JsonTextLimits): JsonTextProblem | null {
  return new JsonTextScanner(limits).push(bytes);
}
