// Runs batch requests through the same pipeline as the HTTP surfaces, in the scheduler's batch class, and
// stores each result the moment it is known (one transaction with the batch's counts).
//
// - In flight: as many requests as the scheduler lets background work run (all sequences but one, which
//   stays free for interactive requests), plus one waiting in the scheduler's queue, so the engine never
//   idles between two requests and an interactive request that arrives still goes first.
// - A request is `running` in the database while it runs. After a crash it has no stored result and runs
//   again; a stored result is never replaced (finish() only moves a running request).
// - No model, or a model being switched: the request goes back to pending and the worker waits.
import { AppError, toAppError } from "../../core/errors.js";
import { newId } from "../../core/ids.js";
import type { InferenceResult } from "../../core/inference.js";
import type { InferencePipeline } from "../../pipeline/pipeline.js";
import type { BatchRepository, ClaimedRequest, EndedState } from "../../store/batches-repository.js";
import { encodeAnthropicError } from "../../http/anthropic-errors.js";
import { withWireParam } from "../../http/errors.js";
import { MESSAGES_PARAMS } from "../../surfaces/messages/params.js";
import { decodeMessagesRequest } from "../../surfaces/messages/decode.js";
import { encodeMessagesResponse } from "../../surfaces/messages/encode.js";

export type WorkerLog = (level: "debug" | "info" | "warn" | "error", message: string) => void;

/** Why a running request was stopped. */
export type StopReason = "canceled" | "expired" | "shutdown";

class Stop extends Error {
  constructor(readonly reason: StopReason) {
    super(`batch request stopped: ${reason}`);
  }
}

interface Running {
  batchSeq: number;
  controller: AbortController;
  done: Promise<void>;
}

export interface BatchWorkerOptions {
  repo: BatchRepository;
  pipeline: InferencePipeline;
  log?: WorkerLog;
  now?: () => number;
  /** Requests in flight at once; default: what the scheduler lets batch work run, plus one waiting. */
  concurrency?: () => number;
  /** How long to wait before trying again when no model could run a request. Default 2 s. */
  retryMs?: number;
}

/** Background sequences (all but one when there are several) plus one queued. 0 while no model is ready. */
export function defaultConcurrency(pipeline: InferencePipeline): () => number {
  return () => {
    const capacity = pipeline.scheduler.stats().capacity;
    if (capacity <= 0) return 0;
    return (capacity === 1 ? 1 : capacity - 1) + 1;
  };
}

export class BatchWorker {
  private readonly running = new Map<string, Running>();
  private readonly repo: BatchRepository;
  private readonly pipeline: InferencePipeline;
  private readonly log: WorkerLog;
  private readonly now: () => number;
  private readonly concurrency: () => number;
  private readonly retryMs: number;
  private cursor = 0;
  private stopped = true;
  private retryTimer: NodeJS.Timeout | null = null;

  constructor(options: BatchWorkerOptions) {
    this.repo = options.repo;
    this.pipeline = options.pipeline;
    this.log = options.log ?? (() => undefined);
    this.now = options.now ?? Date.now;
    this.concurrency = options.concurrency ?? defaultConcurrency(options.pipeline);
    this.retryMs = options.retryMs ?? 2000;
  }

  start(): void {
    this.stopped = false;
    this.wake();
  }

  /** Requests in flight now (running or waiting for a sequence). */
  get inFlight(): number {
    return this.running.size;
  }

  /** Takes as many pending requests as there is room for. Call after anything may have made work runnable. */
  wake(): void {
    if (this.stopped || this.retryTimer) return;
    const room = this.concurrency();
    if (room <= 0 && this.running.size === 0) {
      // No model: look again shortly rather than claim requests nothing can run.
      this.retryLater();
      return;
    }
    while (this.running.size < room) {
      let claimed: ClaimedRequest | null;
      try {
        claimed = this.repo.claimNext(this.cursor);
      } catch (err) {
        this.log("error", `Batch worker: could not take the next request: ${(err as Error).message}`);
        this.retryLater();
        return;
      }
      if (!claimed) return;
      this.cursor = claimed.batchSeq;
      this.launch(claimed);
    }
  }

  /** Stops the batch's running requests; each ends with `reason` (canceled, expired) as its result. */
  stopBatch(batchSeq: number, reason: Exclude<StopReason, "shutdown">): void {
    for (const run of this.running.values()) if (run.batchSeq === batchSeq) run.controller.abort(new Stop(reason));
  }

  /** Stops taking requests; running ones stop and go back to pending (they run again after a restart). */
  async close(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const runs = [...this.running.values()];
    for (const run of runs) run.controller.abort(new Stop("shutdown"));
    await Promise.all(runs.map((r) => r.done));
  }

  private retryLater(): void {
    if (this.retryTimer || this.stopped) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.wake();
    }, this.retryMs);
    this.retryTimer.unref();
  }

  private launch(claimed: ClaimedRequest): void {
    const key = `${claimed.batchSeq}:${claimed.idx}`;
    const controller = new AbortController();
    const run: Running = { batchSeq: claimed.batchSeq, controller, done: Promise.resolve() };
    this.running.set(key, run);
    run.done = this.execute(claimed, controller.signal)
      .catch((err: unknown) => this.log("error", `Batch worker: request ${claimed.customId} of ${claimed.batchId} failed to settle: ${(err as Error).message}`))
      .finally(() => {
        this.running.delete(key);
        this.wake();
      });
  }

  private async execute(claimed: ClaimedRequest, signal: AbortSignal): Promise<void> {
    const { batchSeq, idx } = claimed;
    let result: InferenceResult | null = null;
    let failure: unknown = null;
    let envelope: Parameters<typeof encodeMessagesResponse>[1] | null = null;
    let startedAt: number | null = null;
    try {
      const decoded = decodeMessagesRequest(JSON.parse(claimed.params));
      envelope = { id: newId("msg_"), model: decoded.model, thinkingDisplay: decoded.thinkingDisplay };
      const stream = await this.pipeline.open(decoded.inference, { signal, accountId: claimed.accountId, workClass: "batch" });
      // When it was given the sequence, not when its first event came (the prompt read, a trip to the engine
      // process): the order of the requests that held the sequence, as the scheduler gave it.
      startedAt = Math.round(this.now() - Math.max(0, performance.now() - stream.grantedAt));
      for await (const event of stream) if (event.type === "done") result = event.result;
    } catch (err) {
      failure = err;
    }

    if (result && envelope) {
      this.store(claimed, "succeeded", { type: "succeeded", message: encodeMessagesResponse(result, envelope) }, startedAt);
      return;
    }
    const stop = signal.aborted && signal.reason instanceof Stop ? signal.reason.reason : null;
    if (stop === "shutdown") {
      this.repo.requeue(batchSeq, idx);
      return;
    }
    if (stop) {
      this.store(claimed, stop, { type: stop }, startedAt);
      return;
    }
    const error = failure === null ? new AppError("internal", "The generation ended without a result.") : toAppError(failure);
    if (error.kind === "unavailable" || error.kind === "rate_limit") {
      // No model (or one loading, or the queue full): nothing is wrong with the request; it runs later.
      this.repo.requeue(batchSeq, idx);
      this.retryLater();
      return;
    }
    if (error.status >= 500) this.log("error", `Batch ${claimed.batchId}, request ${claimed.customId}: ${(failure as Error)?.stack ?? error.message}`);
    this.store(claimed, "errored", { type: "errored", error: encodeAnthropicError(withWireParam(error, MESSAGES_PARAMS), newId("req_")) }, startedAt);
  }

  private store(claimed: ClaimedRequest, state: EndedState, result: unknown, startedAt: number | null): void {
    try {
      this.repo.finish(claimed.batchSeq, claimed.idx, state, JSON.stringify(result), this.now(), startedAt);
    } catch (err) {
      // The database refused the write (disk full, locked too long): the request runs again later rather
      // than staying "running" with no result.
      this.log("error", `Batch ${claimed.batchId}: could not store the result of ${claimed.customId}: ${(err as Error).message}`);
      try {
        this.repo.requeue(claimed.batchSeq, claimed.idx);
      } catch {
        // Still failing: the next start requeues it (recover()).
      }
      this.retryLater();
    }
  }
}
