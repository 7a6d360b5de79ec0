// The calculator's own process (calculator-pool.ts starts it). Its main thread only supervises: each
// expression is evaluated on a thread of its own (calculator-thread.ts) while this one counts the processor
// time the process spends on it, and stops the thread once it passes the budget. Processor time, not the
// clock: on a machine busy with the model a 10 ms expression may take a second of wall time and is not a
// runaway, while one that computes for a whole second is, however idle the machine. A stopped thread is
// replaced before the next expression; memory is bounded by the process's heap (see calculator-pool.ts).
// The process runs at the server's priority: the budget already bounds what a runaway costs the model (a
// second of one core), and a lower one starved honest expressions behind a busy model (at nice 19 math.js
// did not load within 30 s beside four busy threads on two cores).
import { Worker } from "node:worker_threads";
import workerpool from "workerpool";
import type { CalculatorAnswer } from "./calculator.js";

/** How often the supervisor reads the process's processor time while an expression runs. */
const POLL_MS = 10;

const here = import.meta.url;

/** A new evaluating thread: the built module, or from TypeScript sources (tests, tsx) through tsx's loader. */
function newWorker(heapMb: number): Worker {
  // Past this heap the thread stops with ERR_WORKER_OUT_OF_MEMORY; one allocation far past it ends the
  // whole process instead (V8's fatal error), which the pool reads the same way.
  const options = { resourceLimits: { maxOldGenerationSizeMb: heapMb } };
  if (!here.endsWith(".ts")) return new Worker(new URL("./calculator-thread.js", here), options);
  // The process's --import of tsx does not reach its threads (Node 20): the thread imports through tsx's API.
  const thread = JSON.stringify(new URL("./calculator-thread.ts", here).href);
  const api = JSON.stringify(import.meta.resolve("tsx/esm/api"));
  return new Worker(`import(${api}).then((tsx) => tsx.tsImport(${thread}, ${thread}))`, { ...options, eval: true });
}

interface EvalThread {
  worker: Worker;
  ready: Promise<void>;
}
let current: EvalThread | null = null;

/** The evaluating thread, started (math.js loaded: a second or two) on first use and after a stop. */
function evalThread(heapMb: number): EvalThread {
  if (current) return current;
  const worker = newWorker(heapMb);
  const ready = new Promise<void>((resolve, reject) => {
    worker.once("message", () => resolve());
    worker.once("error", reject);
    worker.once("exit", (code) => reject(new Error(`the calculator's thread ended while starting (code ${code})`)));
  });
  // Awaited by the expression that needs it; a thread started ahead (after a stop) may fail unawaited.
  ready.catch(() => undefined);
  const thread: EvalThread = { worker, ready };
  worker.once("exit", () => {
    if (current === thread) current = null;
  });
  current = thread;
  return thread;
}

function processorMs(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
}

/** Evaluates one expression within `cpuMs` of the process's processor time and `heapMb` of heap. */
async function evaluate(expression: string, { cpuMs, heapMb }: { cpuMs: number; heapMb: number }): Promise<CalculatorAnswer> {
  const thread = evalThread(heapMb);
  await thread.ready;
  const { worker } = thread;
  return new Promise<CalculatorAnswer>((resolve) => {
    const started = process.cpuUsage();
    const finish = (answer: CalculatorAnswer) => {
      clearInterval(poll);
      worker.off("message", finish);
      worker.off("error", onError);
      resolve(answer);
    };
    const onError = (err: Error & { code?: string }) => finish({ ok: false, limit: err.code === "ERR_WORKER_OUT_OF_MEMORY" ? "memory" : "failed", message: err.message });
    const poll = setInterval(() => {
      if (processorMs(started) <= cpuMs) return;
      current = null;
      void worker.terminate();
      // The next expression finds its thread loading already.
      evalThread(heapMb);
      finish({ ok: false, limit: "time", message: `stopped after ${cpuMs} ms of processor time` });
    }, POLL_MS);
    worker.on("message", finish);
    worker.on("error", onError);
    worker.postMessage(expression);
  });
}

workerpool.worker({ evaluate });
