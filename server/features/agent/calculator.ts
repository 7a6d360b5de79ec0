// The agent's calculator: math.js's expression language (numbers, units, matrices, functions), never
// JavaScript. Functions that parse or define code, or build arbitrarily large values from a few characters,
// are switched off, following math.js's own security notes; each expression gets a fresh, empty scope.
// Matrices are bounded: a function whose result would pass MAX_MATRIX_ELEMENTS is refused before it builds
// it (kron nested five times took 19 s and 1.6 GB; concat doubled 25 times 9 s and 1.9 GB). This module
// runs in the calculator's worker (calculator-pool.ts), which also bounds the time and memory of whatever
// these checks do not foresee.
import { all, create, type Matrix } from "mathjs";
import { AppError, invalidRequest } from "../../core/errors.js";
import { MAX_EXPRESSION_CHARS } from "./calculator-limits.js";

/**
 * What the calculator's process sends back for one expression (plain data): its result, why it has none, or
 * which budget stopped it ("failed": its thread ended for another reason, given in `message`).
 */
export type CalculatorAnswer =
  | { ok: true; value: CalculatorResult }
  | { ok: false; message: string; code: string }
  | { ok: false; limit: "time" | "memory" | "failed"; message: string };

const MAX_RESULT_CHARS = 2000;
/** Elements of one matrix (a 316 x 316 one, or a vector of 100,000). */
export const MAX_MATRIX_ELEMENTS = 100_000;

const math = create(all!, { number: "number", precision: 64 });
// Taken before the guards below replace the namespace's functions (they call these).
const evaluate = math.evaluate.bind(math);
const format = math.format.bind(math);
const isMatrix = math.isMatrix.bind(math);

const disabled = (name: string) => () => {
  throw new Error(`the function ${name} is not available in the calculator`);
};
const DISABLED = ["import", "createUnit", "evaluate", "parse", "simplify", "derivative", "compile", "resolve", "reviver", "range", "ones", "zeros", "identity", "diag", "resize", "random", "randomInt", "pickRandom", "matrixFromFunction"];

export function tooLarge(): AppError {
  return new AppError(
    "invalid_request",
    `The calculation would build a matrix of more than ${MAX_MATRIX_ELEMENTS} elements, the calculator's limit.`,
    { code: "calculation_too_large", param: "expression" },
  );
}

type Dims = number[];

const product = (dims: Dims) => dims.reduce((a, b) => a * b, 1);

/** The dimensions of a matrix or array; null for anything else. */
function dimsOf(value: unknown): Dims | null {
  if (isMatrix(value)) return (value as Matrix).size();
  if (!Array.isArray(value)) return null;
  const dims: Dims = [];
  for (let level: unknown = value; Array.isArray(level); level = level[0]) dims.push(level.length);
  return dims;
}

/** The elements a call would build, as far as its arguments say; 0 when they do not say. */
function expectedElements(name: string, args: unknown[]): number {
  const dims = args.map(dimsOf);
  const matrices = dims.filter((d): d is Dims => d !== null);
  if (matrices.length === 0) return 0;
  switch (name) {
    case "kron":
      return matrices.reduce((n, d) => n * product(d), 1);
    case "concat":
      return matrices.reduce((n, d) => n + product(d), 0);
    case "multiply": {
      // Matrix products (rows of the first, columns of the last); with a scalar, the matrix's own size.
      const [first, ...rest] = matrices;
      const last = rest.at(-1);
      if (!last) return product(first!);
      return (first!.length === 2 ? first![0]! : 1) * (last.length === 2 ? last[1]! : 1);
    }
    case "subset": {
      // An assignment past the end grows the matrix to the index.
      const [target, index, replacement] = args;
      const dims0 = dimsOf(target);
      const max = (index as { max?: () => number[] } | undefined)?.max?.();
      if (!dims0 || replacement === undefined || !Array.isArray(max)) return 0;
      return product(max.map((m, i) => Math.max(dims0[i] ?? 1, m + 1)));
    }
    default: {
      // Element-wise functions broadcast their matrices against each other (sizes aligned from the last).
      if (matrices.length < 2) return product(matrices[0]!);
      const rank = Math.max(...matrices.map((d) => d.length));
      let n = 1;
      for (let i = 1; i <= rank; i++) n *= Math.max(...matrices.map((d) => d[d.length - i] ?? 1));
      return n;
    }
  }
}

/** Every function of the language, checked before and after it runs. */
function guarded(name: string, fn: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
  return (...args: unknown[]) => {
    for (const arg of args) {
      const dims = dimsOf(arg);
      if (dims && product(dims) > MAX_MATRIX_ELEMENTS) throw tooLarge();
    }
    if (expectedElements(name, args) > MAX_MATRIX_ELEMENTS) throw tooLarge();
    const result = fn(...args);
    const dims = dimsOf(result);
    if (dims && product(dims) > MAX_MATRIX_ELEMENTS) throw tooLarge();
    return result;
  };
}

type MathFunction = ((...args: unknown[]) => unknown) & { signatures?: unknown; rawArgs?: boolean; transform?: MathFunction };

const namespace = math as unknown as Record<string, unknown>;
// The expression language calls a function's transform where it has one (subset, concat, max, ... with
// one-based indices and dimensions): imported with it as `.transform`, guarded too. Functions that
// evaluate their own arguments (rawArgs: and, or) are left as they are.
const transforms = (math as unknown as { expression: { transform: Record<string, MathFunction | undefined> } }).expression.transform;
const checked: Record<string, MathFunction> = {};
for (const [name, fn] of Object.entries(namespace)) {
  if (DISABLED.includes(name) || typeof fn !== "function" || !("signatures" in fn) || (fn as MathFunction).rawArgs) continue;
  const wrapped: MathFunction = guarded(name, fn as MathFunction);
  const transform = transforms[name];
  if (transform?.rawArgs) continue;
  if (transform) wrapped.transform = guarded(name, transform);
  checked[name] = wrapped;
}
math.import({ ...checked, ...Object.fromEntries(DISABLED.map((name) => [name, disabled(name)])) }, { override: true });

export interface CalculatorResult {
  expression: string;
  result: string;
}

/** Evaluates one expression; throws an AppError with the reason for anything math.js cannot evaluate. */
export function calculate(expression: string): CalculatorResult {
  const text = expression.trim();
  if (text === "") throw invalidRequest("The expression is empty.", "expression", "invalid_expression");
  if (text.length > MAX_EXPRESSION_CHARS)
    throw invalidRequest(`The expression is longer than ${MAX_EXPRESSION_CHARS} characters.`, "expression", "invalid_expression");
  let value: unknown;
  try {
    value = evaluate(text, new Map());
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw invalidRequest(`The expression could not be evaluated: ${(err as Error).message}.`, "expression", "invalid_expression");
  }
  if (typeof value === "function" || value === undefined)
    throw invalidRequest("The expression does not evaluate to a value.", "expression", "invalid_expression");
  // A result set of several lines (a;b) shows its last value, as a calculator would.
  const shown = isResultSet(value) ? value.entries.at(-1) : value;
  const result = format(shown, { precision: 14 });
  if (result.length > MAX_RESULT_CHARS) throw invalidRequest("The result is too large to show.", "expression", "invalid_expression");
  return { expression: text, result };
}

function isResultSet(value: unknown): value is { entries: unknown[] } {
  return typeof value === "object" && value !== null && (value as { isResultSet?: boolean }).isResultSet === true;
}
