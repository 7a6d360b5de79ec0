// Grammars for JSON numbers inside bounds (minimum / maximum / exclusiveMinimum / exclusiveMaximum).
//
// The grammar only writes numbers it can compare exactly, so that every number it allows parses (with
// JSON.parse, i.e. rounding to the nearest double) to a value that satisfies the bounds:
// - no exponent;
// - integers of at most 15 digits;
// - fractions: at most 9 integer digits and 1..6 fraction digits (so at most 15 significant digits).
// Decimals of at most 15 significant digits map to distinct doubles, and rounding is monotonic, so an
// exact decimal comparison against the bound (itself rounded outwards to 15 significant digits when it
// has more) carries over to the parsed doubles, exclusive bounds included.

import { UnsupportedSchemaError } from "./errors.js";
import { alt, seq } from "./gbnf.js";

const MAX_INTEGER_DIGITS = 15;
const MAX_FRACTION_INTEGER_DIGITS = 9;
export const MAX_FRACTION_DIGITS = 6;
const SIGNIFICANT_DIGITS = 15;

/** An exact decimal: m * 10^e. */
interface Decimal {
  m: bigint;
  e: number;
}

function pow10(n: number): bigint {
  return 10n ** BigInt(n);
}

/** The exact decimal JavaScript prints for a finite number (its shortest round-trip form). */
export function toDecimal(x: number): Decimal {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(String(x));
  if (!match) throw new Error(`not a finite number: ${x}`);
  const [, sign, whole, fraction = "", exp = "0"] = match;
  let m = BigInt(whole! + fraction) * (sign === "-" ? -1n : 1n);
  let e = Number(exp) - fraction.length;
  if (m === 0n) return { m: 0n, e: 0 };
  while (m % 10n === 0n) {
    m /= 10n;
    e++;
  }
  return { m, e };
}

function negate(d: Decimal): Decimal {
  return { m: -d.m, e: d.e };
}

/** floor or ceil of d * 10^scale. */
function scaled(d: Decimal, scale: number, mode: "floor" | "ceil"): bigint {
  const e = d.e + scale;
  if (e >= 0) return d.m * pow10(e);
  const div = pow10(-e);
  const q = d.m / div; // truncates toward zero
  const exact = q * div === d.m;
  if (exact) return q;
  if (mode === "floor") return d.m < 0n ? q - 1n : q;
  return d.m < 0n ? q : q + 1n;
}

/** A non-negative decimal rounded to at most 15 significant digits, downwards or upwards. */
function roundSignificant(d: Decimal, mode: "floor" | "ceil"): Decimal {
  const digits = d.m.toString().length;
  if (d.m <= 0n || digits <= SIGNIFICANT_DIGITS) return d;
  const drop = digits - SIGNIFICANT_DIGITS;
  let m = scaled({ m: d.m, e: 0 }, -drop, mode);
  let e = d.e + drop;
  while (m !== 0n && m % 10n === 0n) {
    m /= 10n;
    e++;
  }
  return { m, e };
}

/** A bound on a magnitude (a non-negative value). */
interface MagnitudeBound {
  value: Decimal;
  exclusive: boolean;
}

export interface NumericBounds {
  /** The lower bound and whether it is exclusive; null: none. */
  min: { value: number; exclusive: boolean } | null;
  max: { value: number; exclusive: boolean } | null;
}

// ----- digit-string ranges ---------------------------------------------------------------------

function digitClass(from: number, to: number): string {
  return from === to ? `[${from}]` : `[${from}-${to}]`;
}

function anyDigits(count: number): string {
  if (count === 0) return "";
  return count === 1 ? "[0-9]" : `[0-9]{${count}}`;
}

/** Digit strings of one fixed length between lo and hi (both that long, lo <= hi, leading zeros kept). */
export function fixedLengthRange(lo: string, hi: string): string {
  if (lo.length !== hi.length) throw new Error("fixedLengthRange needs equal lengths");
  if (lo === hi) return `"${lo}"`;
  let i = 0;
  while (lo[i] === hi[i]) i++;
  const prefix = i > 0 ? `"${lo.slice(0, i)}"` : "";
  const a = Number(lo[i]);
  const b = Number(hi[i]);
  const rest = lo.length - i - 1;
  if (rest === 0) return seq(prefix, digitClass(a, b));
  const restLo = lo.slice(i + 1);
  const restHi = hi.slice(i + 1);
  const loAllZeros = /^0*$/.test(restLo);
  const hiAllNines = /^9*$/.test(restHi);
  const options: string[] = [];
  if (!loAllZeros) options.push(seq(`"${a}"`, groupIfAlt(fixedLengthRange(restLo, "9".repeat(rest)))));
  const from = loAllZeros ? a : a + 1;
  const to = hiAllNines ? b : b - 1;
  if (from <= to) options.push(seq(digitClass(from, to), anyDigits(rest)));
  if (!hiAllNines) options.push(seq(`"${b}"`, groupIfAlt(fixedLengthRange("0".repeat(rest), restHi))));
  return seq(prefix, alt(options));
}

function groupIfAlt(expr: string): string {
  return expr.includes("|") && !(expr.startsWith("( ") && expr.endsWith(" )")) ? `( ${expr} )` : expr;
}

/** Natural numbers lo..hi written without leading zeros (0 <= lo <= hi). */
export function naturalRange(lo: bigint, hi: bigint): string {
  const options: string[] = [];
  const loS = lo.toString();
  const hiS = hi.toString();
  // Runs of lengths (above 1) that are complete (10..0 to 99..9) become one [1-9] [0-9]{a,b}.
  let fullFrom = 0;
  const flush = (len: number) => {
    if (fullFrom === 0) return;
    const a = fullFrom - 1;
    const b = len - 2;
    options.push(`[1-9] [0-9]${a === b ? (a === 1 ? "" : `{${a}}`) : `{${a},${b}}`}`);
    fullFrom = 0;
  };
  for (let len = loS.length; len <= hiS.length; len++) {
    const from = len === loS.length ? loS : "1" + "0".repeat(len - 1);
    const to = len === hiS.length ? hiS : "9".repeat(len);
    if (len > 1 && from === "1" + "0".repeat(len - 1) && to === "9".repeat(len)) {
      if (fullFrom === 0) fullFrom = len;
      continue;
    }
    flush(len);
    options.push(fixedLengthRange(from, to));
  }
  flush(hiS.length + 1);
  return alt(options);
}

/** Magnitudes lo..hi (0 <= lo <= hi) written with exactly `digits` fraction digits, scaled by 10^digits. */
function fixedPointRange(lo: bigint, hi: bigint, digits: number): string {
  const unit = pow10(digits);
  const intLo = lo / unit;
  const intHi = hi / unit;
  const frac = (v: bigint) => (v % unit).toString().padStart(digits, "0");
  const point = '"."';
  if (intLo === intHi) return seq(`"${intLo}"`, point, groupIfAlt(fixedLengthRange(frac(lo), frac(hi))));
  const options: string[] = [];
  const loFrac = frac(lo);
  const hiFrac = frac(hi);
  const nines = "9".repeat(digits);
  const zeros = "0".repeat(digits);
  let middleLo = intLo + 1n;
  let middleHi = intHi - 1n;
  if (loFrac === zeros) middleLo = intLo;
  else options.push(seq(`"${intLo}"`, point, groupIfAlt(fixedLengthRange(loFrac, nines))));
  if (hiFrac === nines) middleHi = intHi;
  if (middleLo <= middleHi) options.push(seq(groupIfAlt(naturalRange(middleLo, middleHi)), point, anyDigits(digits)));
  if (hiFrac !== nines) options.push(seq(`"${intHi}"`, point, groupIfAlt(fixedLengthRange(zeros, hiFrac))));
  return alt(options);
}

// ----- bounded numbers -------------------------------------------------------------------------

/** The scaled integer range [lo, hi] of magnitudes written with `digits` fraction digits, or null if empty. */
function magnitudeRange(
  lower: MagnitudeBound | null,
  upper: MagnitudeBound | null,
  digits: number,
  positiveOnly: boolean,
): [bigint, bigint] | null {
  const cap = digits === 0 ? pow10(MAX_INTEGER_DIGITS) - 1n : pow10(MAX_FRACTION_INTEGER_DIGITS + digits) - 1n;
  let lo = positiveOnly ? 1n : 0n;
  let hi = cap;
  if (lower) {
    const v = roundSignificant(lower.value, "ceil");
    const exclusive = lower.exclusive;
    const bound = exclusive ? scaled(v, digits, "floor") + 1n : scaled(v, digits, "ceil");
    if (bound > lo) lo = bound;
  }
  if (upper) {
    const v = roundSignificant(upper.value, "floor");
    const bound = upper.exclusive ? scaled(v, digits, "ceil") - 1n : scaled(v, digits, "floor");
    if (bound < hi) hi = bound;
  }
  return lo <= hi ? [lo, hi] : null;
}

/** Non-negative (or, with positiveOnly, strictly positive) magnitudes between the bounds. */
function magnitudes(
  lower: MagnitudeBound | null,
  upper: MagnitudeBound | null,
  maxFractionDigits: number,
  positiveOnly: boolean,
): string[] {
  const options: string[] = [];
  for (let digits = 0; digits <= maxFractionDigits; digits++) {
    const range = magnitudeRange(lower, upper, digits, positiveOnly);
    if (!range) continue;
    options.push(digits === 0 ? naturalRange(range[0], range[1]) : fixedPointRange(range[0], range[1], digits));
  }
  return options;
}

/**
 * A GBNF expression for the JSON numbers (integers only when maxFractionDigits is 0) within the bounds.
 * Throws UnsupportedSchemaError when no such number can be written in the forms described above.
 */
export function boundedNumber(bounds: NumericBounds, maxFractionDigits: number, path: string): string {
  const lo = bounds.min ? { value: toDecimal(bounds.min.value), exclusive: bounds.min.exclusive } : null;
  const hi = bounds.max ? { value: toDecimal(bounds.max.value), exclusive: bounds.max.exclusive } : null;
  const options: string[] = [];
  // Negative numbers, as "-" and a strictly positive magnitude: |v| <= -lo, |v| >= -hi.
  if (!lo || lo.value.m < 0n) {
    const magnitudeUpper = lo ? { value: negate(lo.value), exclusive: lo.exclusive } : null;
    const magnitudeLower = hi && hi.value.m < 0n ? { value: negate(hi.value), exclusive: hi.exclusive } : null;
    const negatives = magnitudes(magnitudeLower, magnitudeUpper, maxFractionDigits, true);
    if (negatives.length > 0) options.push(seq('"-"', groupIfAlt(alt(negatives))));
  }
  // Zero and positive numbers.
  if (!hi || hi.value.m > 0n || (hi.value.m === 0n && !hi.exclusive)) {
    const lower = lo && lo.value.m >= 0n ? lo : null;
    const upper = hi;
    options.push(...magnitudes(lower, upper, maxFractionDigits, false));
  }
  if (options.length === 0) {
    const what = maxFractionDigits === 0 ? "no integer" : `no number with at most ${maxFractionDigits} fraction digits`;
    throw new UnsupportedSchemaError(`${what} of at most 15 significant digits lies within the bounds`, path);
  }
  return alt(options);
}
