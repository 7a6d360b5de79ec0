// Grammars for numbers with a multipleOf that is not a power of ten (5, 0.25, 12.5, ...), within bounds.
//
// A multiple of q = Q / 10^S (Q an integer, S its fraction digits) is written with exactly S fraction
// digits ("0.50" for 0.5 when q is 0.25: JSON.parse reads the same number). Read as one integer, the
// digits written are N = value * 10^S, and the rule becomes: N is a multiple of Q, within the bounds
// (times 10^S), with at most 15 digits (so every number written parses to itself exactly).
//
// For each length, the range of N is split the way a range becomes a regular expression (a fixed prefix,
// one digit from a range, then free digits: 123..4567 is 12[3-9], 1[3-9]., [2-9].., ...); the free digits
// are a remainder automaton modulo Q that ends at 0, shared by every block: a rule per (digits left,
// remainder), dead ones left out.

import { UnsupportedSchemaError } from "./errors.js";
import { GbnfRules, alt, gbnfLiteral, seq } from "./gbnf.js";
import { MAX_FRACTION_DIGITS, toDecimal, type NumericBounds } from "./numeric-range.js";

/** Digits of N at most: 15 significant digits parse exactly. */
const MAX_DIGITS = 15;
/** Largest Q: the automaton has up to Q rules per digit position. */
const MAX_MODULUS = 250;

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a < 0n ? -a : a;
}

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return q * b !== a && a < 0n !== b < 0n ? q - 1n : q;
}

/** The step of a multipleOf, as Q / 10^S; for integers, the smallest integer multiple of it. */
export function multipleStep(multipleOf: number, integer: boolean): { Q: bigint; S: number } {
  const d = toDecimal(multipleOf);
  const S = Math.max(0, -d.e);
  const Q = d.m * 10n ** BigInt(d.e + S);
  if (!integer || S === 0) return { Q, S };
  // The integers that are multiples of Q / 10^S are the multiples of lcm(Q, 10^S) / 10^S.
  const scale = 10n ** BigInt(S);
  return { Q: Q / gcd(Q, scale), S: 0 };
}

/** Whether multipleOf needs this module (a power of ten is a limit on fraction digits: schema-converter.ts). */
export function needsMultipleGrammar(multipleOf: number, integer: boolean): boolean {
  return multipleStep(multipleOf, integer).Q !== 1n;
}

/** A bound on N (a value times 10^S) as an inclusive integer. */
function scaledBound(value: number, exclusive: boolean, S: number, side: "min" | "max"): bigint {
  const d = toDecimal(value);
  const e = d.e + S;
  const num = e >= 0 ? d.m * 10n ** BigInt(e) : d.m;
  const den = e >= 0 ? 1n : 10n ** BigInt(-e);
  const exact = num % den === 0n;
  if (side === "min") {
    const ceil = -floorDiv(-num, den);
    return exclusive && exact ? ceil + 1n : ceil;
  }
  const floor = floorDiv(num, den);
  return exclusive && exact ? floor - 1n : floor;
}

/** The grammar of the numbers within `bounds` that are multiples of `multipleOf`. */
export function multiplesGrammar(multipleOf: number, integer: boolean, bounds: NumericBounds, rules: GbnfRules, hint: string, path: string): string {
  const { Q, S } = multipleStep(multipleOf, integer);
  if (S > MAX_FRACTION_DIGITS) throw new UnsupportedSchemaError(`multipleOf ${multipleOf} has more than ${MAX_FRACTION_DIGITS} fraction digits`, path);
  if (Q > BigInt(MAX_MODULUS))
    throw new UnsupportedSchemaError(`multipleOf ${multipleOf} (at most ${MAX_MODULUS} times its smallest decimal step is supported)`, path);
  const limit = 10n ** BigInt(MAX_DIGITS) - 1n;
  let lo = bounds.min ? scaledBound(bounds.min.value, bounds.min.exclusive, S, "min") : -limit;
  let hi = bounds.max ? scaledBound(bounds.max.value, bounds.max.exclusive, S, "max") : limit;
  if (lo < -limit) lo = -limit;
  if (hi > limit) hi = limit;
  const automaton = new Remainders(Number(Q), S, rules, hint);
  const options: string[] = [];
  // Negative numbers: "-" and a magnitude in [max(1, -hi), -lo].
  if (lo < 0n) {
    const magnitudes = automaton.range(hi < 0n ? -hi : 1n, -lo);
    if (magnitudes.length > 0) options.push(seq('"-"', alt(magnitudes)));
  }
  if (hi >= 0n) options.push(...automaton.range(lo > 0n ? lo : 0n, hi));
  if (options.length === 0) throw new UnsupportedSchemaError(`no multiple of ${multipleOf} of at most 15 digits lies within the bounds`, path);
  return alt(options);
}

/** Digit strings of N (no sign) as the grammar writes them: N >= 0, a point before the last S digits. */
class Remainders {
  /** live[k][r]: k more digits can take remainder r to 0. */
  private readonly live: boolean[][];
  private readonly names = new Map<string, string>();

  constructor(
    private readonly Q: number,
    private readonly S: number,
    private readonly rules: GbnfRules,
    private readonly hint: string,
  ) {
    this.live = [Array.from({ length: Q }, (_, r) => r === 0)];
    for (let k = 1; k <= MAX_DIGITS; k++) {
      const prev = this.live[k - 1]!;
      this.live.push(Array.from({ length: Q }, (_, r) => DIGITS.some((d) => prev[(r * 10 + d) % Q])));
    }
  }

  /** Alternatives writing every multiple of Q in [lo, hi] (0 <= lo), by length. */
  range(lo: bigint, hi: bigint): string[] {
    const out: string[] = [];
    for (let length = this.S + 1; length <= MAX_DIGITS; length++) {
      // Lengths below S + 1 are written zero-padded to S + 1 ("0.05"); longer ones start with 1..9.
      const first = length === this.S + 1 ? 0n : 10n ** BigInt(length - 1);
      const last = 10n ** BigInt(length) - 1n;
      const a = lo > first ? lo : first;
      const b = hi < last ? hi : last;
      if (a > b) continue;
      for (const block of blocks(a.toString().padStart(length, "0"), b.toString().padStart(length, "0"))) {
        const expr = this.block(block, length);
        if (expr !== null) out.push(expr);
      }
    }
    return out;
  }

  /** One block of a range, or null when no multiple is in it. */
  private block(block: Block, length: number): string | null {
    const parts: string[] = [];
    let r = 0;
    block.prefix.split("").forEach((ch, i) => {
      parts.push(this.point(length - i), gbnfLiteral(ch));
      r = (r * 10 + Number(ch)) % this.Q;
    });
    if (block.digits === null) return r === 0 ? seq(...parts) : null;
    const [from, to] = block.digits;
    const targets: Array<[number, string]> = [];
    for (let d = from; d <= to; d++) {
      const next = (r * 10 + d) % this.Q;
      if (this.live[block.free]![next]) targets.push([d, this.free(block.free, next)]);
    }
    if (targets.length === 0) return null;
    return seq(...parts, this.point(block.free + 1), alt(byTarget(targets)));
  }

  /** The decimal point, before the digit with `left` digits left (itself included). */
  private point(left: number): string {
    return this.S > 0 && left === this.S ? '"."' : "";
  }

  /** k more digits taking remainder r to 0 ("" for none left). */
  private free(k: number, r: number): string {
    if (k === 0) return "";
    const key = `${k},${r}`;
    const known = this.names.get(key);
    if (known !== undefined) return known;
    const targets: Array<[number, string]> = [];
    for (const d of DIGITS) {
      const next = (r * 10 + d) % this.Q;
      if (this.live[k - 1]![next]) targets.push([d, this.free(k - 1, next)]);
    }
    const name = this.rules.add(`${this.hint}-m${this.Q}-${k}-${r}`, seq(this.point(k), alt(byTarget(targets))));
    this.names.set(key, name);
    return name;
  }
}

const DIGITS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];

/** One alternative per rule led to: the class of the digits that lead there, then the rule. */
function byTarget(targets: ReadonlyArray<[number, string]>): string[] {
  const groups = new Map<string, number[]>();
  for (const [d, target] of targets) {
    let list = groups.get(target);
    if (!list) groups.set(target, (list = []));
    list.push(d);
  }
  return [...groups].map(([target, digits]) => seq(digits.length === 1 ? `"${digits[0]}"` : `[${digits.join("")}]`, target));
}

/** A fixed prefix, then (unless null) one digit in a range, then `free` digits of any value. */
interface Block {
  prefix: string;
  digits: [number, number] | null;
  free: number;
}

/** The numbers from a to b (digit strings of one length, a <= b) as blocks. */
export function blocks(a: string, b: string): Block[] {
  if (a === b) return [{ prefix: a, digits: null, free: 0 }];
  let m = 0;
  while (a[m] === b[m]) m++;
  const prefix = a.slice(0, m);
  const n = a.length - m - 1;
  const [x, y] = [Number(a[m]), Number(b[m])];
  const aRest = a.slice(m + 1);
  const bRest = b.slice(m + 1);
  const out: Block[] = [];
  let from = x;
  if (!/^0*$/.test(aRest)) {
    out.push(...blocks(a, prefix + x + "9".repeat(n)));
    from = x + 1;
  }
  let to = y;
  const upper: Block[] = [];
  if (!/^9*$/.test(bRest)) {
    upper.push(...blocks(prefix + y + "0".repeat(n), b));
    to = y - 1;
  }
  if (from <= to) out.push({ prefix, digits: [from, to], free: n });
  out.push(...upper);
  return out;
}
