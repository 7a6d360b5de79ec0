// The calculator's own process (calculator-pool.ts starts it): one expression in, its result or the reason
// it has none out, as plain data (an AppError does not cross processes as one). It runs at the lowest CPU
// priority: loading math.js (a second or two of CPU) and an expression running to its time limit take
// only what the server and the model leave over.
import { setPriority } from "node:os";
import workerpool from "workerpool";
import type { CalculatorAnswer } from "./calculator.js";

try {
  setPriority(19);
} catch {
  // Not allowed here (some sandboxes): the budgets still hold.
}
// Loaded after the priority is lowered (a static import would load math.js first).
const evaluator = import("./calculator-evaluate.js");

workerpool.worker({ evaluate: async (expression: string): Promise<CalculatorAnswer> => (await evaluator).evaluateExpression(expression) });
