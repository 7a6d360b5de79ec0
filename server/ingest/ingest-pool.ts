// Runs extractions in a worker thread, one at a time (memory stays bounded on a small machine), requests
// before uploads. The worker ends when idle so OCR and PDF memory goes back; a stuck or crashed extraction
// ends its worker and fails alone.
import { Worker } from "node:worker_threads";
import { AppError, type AppErrorKind } from "../core/errors.js";
import type { WorkerReply, WorkerTask } from "./ingest-worker.js";
import type { Extracted, IngestOptions, IngestSource } from "./types.js";

export type IngestPriority = "request" | "upload";

interface Job {
  source: IngestSource;
  options: IngestOptions;
  priority: IngestPriority;
  timeoutMs: number;
  resolve(result: Extracted): void;
  reject(err: unknown): void;
}

function startWorker(): Worker {
  const here = import.meta.url;
  if (here.endsWith(".ts")) {
    // Running from TypeScript sources (tests, tsx): the worker registers tsx before loading its module.
    const entry = new URL("./ingest-worker.ts", here).href;
    return new Worker(`import("tsx/esm/api").then((m) => { m.register(); return import(${JSON.stringify(entry)}); });`, { eval: true });
  }
  return new Worker(new URL("./ingest-worker.js", here));
}

export class IngestPool {
  private worker: Worker | null = null;
  private readonly queue: Job[] = [];
  private current: { job: Job; id: number; timer: NodeJS.Timeout } | null = null;
  private nextId = 1;
  private idleTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** Peak resident memory the worker reported (the process's, threads share it), for benchmarks. */
  lastMaxRssBytes = 0;

  constructor(private readonly options: { idleMs?: number } = {}) {}

  run(source: IngestSource, options: IngestOptions, settings: { priority: IngestPriority; timeoutMs: number }): Promise<Extracted> {
    if (this.closed) return Promise.reject(new AppError("unavailable", "The server is shutting down.", { code: "shutting_down" }));
    return new Promise((resolve, reject) => {
      const job: Job = { source, options, ...settings, resolve, reject };
      // Requests wait behind the running job but before queued uploads.
      const at = settings.priority === "request" ? this.queue.findIndex((j) => j.priority === "upload") : -1;
      if (at >= 0) this.queue.splice(at, 0, job);
      else this.queue.push(job);
      this.pump();
    });
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = startWorker();
    worker.on("message", (reply: WorkerReply) => this.settle(reply));
    worker.on("error", (err) => this.fail(worker, new AppError("internal", `The extraction failed: ${err.message}`, { code: "extraction_failed", cause: err })));
    worker.on("exit", (code) => this.fail(worker, new AppError("internal", `The extraction worker stopped (exit code ${code}).`, { code: "extraction_failed" })));
    this.worker = worker;
    return worker;
  }

  private pump(): void {
    if (this.current || this.queue.length === 0) {
      if (!this.current && this.queue.length === 0) this.scheduleIdle();
      return;
    }
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    const job = this.queue.shift()!;
    const worker = this.ensureWorker();
    worker.ref();
    const id = this.nextId++;
    const timer = setTimeout(() => {
      const seconds = Math.round(job.timeoutMs / 1000);
      this.fail(worker, new AppError("unprocessable", `Reading the file took longer than ${seconds} seconds and was stopped.`, { code: "extraction_timeout" }));
    }, job.timeoutMs);
    this.current = { job, id, timer };
    const transfer = job.source.bytes ? { ...job.source, bytes: new Uint8Array(job.source.bytes) } : job.source;
    worker.postMessage({ id, source: transfer, options: job.options } satisfies WorkerTask);
  }

  private settle(reply: WorkerReply): void {
    if (!this.current || this.current.id !== reply.id) return;
    const { job, timer } = this.current;
    clearTimeout(timer);
    this.current = null;
    if (reply.ok) {
      this.lastMaxRssBytes = reply.maxRssBytes;
      job.resolve(reply.result);
    } else if (reply.error.app) job.reject(new AppError(reply.error.kind as AppErrorKind, reply.error.message, { code: reply.error.code }));
    else job.reject(new AppError("internal", `The extraction failed: ${reply.error.message}`, { code: "extraction_failed" }));
    this.pump();
  }

  /** The worker died or must die: its job fails, the next job gets a fresh worker. */
  private fail(worker: Worker, error: AppError): void {
    if (this.worker !== worker) return;
    this.worker = null;
    void worker.terminate();
    if (this.current) {
      clearTimeout(this.current.timer);
      this.current.job.reject(error);
      this.current = null;
    }
    if (!this.closed) this.pump();
  }

  private scheduleIdle(): void {
    if (!this.worker || this.idleTimer) return;
    this.worker.unref();
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      if (this.current || !this.worker) return;
      const worker = this.worker;
      this.worker = null;
      void worker.terminate();
    }, this.options.idleMs ?? 30_000);
    this.idleTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(new AppError("unavailable", "The server is shutting down.", { code: "shutting_down" }));
    if (this.idleTimer) clearTimeout(this.idleTimer);
    const worker = this.worker;
    this.worker = null;
    if (this.current) {
      clearTimeout(this.current.timer);
      this.current.job.reject(new AppError("unavailable", "The server is shutting down.", { code: "shutting_down" }));
      this.current = null;
    }
    if (worker) await worker.terminate();
  }
}
