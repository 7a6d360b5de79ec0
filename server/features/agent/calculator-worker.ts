// The calculator's own process (calculator-pool.ts starts it): one expression in, its result or the reason
// it has none out, as plain data (an AppError does not cross processes as one).
import workerpool from "workerpool";
import { AppError } from "../../core/errors.js";
import { calculate, type CalculatorResult } from "./calculator.js";

export type CalculatorAnswer = { ok: true; value: CalculatorResult } | { ok: false; message: string; code: string };

export function evaluateExpression(expression: string): CalculatorAnswer {
  try {
    return { ok: true, value: calculate(expression) };
  } catch (err) {
    if (err instanceof AppError) return { ok: false, message: err.message, code: err.code ?? "invalid_expression" };
    return { ok: false, message: `The expression could not be evaluated: ${(err as Error).message}.`, code: "invalid_expression" };
  }
}

workerpool.worker({ evaluate: evaluateExpression });
