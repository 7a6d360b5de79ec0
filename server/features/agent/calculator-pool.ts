// Runs the calculator off the server's main thread, under a time and a memory budget: a math.js expression
// can build huge values or run for minutes from a few characters (kron nested five times: 19 s and 1.6 GB;
// a 2-D variant was killed by the OOM killer), and a model that follows instructions injected through a
// file would write one. Expressions run in a child process of their own (workerpool) with a capped heap.
// The process stops an expression that passes its processor-time budget itself (calculator-worker.ts), so
// that the budget holds however busy the machine is; one that passes the heap ends the process; the tool
// answers the model with the reason, and the next expression gets a fresh thread or process. The clock is
// only a backstop here (a process starved or stuck for 30 s is killed). Not a worker thread of the server:
// a single large allocation (a string of 128 MB) past a worker's resourceLimits ends the whole process with
// V8's fatal out-of-memory error, which must be this child and not the server.
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import workerpool from "workerpool";
import { AppError } from "../../core/errors.js";
import type { CalculatorAnswer, CalculatorResult } from "./calculator.js";

export interface CalculatorBudget {
  /** Processor time for one expression once its process has it; default 1 s. */
  timeMs: number;
  /** The process's heap (math.js takes about 40 MB of it); default 128 MB. */
  heapMb: number;
  /** Wall time for one expression, a backstop for a process that gets no processor; default 30 s. */
  wallMs: number;
}

export const DEFAULT_CALCULATOR_BUDGET: CalculatorBudget = { timeMs: 1000, heapMb: 128, wallMs: 30_000 };

/** A process starting (loading math.js) may take this long on a busy machine. */
const STARTUP_MS = 30_000;
/** Expressions waiting beyond this many are refused at once. */
const MAX_WAITING = 32;
/** An idle process ends after this, and its memory goes with it. */
const IDLE_MS = 60_000;

type Pool = ReturnType<typeof workerpool.pool>;

function workerEntry(heapMb: number): { script: string; execArgv: string[] } {
  const here = import.meta.url;
  const ts = here.endsWith(".ts");
  const script = fileURLToPath(new URL(ts ? "./calculator-worker.ts" : "./calculator-worker.js", here));
  // From TypeScript sources (tests, tsx) the child loads tsx first.
  const loader = ts ? ["--import", new URL(`file://${createRequire(here).resolve("tsx")}`).href] : [];
  return { script, execArgv: [...loader, `--max-old-space-size=${heapMb}`, "--max-semi-space-size=8"] };
}

export class CalculatorPool {
  private pool: Pool | null = null;
  /** Whether the pool's process has started and loaded math.js (an expression's time starts on dispatch). */
  private warm = false;
  private starting: Promise<Pool> | null = null;
  private idle: NodeJS.Timeout | null = null;
  private running = 0;
  private closed = false;
  readonly budget: CalculatorBudget;

  constructor(budget: Partial<CalculatorBudget> = {}) {
    this.budget = { ...DEFAULT_CALCULATOR_BUDGET, ...budget };
  }

  /** Evaluates one expression; throws an AppError the model can read for anything without a result. */
  async evaluate(expression: string): Promise<CalculatorResult> {
    if (this.closed) throw new AppError("unavailable", "The server is shutting down.", { code: "shutting_down" });
    if (this.running >= MAX_WAITING) throw new AppError("rate_limit", "The calculator is busy; try again in a moment.", { code: "calculator_busy" });
    this.running++;
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    try {
      const pool = await this.ready();
      let answer: CalculatorAnswer;
      try {
        // The backstop starts when the process takes the expression, not while it waits.
        answer = (await pool.exec("evaluate", [expression, this.limits()]).timeout(this.budget.wallMs)) as CalculatorAnswer;
      } catch (err) {
        // The process was killed (the backstop) or ended (memory): the next one starts cold.
        this.warm = false;
        throw this.processError(err);
      }
      if (answer.ok) return answer.value;
      if ("limit" in answer) throw this.limitError(answer.limit, answer.message);
      throw new AppError("invalid_request", answer.message, { code: answer.code, param: "expression" });
    } finally {
      this.running--;
      this.scheduleIdle();
    }
  }

  private scheduleIdle(): void {
    if (this.running > 0 || this.closed) return;
    if (this.idle) clearTimeout(this.idle);
    this.idle = setTimeout(() => void this.stop(), IDLE_MS);
    this.idle.unref();
  }

  /** Starts the process ahead of a first expression (an agent run that may use the calculator begins). */
  warmUp(): void {
    if (this.closed || this.warm) return;
    void this.ready()
      .then(() => this.scheduleIdle())
      .catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.stop();
  }

  private async stop(): Promise<void> {
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    const pool = this.pool ?? (await this.starting?.catch(() => null)) ?? null;
    this.pool = null;
    this.warm = false;
    await pool?.terminate(true);
  }

  /** A pool whose process has loaded math.js, so the time budget counts evaluation only. */
  private async ready(): Promise<Pool> {
    if (this.pool && this.warm) return this.pool;
    this.starting ??= (async () => {
      if (!this.pool) {
        const { script, execArgv } = workerEntry(this.budget.heapMb);
        this.pool = workerpool.pool(script, {
          workerType: "process",
          maxWorkers: 1,
          maxQueueSize: MAX_WAITING,
          // A process past its budget is killed at once (1 ms: workerpool reads 0 as its default, 1 s): it is
          // busy in math.js and has nothing to clean up.
          workerTerminateTimeout: 1,
          // In the packaged app process.execPath is Electron, which ELECTRON_RUN_AS_NODE turns into plain Node.
          forkOpts: { execArgv, env: { ...process.env, ELECTRON_RUN_AS_NODE: "1" } },
          // What the child writes (V8's report when it runs out of heap) stays out of the server's log.
          emitStdStreams: true,
        });
      }
      const pool = this.pool;
      try {
        await pool.exec("evaluate", ["0", this.limits()]).timeout(STARTUP_MS);
        this.warm = true;
      } catch (err) {
        // Unless stop() has already taken it: a second terminate replaces workerpool's completion callback,
        // and the first one's promise (the one close() waits on) would never settle.
        if (this.pool === pool) {
          this.pool = null;
          void pool.terminate(true).catch(() => undefined);
        }
        throw new AppError("unavailable", `The calculator could not start: ${(err as Error).message}`, { code: "calculator_unavailable" });
      }
      return pool;
    })().finally(() => (this.starting = null));
    return this.starting;
  }

  private limits(): { cpuMs: number; heapMb: number } {
    return { cpuMs: this.budget.timeMs, heapMb: this.budget.heapMb };
  }

  /** An expression its process stopped: past the processor time or the heap, or its thread failed. */
  private limitError(limit: "time" | "memory" | "failed", detail: string): AppError {
    if (limit === "time")
      return new AppError("invalid_request", `The calculation needed more than ${this.budget.timeMs / 1000} s of processor time, the calculator's time limit, and was stopped.`, {
        code: "calculation_timeout",
        param: "expression",
      });
    if (limit === "memory") return this.memoryError();
    return new AppError("internal", `The calculator failed: ${detail}`, { code: "calculator_failed" });
  }

  private memoryError(): AppError {
    return new AppError("invalid_request", `The calculation needed more than the calculator's ${this.budget.heapMb} MB of memory and was stopped.`, {
      code: "calculation_too_large",
      param: "expression",
    });
  }

  /** The process itself failed the expression: the backstop killed it, it ran out of heap, or the queue is full. */
  private processError(err: unknown): AppError {
    const error = err as Error;
    if (error instanceof workerpool.Promise.TimeoutError)
      return new AppError("invalid_request", `The calculation did not finish within ${this.budget.wallMs / 1000} s and was stopped; the machine may be busy, try again.`, {
        code: "calculation_timeout",
        param: "expression",
      });
    if (/terminated unexpectedly/i.test(error.message)) return this.memoryError();
    if (/max queue size/i.test(error.message)) return new AppError("rate_limit", "The calculator is busy; try again in a moment.", { code: "calculator_busy" });
    return new AppError("internal", `The calculator failed: ${error.message}`, { code: "calculator_failed" });
  }
}

let shared: CalculatorPool | null = null;

/** The process's calculator, for tool boxes not given one (the agent's routes give their own). */
export function sharedCalculator(): CalculatorPool {
  shared ??= new CalculatorPool();
  return shared;
}
