// GBNF text building blocks: literal and character-class escaping, a rule set that names and
// deduplicates rules, and bounded repetition that stays inside what llama.cpp's parser accepts.
//
// llama.cpp's GBNF parser (src/llama-grammar.cpp, bundled with node-llama-cpp) notes:
// - literals "..." and classes [...] understand \xHH, \uHHHH, \UHHHHHHHH, \t \r \n \\ \" \[ \] \-;
//   we escape everything outside printable ASCII letters/digits/punctuation with the hex forms;
// - `x{m}`, `x{m,}`, `x{m,n}` are supported, but a count above 2000 is rejected (min) or silently turned
//   into "unbounded" (max), and the repeated item times the count may not exceed 2000 "rules". So only
//   atoms (a rule name, a literal or a class) are ever repeated here, and counts above 2000 are split
//   into chunks of named rules (see `repeat`).

import { UnsupportedSchemaError } from "./errors.js";

export const MAX_CODE_POINT = 0x10ffff;
/** llama.cpp's MAX_REPETITION_THRESHOLD. */
const MAX_REPETITION = 2000;
const CHUNK = 1000;
/** More rules than this means a schema that blew up (e.g. merged alternatives); llama.cpp would crawl. */
const MAX_RULES = 20000;

/** An inclusive code point range. */
export type CodePointRange = readonly [number, number];

function hex(cp: number, width: number): string {
  return cp.toString(16).toUpperCase().padStart(width, "0");
}

/** A code point written so that llama.cpp's parse_char reads it back, inside a literal or a class. */
function escapeCodePoint(cp: number, inClass: boolean): string {
  const printable = cp >= 0x20 && cp < 0x7f;
  if (printable) {
    const ch = String.fromCharCode(cp);
    if (/[a-zA-Z0-9]/.test(ch)) return ch;
    if (!inClass) return ch === '"' || ch === "\\" ? `\\${ch}` : ch;
  }
  if (cp <= 0xff) return `\\x${hex(cp, 2)}`;
  if (cp <= 0xffff) return `\\u${hex(cp, 4)}`;
  return `\\U${hex(cp, 8)}`;
}

/** A GBNF literal matching exactly `text` (iterated by code point). */
export function gbnfLiteral(text: string): string {
  let out = '"';
  for (const ch of text) out += escapeCodePoint(ch.codePointAt(0)!, false);
  return out + '"';
}

/** A GBNF class matching one code point in any of `ranges` (which must be non-empty). */
export function gbnfClass(ranges: readonly CodePointRange[]): string {
  if (ranges.length === 0) throw new Error("empty character class");
  let out = "[";
  for (const [lo, hi] of ranges) {
    out += escapeCodePoint(lo, true);
    if (hi > lo) out += "-" + escapeCodePoint(hi, true);
  }
  return out + "]";
}

const LITERAL = /^"(?:[^"\\]|\\.)*"$/;

/** True when `expr` is a single symbol: a rule name, one literal or one class. Only atoms get repeated. */
export function isAtom(expr: string): boolean {
  return /^[a-zA-Z0-9-]+$/.test(expr) || LITERAL.test(expr) || /^\[(?:[^\]\\]|\\.)*\]$/.test(expr);
}

/**
 * The characters of an expression that are structure, not content: literals and character classes are
 * skipped. `depth` is the parenthesis depth after the character.
 */
function* structure(expr: string): Generator<{ ch: string; index: number; depth: number }> {
  let depth = 0;
  for (let i = 0; i < expr.length; i++) {
    const ch = expr[i]!;
    if (ch === '"' || ch === "[") {
      const close = ch === '"' ? '"' : "]";
      i++;
      while (i < expr.length && expr[i] !== close) i += expr[i] === "\\" ? 2 : 1;
      continue;
    }
    if (ch === "(") depth++;
    else if (ch === ")") depth--;
    yield { ch, index: i, depth };
  }
}

/** The top-level symbols of a sequence expression, or null if it has a top-level `|`. */
function topLevelTokens(expr: string): string[] | null {
  const tokens: string[] = [];
  let start = 0;
  for (const { ch, index, depth } of structure(expr)) {
    if (depth !== 0) continue;
    if (ch === "|") return null;
    if (ch === " ") {
      if (index > start) tokens.push(expr.slice(start, index));
      start = index + 1;
    }
  }
  if (expr.length > start) tokens.push(expr.slice(start));
  return tokens;
}

/** Joins the non-empty parts of a sequence, merging adjacent literals. An empty sequence is `""`. */
export function seq(...parts: string[]): string {
  const kept: string[] = [];
  for (const part of parts.flatMap((p) => topLevelTokens(p) ?? [`( ${p} )`])) {
    if (part === "" || part === '""') continue;
    const last = kept[kept.length - 1];
    if (last !== undefined && LITERAL.test(last) && LITERAL.test(part)) kept[kept.length - 1] = last.slice(0, -1) + part.slice(1);
    else kept.push(part);
  }
  return kept.length === 0 ? '""' : kept.join(" ");
}

/** Alternatives, parenthesized unless there is only one. Duplicates are dropped. */
export function alt(options: readonly string[]): string {
  const unique = [...new Set(options)];
  if (unique.length === 0) throw new Error("no alternatives");
  if (unique.length === 1) return unique[0]!;
  return `( ${unique.join(" | ")} )`;
}

/** `( expr )` unless expr needs no parentheses in a sequence. */
export function group(expr: string): string {
  if (isAtom(expr) || (expr.startsWith("( ") && expr.endsWith(" )") && balancedGroup(expr))) return expr;
  return `( ${expr} )`;
}

function balancedGroup(expr: string): boolean {
  // True when the opening "(" closes at the very end (so "( a ) ( b )" is not one group).
  let depth = 0;
  for (const step of structure(expr)) {
    depth = step.depth;
    if (step.ch === ")" && depth === 0 && step.index !== expr.length - 1) return false;
  }
  return depth === 0;
}

function sanitizeName(hint: string): string {
  const name = hint.replace(/[^a-zA-Z0-9-]+/g, "-").replace(/-+/g, "-").replace(/^-|-$/g, "");
  return name === "" ? "r" : name;
}

/**
 * The rules of one grammar. Names come from hints (sanitized to [a-zA-Z0-9-]); a rule whose body is
 * already known is reused instead of added again; a taken name gets a numeric suffix.
 */
export class GbnfRules {
  private readonly bodies = new Map<string, string | null>();
  private readonly byBody = new Map<string, string>();

  /** Adds (or finds) a rule with this body and returns its name. */
  add(hint: string, body: string): string {
    const known = this.byBody.get(body);
    if (known !== undefined) return known;
    const name = this.freeName(hint);
    this.bodies.set(name, body);
    this.byBody.set(body, name);
    return name;
  }

  /** Returns `expr` if it is an atom, or the name of a rule holding it. */
  atom(hint: string, expr: string): string {
    return isAtom(expr) ? expr : this.add(hint, expr);
  }

  /** Reserves a name for a rule defined later (recursive references need the name first). */
  reserve(hint: string): string {
    const name = this.freeName(hint);
    this.bodies.set(name, null);
    return name;
  }

  define(name: string, body: string): void {
    if (this.bodies.get(name) !== null) throw new Error(`rule ${name} was not reserved`);
    this.bodies.set(name, body);
  }

  has(name: string): boolean {
    return this.bodies.has(name);
  }

  private freeName(hint: string): string {
    if (this.bodies.size >= MAX_RULES) throw new UnsupportedSchemaError("a schema too complex for a grammar", "");
    const base = sanitizeName(hint);
    if (!this.bodies.has(base)) return base;
    for (let i = 1; ; i++) {
      const candidate = `${base}${/[0-9]$/.test(base) ? "-" : ""}${i}`;
      if (!this.bodies.has(candidate)) return candidate;
    }
  }

  /** The grammar text: `root` first, then the rules in the order they were added. */
  render(): string {
    const lines: string[] = [];
    const root = this.bodies.get("root");
    if (root === undefined || root === null) throw new Error("the grammar has no root rule");
    lines.push(`root ::= ${root}`);
    for (const [name, body] of this.bodies) {
      if (name === "root") continue;
      if (body === null) throw new Error(`rule ${name} was reserved but never defined`);
      lines.push(`${name} ::= ${body}`);
    }
    return lines.join("\n") + "\n";
  }

  /**
   * `item` repeated between `min` and `max` times (max null = unbounded). `item` must be an atom.
   * Returns "" for exactly zero repetitions.
   */
  repeat(item: string, min: number, max: number | null): string {
    if (!isAtom(item)) throw new Error(`only atoms are repeated, got ${item}`);
    if (max !== null && max < min) throw new Error("repetition with max < min");
    const exact = this.exactly(item, min);
    if (max === null) return seq(exact, `${item}*`);
    return seq(exact, this.upTo(item, max - min));
  }

  private exactly(item: string, count: number): string {
    if (count === 0) return "";
    if (count === 1) return item;
    if (count <= MAX_REPETITION) return `${item}{${count}}`;
    const block = this.add(`${item}-x${CHUNK}`, `${item}{${CHUNK}}`);
    return seq(this.exactly(block, Math.floor(count / CHUNK)), this.exactly(item, count % CHUNK));
  }

  private upTo(item: string, count: number): string {
    if (count === 0) return "";
    if (count === 1) return `${item}?`;
    if (count <= MAX_REPETITION) return `${item}{0,${count}}`;
    // Lengths 0..count: either fewer than q full blocks plus 0..CHUNK-1 items, or q blocks plus 0..r items.
    const block = this.add(`${item}-x${CHUNK}`, `${item}{${CHUNK}}`);
    const q = Math.floor(count / CHUNK);
    const r = count % CHUNK;
    return alt([seq(this.upTo(block, q - 1), this.upTo(item, CHUNK - 1)), seq(this.exactly(block, q), this.upTo(item, r))]);
  }
}
