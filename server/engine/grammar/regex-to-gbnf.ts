// Why one file (over 400 lines): one translation, an ECMAScript regex subset to GBNF: the character-set
// algebra is the parser's alphabet, the parser builds the tree that the length fitting and the writer walk,
// and none of these steps has a user outside it (primitives.ts reads only JSON_RAW).
//
// A safe subset of ECMAScript regular expressions (`pattern`, as ajv runs them: `new RegExp(p, "u")`)
// turned into the content of a JSON string.
//
// Supported: literal characters, escapes (\d \D \w \W \s \S \t \n \r \v \f \0 \cX \xHH \uHHHH \u{H...}
// and escaped syntax characters), `.`, classes `[...]` / `[^...]` with ranges, groups `(...)`, `(?:...)`,
// `(?<name>...)`, alternation, and the quantifiers `? * + {n} {n,} {n,m}` (lazy or not).
// Anchors `^` / `$` only at the start / end of a top-level alternative.
// Not supported (UnsupportedSchemaError): lookarounds, \b \B, backreferences, \p{...}, anchors elsewhere.
//
// The grammar matches the whole string against the pattern, anchored or not: a string that matches the
// pattern as a whole also contains a match, so every string it allows passes the (searching) check.
// Each character is written raw where JSON allows it, else with its JSON escape; lone surrogates are
// never produced.

import { UnsupportedSchemaError } from "./errors.js";
import { MAX_CODE_POINT, alt, gbnfClass, gbnfLiteral, seq, type CodePointRange, type GbnfRules } from "./gbnf.js";

// ----- code point sets -------------------------------------------------------------------------

export type CharSet = CodePointRange[];

function normalizeSet(ranges: readonly CodePointRange[]): CharSet {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: Array<[number, number]> = [];
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1];
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return out;
}

function complement(set: CharSet): CharSet {
  const out: Array<[number, number]> = [];
  let next = 0;
  for (const [lo, hi] of set) {
    if (lo > next) out.push([next, lo - 1]);
    next = hi + 1;
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return out;
}

function intersect(a: CharSet, b: CharSet): CharSet {
  const out: Array<[number, number]> = [];
  for (const [alo, ahi] of a)
    for (const [blo, bhi] of b) {
      const lo = Math.max(alo, blo);
      const hi = Math.min(ahi, bhi);
      if (lo <= hi) out.push([lo, hi]);
    }
  return normalizeSet(out);
}

function contains(set: CharSet, cp: number): boolean {
  return set.some(([lo, hi]) => cp >= lo && cp <= hi);
}

const DIGIT: CharSet = [[0x30, 0x39]];
const WORD: CharSet = normalizeSet([[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]]);
const SPACE: CharSet = normalizeSet([
  [0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a],
  [0x2028, 0x2029], [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff],
]);
const LINE_TERMINATORS: CharSet = normalizeSet([[0x0a, 0x0a], [0x0d, 0x0d], [0x2028, 0x2029]]);

/** Code points JSON allows unescaped in a string, minus surrogates (which are not characters). */
export const JSON_RAW: CharSet = [[0x20, 0x21], [0x23, 0x5b], [0x5d, 0xd7ff], [0xe000, MAX_CODE_POINT]];

/** The grammar for one character of `set` inside a JSON string (raw where allowed, else escaped). */
export function jsonStringChar(set: CharSet): string | null {
  const options: string[] = [];
  const raw = intersect(set, JSON_RAW);
  if (raw.length > 0) options.push(gbnfClass(raw));
  // Characters JSON must escape: " and \ as \" and \\, control characters as their short escape
  // (\b \f \n \r \t) where they have one, and all of them as \u00XX (either hex case).
  for (const cp of [0x22, 0x5c, 0x08, 0x0c, 0x0a, 0x0d, 0x09])
    if (contains(set, cp)) options.push(gbnfLiteral(JSON.stringify(String.fromCharCode(cp)).slice(1, -1)));
  const hexClass = (digits: number[]): string => {
    const ranges: CodePointRange[] = [];
    for (const d of digits) {
      const ch = d.toString(16);
      ranges.push([ch.charCodeAt(0), ch.charCodeAt(0)]);
      if (d >= 10) ranges.push([ch.toUpperCase().charCodeAt(0), ch.toUpperCase().charCodeAt(0)]);
    }
    return gbnfClass(normalizeSet(ranges));
  };
  const unicodeEscapes: string[] = [];
  for (const high of [0, 1]) {
    const low: number[] = [];
    for (let d = 0; d < 16; d++) if (contains(set, high * 16 + d)) low.push(d);
    if (low.length > 0) unicodeEscapes.push(seq(`"${high}"`, hexClass(low)));
  }
  if (unicodeEscapes.length > 0) options.push(seq(gbnfLiteral("\\u00"), alt(unicodeEscapes)));
  return options.length === 0 ? null : alt(options);
}

// ----- parsing ---------------------------------------------------------------------------------

type RegexNode =
  | { kind: "set"; set: CharSet }
  | { kind: "seq"; items: RegexNode[] }
  | { kind: "alt"; options: RegexNode[] }
  | { kind: "rep"; item: RegexNode; min: number; max: number | null };

class PatternParser {
  private readonly chars: string[];
  private pos = 0;

  constructor(
    private readonly pattern: string,
    private readonly path: string,
  ) {
    this.chars = Array.from(pattern);
  }

  parse(): RegexNode {
    const node = this.disjunction(true);
    if (this.pos < this.chars.length) this.fail(`unexpected "${this.chars[this.pos]}"`);
    return node;
  }

  private fail(why: string): never {
    throw new UnsupportedSchemaError(`pattern ${JSON.stringify(this.pattern)} is not supported (${why})`, this.path);
  }

  private peek(offset = 0): string | undefined {
    return this.chars[this.pos + offset];
  }

  private disjunction(topLevel: boolean): RegexNode {
    const options = [this.alternative(topLevel)];
    while (this.peek() === "|") {
      this.pos++;
      options.push(this.alternative(topLevel));
    }
    return options.length === 1 ? options[0]! : { kind: "alt", options };
  }

  private alternative(topLevel: boolean): RegexNode {
    const items: RegexNode[] = [];
    if (topLevel && this.peek() === "^") this.pos++;
    for (;;) {
      const c = this.peek();
      if (c === undefined || c === "|" || c === ")") break;
      if (c === "$") {
        const next = this.peek(1);
        if (topLevel && (next === undefined || next === "|")) {
          this.pos++;
          break;
        }
        this.fail("an anchor inside the pattern");
      }
      if (c === "^") this.fail("an anchor inside the pattern");
      items.push(this.quantified(this.atom()));
    }
    return items.length === 1 ? items[0]! : { kind: "seq", items };
  }

  private atom(): RegexNode {
    const c = this.peek()!;
    this.pos++;
    switch (c) {
      case "(": {
        if (this.peek() === "?") {
          const a = this.peek(1);
          const b = this.peek(2);
          if (a === ":") this.pos += 2;
          else if (a === "<" && b !== "=" && b !== "!") {
            const end = this.chars.indexOf(">", this.pos);
            if (end < 0) this.fail("an unterminated group name");
            this.pos = end + 1;
          } else this.fail("a lookaround or group modifier");
        }
        const inner = this.disjunction(false);
        if (this.peek() !== ")") this.fail("an unterminated group");
        this.pos++;
        return inner;
      }
      case ".":
        return { kind: "set", set: complement(LINE_TERMINATORS) };
      case "[":
        return { kind: "set", set: this.characterClass() };
      case "\\":
        return { kind: "set", set: this.escape(false) };
      case "*":
      case "+":
      case "?":
      case "{":
      case "}":
      case "]":
        return this.fail(`a stray "${c}"`);
      default:
        return { kind: "set", set: [[c.codePointAt(0)!, c.codePointAt(0)!]] };
    }
  }

  private quantified(item: RegexNode): RegexNode {
    let node = item;
    for (;;) {
      const c = this.peek();
      let min: number;
      let max: number | null;
      if (c === "*") [min, max] = [0, null];
      else if (c === "+") [min, max] = [1, null];
      else if (c === "?") [min, max] = [0, 1];
      else if (c === "{") {
        const rest = this.chars.slice(this.pos).join("");
        const m = /^\{(\d+)(,(\d*))?\}/.exec(rest);
        if (!m) this.fail('a "{" that is not a quantifier');
        min = Number(m[1]);
        max = m[2] === undefined ? min : m[3] === "" ? null : Number(m[3]);
        this.pos += Array.from(m[0]).length - 1;
      } else return node;
      this.pos++;
      if (this.peek() === "?") this.pos++; // lazy: same language
      if (max !== null && max < min) this.fail("a quantifier with max < min");
      if (node.kind === "rep") this.fail("a quantifier on a quantifier");
      node = { kind: "rep", item: node, min, max };
    }
  }

  private hexDigits(count: number): number {
    const digits = this.chars.slice(this.pos, this.pos + count).join("");
    if (!new RegExp(`^[0-9a-fA-F]{${count}}$`).test(digits)) this.fail("a malformed escape");
    this.pos += count;
    return parseInt(digits, 16);
  }

  /** After a backslash. Returns the set the escape stands for. */
  private escape(inClass: boolean): CharSet {
    const c = this.peek();
    if (c === undefined) this.fail("a trailing backslash");
    this.pos++;
    const one = (cp: number): CharSet => [[cp, cp]];
    switch (c) {
      case "d":
        return DIGIT;
      case "D":
        return complement(DIGIT);
      case "w":
        return WORD;
      case "W":
        return complement(WORD);
      case "s":
        return SPACE;
      case "S":
        return complement(SPACE);
      case "t":
        return one(0x09);
      case "n":
        return one(0x0a);
      case "r":
        return one(0x0d);
      case "v":
        return one(0x0b);
      case "f":
        return one(0x0c);
      case "b":
        if (inClass) return one(0x08);
        return this.fail("a word boundary");
      case "B":
        return this.fail("a word boundary");
      case "0":
        if (/[0-9]/.test(this.peek() ?? "")) this.fail("an octal escape");
        return one(0);
      case "c": {
        const letter = this.peek();
        if (!letter || !/[a-zA-Z]/.test(letter)) this.fail("a malformed control escape");
        this.pos++;
        return one(letter.charCodeAt(0) % 32);
      }
      case "x":
        return one(this.hexDigits(2));
      case "u": {
        if (this.peek() === "{") {
          const end = this.chars.indexOf("}", this.pos);
          const digits = this.chars.slice(this.pos + 1, end).join("");
          if (end < 0 || !/^[0-9a-fA-F]{1,6}$/.test(digits) || parseInt(digits, 16) > MAX_CODE_POINT)
            this.fail("a malformed escape");
          this.pos = end + 1;
          return one(parseInt(digits, 16));
        }
        const first = this.hexDigits(4);
        if (first >= 0xd800 && first <= 0xdbff && this.peek() === "\\" && this.peek(1) === "u") {
          const save = this.pos;
          this.pos += 2;
          const second = /^[0-9a-fA-F]{4}$/.test(this.chars.slice(this.pos, this.pos + 4).join("")) ? this.hexDigits(4) : -1;
          if (second >= 0xdc00 && second <= 0xdfff) return one(0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00));
          this.pos = save;
        }
        return one(first);
      }
      case "p":
      case "P":
        return this.fail("a Unicode property escape");
      case "k":
        return this.fail("a backreference");
      default:
        if (/[1-9]/.test(c)) return this.fail("a backreference");
        if ("^$\\.*+?()[]{}|/".includes(c) || (inClass && c === "-")) return one(c.codePointAt(0)!);
        return this.fail(`the escape \\${c}`);
    }
  }

  private classAtom(): CharSet {
    const c = this.peek();
    if (c === undefined) this.fail("an unterminated class");
    this.pos++;
    if (c === "\\") return this.escape(true);
    return [[c.codePointAt(0)!, c.codePointAt(0)!]];
  }

  private characterClass(): CharSet {
    let negated = false;
    if (this.peek() === "^") {
      negated = true;
      this.pos++;
    }
    const ranges: CodePointRange[] = [];
    while (this.peek() !== "]") {
      if (this.peek() === undefined) this.fail("an unterminated class");
      const from = this.classAtom();
      if (this.peek() === "-" && this.peek(1) !== "]" && this.peek(1) !== undefined) {
        this.pos++;
        const to = this.classAtom();
        if (from.length !== 1 || to.length !== 1 || from[0]![0] !== from[0]![1] || to[0]![0] !== to[0]![1])
          this.fail("a class range with a class escape");
        if (to[0]![0] < from[0]![0]) this.fail("a class range out of order");
        ranges.push([from[0]![0], to[0]![0]]);
      } else ranges.push(...from);
    }
    this.pos++;
    const set = normalizeSet(ranges);
    return negated ? complement(set) : set;
  }
}

// ----- lengths ---------------------------------------------------------------------------------

/** [shortest, longest] match length in characters (null: unbounded). */
function lengths(node: RegexNode): [number, number | null] {
  switch (node.kind) {
    case "set":
      return [1, 1];
    case "seq":
      return node.items.map(lengths).reduce<[number, number | null]>(
        ([lo, hi], [a, b]) => [lo + a, hi === null || b === null ? null : hi + b],
        [0, 0],
      );
    case "alt": {
      const all = node.options.map(lengths);
      return [Math.min(...all.map((l) => l[0])), all.some((l) => l[1] === null) ? null : Math.max(...all.map((l) => l[1]!))];
    }
    case "rep": {
      const [a, b] = lengths(node.item);
      return [a * node.min, node.max === null || b === null ? (b === 0 ? 0 : null) : b * node.max];
    }
  }
}

/**
 * Fits a pattern to minLength / maxLength. Possible when it is a sequence of single characters and
 * quantified single characters: minimum counts are raised and maximum counts lowered, front to back,
 * until every length it allows lies within the bounds.
 */
function fitLength(node: RegexNode, minLength: number, maxLength: number | null, fail: (why: string) => never): RegexNode {
  const [lo, hi] = lengths(node);
  if (lo >= minLength && (maxLength === null || (hi !== null && hi <= maxLength))) return node;
  const items = node.kind === "seq" ? node.items : [node];
  const simple = items.map((item) =>
    item.kind === "set"
      ? { set: item, min: 1, max: 1 as number | null }
      : item.kind === "rep" && item.item.kind === "set"
        ? { set: item.item, min: item.min, max: item.max }
        : null,
  );
  if (simple.some((s) => s === null)) fail("a pattern with groups or alternatives cannot be combined with minLength/maxLength");
  const parts = simple as Array<{ set: RegexNode; min: number; max: number | null }>;
  let deficit = minLength - parts.reduce((n, p) => n + p.min, 0);
  for (const p of parts) {
    if (deficit <= 0) break;
    const room = p.max === null ? deficit : Math.min(deficit, p.max - p.min);
    p.min += room;
    deficit -= room;
  }
  if (deficit > 0) fail("the pattern cannot reach minLength");
  if (maxLength !== null) {
    let budget = maxLength - parts.reduce((n, p) => n + p.min, 0);
    if (budget < 0) fail("the pattern cannot stay within maxLength");
    for (const p of parts) {
      const extra = p.max === null ? budget : Math.min(budget, p.max - p.min);
      p.max = p.min + extra;
      budget -= extra;
    }
  }
  return { kind: "seq", items: parts.map((p) => ({ kind: "rep" as const, item: p.set, min: p.min, max: p.max })) };
}

// ----- to GBNF ---------------------------------------------------------------------------------

export interface PatternOptions {
  minLength: number;
  maxLength: number | null;
}

/**
 * The GBNF for the content of a JSON string (between the quotes) that matches `pattern`.
 * Throws UnsupportedSchemaError for constructs outside the supported subset.
 */
export function patternToGbnf(pattern: string, length: PatternOptions, rules: GbnfRules, hint: string, path: string): string {
  const fail = (why: string): never => {
    throw new UnsupportedSchemaError(`pattern ${JSON.stringify(pattern)} is not supported (${why})`, path);
  };
  let node = new PatternParser(pattern, path).parse();
  node = fitLength(node, length.minLength, length.maxLength, fail);

  const emit = (n: RegexNode): string => {
    switch (n.kind) {
      case "set": {
        const expr = jsonStringChar(n.set);
        if (expr === null) return fail("a character class that matches no character JSON can hold");
        return expr;
      }
      case "seq":
        return seq(...n.items.map(emit));
      case "alt":
        return alt(n.options.map(emit));
      case "rep": {
        if (n.max === 0) return "";
        if (lengths(n.item)[0] === 0) return fail("a quantified part that can match the empty string");
        const item = rules.atom(`${hint}-part`, emit(n.item));
        return rules.repeat(item, n.min, n.max);
      }
    }
  };
  return emit(node);
}
