// Message batches: create (streamed, checked up front, idempotent), read, list, cancel, delete, results, and
// the clock's work: processing deadlines (24 h) and results retention (29 days). The worker runs the requests.
import { AppError } from "../../core/errors.js";
import { newId } from "../../core/ids.js";
import type { InferencePipeline } from "../../pipeline/pipeline.js";
import type { BatchRepository, BatchRow } from "../../store/batches-repository.js";
import { BATCH_ID_PREFIX, BATCH_LIMITS, type BatchLimits } from "./batch-object.js";
import { invalidEntriesError } from "./batch-entries.js";
import { BatchWorker, type BatchWorkerOptions, type WorkerLog } from "./batch-worker.js";
import { hashBody, readBatchBody } from "./read-batch-body.js";

export interface BatchServiceOptions {
  repo: BatchRepository;
  pipeline: InferencePipeline;
  log?: WorkerLog;
  /** Epoch ms; tests move it. */
  now?: () => number;
  limits?: Partial<BatchLimits>;
  /** How often deadlines and retention are checked. Default 60 s. */
  sweepMs?: number;
  worker?: Pick<BatchWorkerOptions, "concurrency" | "retryMs">;
}

export interface CreateInput {
  accountId: string;
  idempotencyKey?: string;
  body: AsyncIterable<Buffer | string>;
}

export interface ListInput {
  accountId: string;
  limit: number;
  afterId?: string;
  beforeId?: string;
}

/**
 * Lines per chunk of the results stream (about 45 KB with typical answers). Small chunks are short-lived
 * strings the young generation collects at once; measured in bench/batches.ts, the server's RSS then stays
 * flat while 100,000 lines stream out.
 */
const RESULTS_PAGE = 64;

function notFound(id: string): AppError {
  return new AppError("not_found", `No message batch with id '${id}'.`, { code: "batch_not_found" });
}

export class BatchService {
  readonly repo: BatchRepository;
  readonly worker: BatchWorker;
  readonly limits: BatchLimits;
  private readonly now: () => number;
  private readonly log: WorkerLog;
  private readonly sweepMs: number;
  private sweeper: NodeJS.Timeout | null = null;

  constructor(options: BatchServiceOptions) {
    this.repo = options.repo;
    this.now = options.now ?? Date.now;
    this.log = options.log ?? (() => undefined);
    this.limits = { ...BATCH_LIMITS, ...options.limits };
    this.sweepMs = options.sweepMs ?? 60_000;
    this.worker = new BatchWorker({ repo: options.repo, pipeline: options.pipeline, log: options.log, now: this.now, ...options.worker });
  }

  /** Recovers from a crash (running requests run again), applies deadlines, and starts the worker. */
  start(): void {
    const [requeued, uploads] = this.repo.recover(this.now());
    if (requeued > 0) this.log("info", `Batches: ${requeued} request${requeued === 1 ? "" : "s"} interrupted by the last stop will run again.`);
    if (uploads > 0) this.log("info", `Batches: dropped ${uploads} batch upload${uploads === 1 ? "" : "s"} that never completed.`);
    this.sweep();
    this.worker.start();
    this.sweeper = setInterval(() => this.sweep(), this.sweepMs);
    this.sweeper.unref();
  }

  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    await this.worker.close();
  }

  /** Ends batches past their processing deadline (what has not run expires) and erases results past retention. */
  sweep(): void {
    try {
      const now = this.now();
      for (const seq of this.repo.expireDue(now)) this.worker.stopBatch(seq, "expired");
      const archived = this.repo.archiveDue(now, this.limits.resultsRetentionMs);
      if (archived > 0) this.log("info", `Batches: erased the results of ${archived} batch${archived === 1 ? "" : "es"} kept ${Math.round(this.limits.resultsRetentionMs / 86_400_000)} days.`);
    } catch (err) {
      this.log("error", `Batches: the sweep failed: ${(err as Error).message}`);
    }
  }

  /**
   * Reads the body as it arrives, checking and staging each request; the batch appears (in_progress) only
   * once the whole body was read and every request is valid. With an Idempotency-Key, a retry with the same
   * body returns the batch made the first time, and another body is a 422.
   */
  async create(input: CreateInput): Promise<{ batch: BatchRow; replayed: boolean }> {
    const { accountId } = input;
    const key = input.idempotencyKey;
    if (key !== undefined) {
      const existing = this.repo.findByIdempotencyKey(accountId, key);
      if (existing) return { batch: await this.replay(existing, key, input.body), replayed: true };
    }
    const inFlight = this.repo.countInFlight(accountId);
    if (inFlight >= this.limits.inFlightPerAccount)
      throw new AppError(
        "rate_limit",
        `This account already has ${inFlight} batches in progress, the limit is ${this.limits.inFlightPerAccount}. Wait for one to end (or cancel one) and retry.`,
        { code: "batch_limit_exceeded", retryAfter: 60 },
      );

    const createdAt = this.now();
    let seq: number;
    try {
      seq = this.repo.insertUploading({
        id: newId(BATCH_ID_PREFIX),
        accountId,
        createdAt,
        expiresAt: createdAt + this.limits.processingWindowMs,
        idempotencyKey: key ?? null,
      });
    } catch (err) {
      // Another request with the same key got in first and is still being read.
      if (key !== undefined && /UNIQUE/i.test((err as Error).message)) throw this.keyInUse();
      throw err;
    }
    try {
      const outcome = await readBatchBody(input.body, {
        maxBytes: this.limits.maxBytes,
        maxRequests: this.limits.maxRequests,
        onEntries: (entries) => this.repo.appendRequests(seq, entries.map((e) => ({ idx: e.index, customId: e.customId, params: e.params }))),
      });
      if (outcome.problemCount > 0) throw invalidEntriesError(outcome.problems, outcome.problemCount, outcome.count);
      this.repo.commitUpload(seq, outcome.count, outcome.sha256);
    } catch (err) {
      this.repo.delete(seq);
      throw err;
    }
    this.worker.wake();
    return { batch: this.repo.findBySeq(seq)!, replayed: false };
  }

  private async replay(existing: BatchRow, key: string, body: AsyncIterable<Buffer | string>): Promise<BatchRow> {
    if (existing.status === "uploading") throw this.keyInUse();
    const sha256 = await hashBody(body, this.limits.maxBytes);
    if (sha256 !== existing.body_sha256)
      throw new AppError(
        "unprocessable",
        `The Idempotency-Key '${key}' was already used for batch ${existing.id} with a different body. Use a new key for a new batch, or send the same body to get that batch again.`,
        { code: "idempotency_key_reused", param: "Idempotency-Key" },
      );
    return this.repo.findBySeq(existing.seq) ?? existing;
  }

  private keyInUse(): AppError {
    return new AppError("conflict", "A request with this Idempotency-Key is still being processed; retry in a moment.", {
      code: "idempotency_key_in_use",
      retryAfter: 1,
    });
  }

  /** The account's batch, or 404 (another account's batch is not there for this one). */
  get(accountId: string, id: string): BatchRow {
    const row = id.startsWith(BATCH_ID_PREFIX) ? this.repo.find(id) : undefined;
    if (!row || row.account_id !== accountId || row.status === "uploading") throw notFound(id);
    return row;
  }

  list(input: ListInput): { rows: BatchRow[]; hasMore: boolean } {
    const cursor = (id: string, param: string): number => {
      const row = id.startsWith(BATCH_ID_PREFIX) ? this.repo.find(id) : undefined;
      if (!row || row.account_id !== input.accountId)
        throw new AppError("invalid_request", `${param}: '${id}' is not one of your message batches.`, { code: "invalid_request", param });
      return row.seq;
    };
    return this.repo.list(input.accountId, {
      limit: input.limit,
      afterSeq: input.afterId !== undefined ? cursor(input.afterId, "after_id") : undefined,
      beforeSeq: input.beforeId !== undefined ? cursor(input.beforeId, "before_id") : undefined,
    });
  }

  /** in_progress → canceling (→ ended once running requests settle). Canceling or ended batches come back as they are. */
  cancel(accountId: string, id: string): BatchRow {
    const row = this.get(accountId, id);
    if (row.status !== "in_progress") return row;
    const after = this.repo.cancel(row.seq, this.now());
    this.worker.stopBatch(row.seq, "canceled");
    return after;
  }

  /** Only an ended batch can be deleted; its requests and results go with it. */
  delete(accountId: string, id: string): void {
    const row = this.get(accountId, id);
    if (row.status !== "ended")
      throw new AppError("conflict", `Batch ${id} is ${row.status === "canceling" ? "being canceled" : "still in progress"}; cancel it and wait for it to end before deleting it.`, {
        code: "batch_not_ended",
      });
    this.repo.delete(row.seq);
  }

  /**
   * The results as JSONL, in the order of the requests: checked now (a 4xx before any byte is sent), then
   * read a page of lines at a time as the consumer pulls, so memory holds one page whatever the batch's size.
   */
  results(accountId: string, id: string): AsyncGenerator<string> {
    const row = this.checkResultsReady(accountId, id);
    const repo = this.repo;
    return (async function* () {
      for (let after = -1; ; ) {
        const page = repo.resultsChunk(row.seq, after, RESULTS_PAGE);
        if (!page) return;
        after = page.lastIdx;
        yield page.chunk;
      }
    })();
  }

  /** Throws unless the results can be read now (ended, not yet erased). */
  checkResultsReady(accountId: string, id: string): BatchRow {
    const row = this.get(accountId, id);
    if (row.status !== "ended")
      throw new AppError("conflict", `Batch ${id} has not ended yet (${row.status}); its results can be read once processing_status is ended.`, {
        code: "batch_not_ended",
      });
    if (row.archived_at !== null)
      throw new AppError("not_found", `The results of batch ${id} were erased on ${new Date(row.archived_at).toISOString()}, ${Math.round(this.limits.resultsRetentionMs / 86_400_000)} days after it ended.`, {
        code: "batch_results_expired",
      });
    return row;
  }
}
