// The thread inside the calculator's process that evaluates expressions (calculator-worker.ts starts it and
// holds it to a processor-time budget): an expression in, its answer as plain data out.
import { parentPort } from "node:worker_threads";
import { evaluateExpression } from "./calculator-evaluate.js";

parentPort!.on("message", (expression: string) => parentPort!.postMessage(evaluateExpression(expression)));
parentPort!.postMessage("ready");
