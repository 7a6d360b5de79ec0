// The agent's calculator: math.js's expression language (numbers, units, matrices, functions), never
// JavaScript. Functions that parse or define code, or build arbitrarily large values from a few characters,
// are switched off, following math.js's own security notes; each expression gets a fresh, empty scope.
import { all, create } from "mathjs";
import { invalidRequest } from "../../core/errors.js";

export const MAX_EXPRESSION_CHARS = 500;
const MAX_RESULT_CHARS = 2000;

const math = create(all!, { number: "number", precision: 64 });
const evaluate = math.evaluate.bind(math);
const format = math.format.bind(math);

const disabled = (name: string) => () => {
  throw new Error(`the function ${name} is not available in the calculator`);
};
math.import(
  Object.fromEntries(
    ["import", "createUnit", "evaluate", "parse", "simplify", "derivative", "compile", "resolve", "reviver", "range", "ones", "zeros", "identity", "diag", "resize", "random", "randomInt", "pickRandom", "matrixFromFunction"].map(
      (name) => [name, disabled(name)],
    ),
  ),
  { override: true },
);

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
