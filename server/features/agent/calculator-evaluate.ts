// One expression evaluated in the calculator's process, its outcome as plain data.
import { AppError } from "../../core/errors.js";
import { calculate, type CalculatorAnswer } from "./calculator.js";

export function evaluateExpression(expression: string): CalculatorAnswer {
  try {
    return { ok: true, value: calculate(expression) };
  } catch (err) {
    if (err instanceof AppError) return { ok: false, message: err.message, code: err.code ?? "invalid_expression" };
    return { ok: false, message: `The expression could not be evaluated: ${(err as Error).message}.`, code: "invalid_expression" };
  }
}
