// Message batches and their requests. Every change a crash must not lose or half-apply (a stored result
// and its batch's counts, a cancel, an expiry) is one transaction. Deleting a batch or its content
// overwrites the freed bytes (secure_delete, set for the connection in database.ts) and truncates the WAL,
// so the content is gone from the files, not only from the tables.
import type { Db } from "./database.js";

/** uploading: the create request is still being read (invisible to the API and the worker). */
export type BatchStatus = "uploading" | "in_progress" | "canceling" | "ended";
export type RequestState = "pending" | "running" | "succeeded" | "errored" | "canceled" | "expired";
export type EndedState = Exclude<RequestState, "pending" | "running">;

export interface BatchRow {
  seq: number;
  id: string;
  account_id: string;
  status: BatchStatus;
  request_count: number;
  succeeded: number;
  errored: number;
  canceled: number;
  expired: number;
  /** Epoch milliseconds, like every time here. */
  created_at: number;
  expires_at: number;
  ended_at: number | null;
  cancel_initiated_at: number | null;
  archived_at: number | null;
  idempotency_key: string | null;
  body_sha256: string | null;
}

export interface NewBatchRequest {
  idx: number;
  customId: string;
  /** The Messages request body, JSON. */
  params: string;
}

/** A request the worker took: it is `running` in the database until its result is stored or it is requeued. */
export interface ClaimedRequest {
  batchSeq: number;
  batchId: string;
  accountId: string;
  idx: number;
  customId: string;
  params: string;
}

export interface ListPage {
  rows: BatchRow[];
  hasMore: boolean;
}

/** The column counting requests that ended in each state. */
const COUNTER: Record<EndedState, string> = { succeeded: "succeeded", errored: "errored", canceled: "canceled", expired: "expired" };

const IN_FLIGHT = "('uploading', 'in_progress', 'canceling')";

export class BatchRepository {
  constructor(private readonly db: Db) {}

  /** Starts a batch whose requests are still arriving; returns its seq. */
  insertUploading(row: { id: string; accountId: string; createdAt: number; expiresAt: number; idempotencyKey: string | null }): number {
    const info = this.db
      .prepare(
        `INSERT INTO message_batches (id, account_id, status, created_at, expires_at, idempotency_key)
         VALUES (?, ?, 'uploading', ?, ?, ?)`,
      )
      .run(row.id, row.accountId, row.createdAt, row.expiresAt, row.idempotencyKey);
    return Number(info.lastInsertRowid);
  }

  appendRequests(batchSeq: number, requests: readonly NewBatchRequest[]): void {
    if (requests.length === 0) return;
    const insert = this.db.prepare("INSERT INTO message_batch_requests (batch_seq, idx, custom_id, params) VALUES (?, ?, ?, ?)");
    this.db.transaction(() => {
      for (const r of requests) insert.run(batchSeq, r.idx, r.customId, r.params);
    })();
  }

  /** The upload is complete and valid: the batch becomes visible and runnable. */
  commitUpload(batchSeq: number, requestCount: number, bodySha256: string): void {
    this.db
      .prepare("UPDATE message_batches SET status = 'in_progress', request_count = ?, body_sha256 = ? WHERE seq = ? AND status = 'uploading'")
      .run(requestCount, bodySha256, batchSeq);
  }

  find(id: string): BatchRow | undefined {
    return this.db.prepare("SELECT * FROM message_batches WHERE id = ?").get(id) as BatchRow | undefined;
  }

  findBySeq(seq: number): BatchRow | undefined {
    return this.db.prepare("SELECT * FROM message_batches WHERE seq = ?").get(seq) as BatchRow | undefined;
  }

  findByIdempotencyKey(accountId: string, key: string): BatchRow | undefined {
    return this.db.prepare("SELECT * FROM message_batches WHERE account_id = ? AND idempotency_key = ?").get(accountId, key) as BatchRow | undefined;
  }

  /** Batches of the account not yet ended (uploads under way included). */
  countInFlight(accountId: string): number {
    const row = this.db.prepare(`SELECT COUNT(*) AS n FROM message_batches WHERE account_id = ? AND status IN ${IN_FLIGHT}`).get(accountId) as { n: number };
    return row.n;
  }

  /**
   * Newest first, as the Messages API lists. `afterSeq`: the page after that batch (older ones);
   * `beforeSeq`: the page just before it (newer ones, still newest first).
   */
  list(accountId: string, options: { afterSeq?: number; beforeSeq?: number; limit: number }): ListPage {
    const { limit } = options;
    let rows: BatchRow[];
    if (options.beforeSeq !== undefined) {
      rows = this.db
        .prepare("SELECT * FROM message_batches WHERE account_id = ? AND status != 'uploading' AND seq > ? ORDER BY seq ASC LIMIT ?")
        .all(accountId, options.beforeSeq, limit + 1) as BatchRow[];
      const hasMore = rows.length > limit;
      return { rows: rows.slice(0, limit).reverse(), hasMore };
    }
    rows = this.db
      .prepare("SELECT * FROM message_batches WHERE account_id = ? AND status != 'uploading' AND seq < ? ORDER BY seq DESC LIMIT ?")
      .all(accountId, options.afterSeq ?? Number.MAX_SAFE_INTEGER, limit + 1) as BatchRow[];
    return { rows: rows.slice(0, limit), hasMore: rows.length > limit };
  }

  /**
   * Takes the next pending request, round robin over the runnable batches (starting after `afterBatchSeq`),
   * so that one large batch does not hold back the others. Marks it running.
   */
  claimNext(afterBatchSeq: number): ClaimedRequest | null {
    return this.db.transaction((): ClaimedRequest | null => {
      const batch = this.db
        .prepare(
          `SELECT b.seq, b.id, b.account_id FROM message_batches b
           WHERE b.status = 'in_progress'
             AND EXISTS (SELECT 1 FROM message_batch_requests r WHERE r.batch_seq = b.seq AND r.state = 'pending')
           ORDER BY (b.seq <= ?), b.seq LIMIT 1`,
        )
        .get(afterBatchSeq) as { seq: number; id: string; account_id: string } | undefined;
      if (!batch) return null;
      const request = this.db
        .prepare("SELECT idx, custom_id, params FROM message_batch_requests WHERE batch_seq = ? AND state = 'pending' ORDER BY idx LIMIT 1")
        .get(batch.seq) as { idx: number; custom_id: string; params: string };
      this.db.prepare("UPDATE message_batch_requests SET state = 'running' WHERE batch_seq = ? AND idx = ?").run(batch.seq, request.idx);
      return { batchSeq: batch.seq, batchId: batch.id, accountId: batch.account_id, idx: request.idx, customId: request.custom_id, params: request.params };
    }).immediate();
  }

  /**
   * Stores a running request's result, counts it and ends the batch when it was the last one: one
   * transaction. `startedAt`: when its generation began, if it did. False when the request was no longer
   * running (nothing changed).
   */
  finish(batchSeq: number, idx: number, state: EndedState, result: string, at: number, startedAt: number | null = null): boolean {
    return this.db.transaction((): boolean => {
      const changed = this.db
        .prepare(
          "UPDATE message_batch_requests SET state = ?, result = ?, params = NULL, started_at = ?, ended_at = ? WHERE batch_seq = ? AND idx = ? AND state = 'running'",
        )
        .run(state, result, startedAt, at, batchSeq, idx).changes;
      if (changed === 0) return false;
      this.db.prepare(`UPDATE message_batches SET ${COUNTER[state]} = ${COUNTER[state]} + 1 WHERE seq = ?`).run(batchSeq);
      this.endIfDone(batchSeq, at);
      return true;
    }).immediate();
  }

  /** A running request that must run again (the server is stopping, or no model was there to run it). */
  requeue(batchSeq: number, idx: number): void {
    this.db.prepare("UPDATE message_batch_requests SET state = 'pending', started_at = NULL WHERE batch_seq = ? AND idx = ? AND state = 'running'").run(batchSeq, idx);
  }

  /**
   * After a crash or restart: requests that were running have no stored result, so they run again; those
   * of a batch being canceled end canceled; uploads that never completed are dropped. Returns [requeued,
   * dropped uploads].
   */
  recover(now: number): [number, number] {
    return this.db.transaction((): [number, number] => {
      const requeued = this.db.prepare("UPDATE message_batch_requests SET state = 'pending', started_at = NULL WHERE state = 'running'").run().changes;
      const canceling = this.db.prepare("SELECT seq FROM message_batches WHERE status = 'canceling'").all() as Array<{ seq: number }>;
      for (const { seq } of canceling) {
        this.endPending(seq, "canceled", now);
        this.endIfDone(seq, now);
      }
      const uploads = this.db.prepare("SELECT seq FROM message_batches WHERE status = 'uploading'").all() as Array<{ seq: number }>;
      for (const { seq } of uploads) this.deleteRows(seq);
      return [requeued, uploads.length];
    }).immediate();
  }

  /**
   * in_progress → canceling: its pending requests end as canceled now; the batch ends at once when none is
   * running, else when the last running one settles. Returns the batch as it is afterwards.
   */
  cancel(batchSeq: number, at: number): BatchRow {
    return this.db.transaction((): BatchRow => {
      const moved = this.db.prepare("UPDATE message_batches SET status = 'canceling', cancel_initiated_at = ? WHERE seq = ? AND status = 'in_progress'").run(at, batchSeq).changes;
      if (moved > 0) {
        this.endPending(batchSeq, "canceled", at);
        this.endIfDone(batchSeq, at);
      }
      return this.findBySeq(batchSeq)!;
    }).immediate();
  }

  /** Batches still processing past their deadline: their pending requests end as expired. Returns their seqs. */
  expireDue(now: number): number[] {
    return this.db.transaction((): number[] => {
      const due = this.db.prepare("SELECT seq FROM message_batches WHERE status IN ('in_progress', 'canceling') AND expires_at <= ?").all(now) as Array<{ seq: number }>;
      for (const { seq } of due) {
        this.endPending(seq, "expired", now);
        this.endIfDone(seq, now);
      }
      return due.map((d) => d.seq);
    }).immediate();
  }

  /** Ended batches whose results were kept `retentionMs`: their requests and results are erased, the batch archived. */
  archiveDue(now: number, retentionMs: number): number {
    const due = this.db
      .prepare("SELECT seq FROM message_batches WHERE status = 'ended' AND archived_at IS NULL AND ended_at <= ?")
      .all(now - retentionMs) as Array<{ seq: number }>;
    if (due.length === 0) return 0;
    this.db.transaction(() => {
      for (const { seq } of due) {
        this.db.prepare("DELETE FROM message_batch_requests WHERE batch_seq = ?").run(seq);
        this.db.prepare("UPDATE message_batches SET archived_at = ? WHERE seq = ?").run(now, seq);
      }
    }).immediate();
    this.truncateWal();
    return due.length;
  }

  /** Removes the batch, its requests and its results, bytes included. */
  delete(batchSeq: number): void {
    this.db.transaction(() => this.deleteRows(batchSeq)).immediate();
    this.truncateWal();
  }

  /**
   * The next `limit` results lines after `afterIdx`, in input order, as one string ready to send. SQLite
   * builds it, so a page costs one short-lived string rather than an object and strings per line.
   */
  resultsChunk(batchSeq: number, afterIdx: number, limit: number): { lastIdx: number; lines: number; chunk: string } | null {
    const row = this.db
      .prepare(
        `SELECT max(idx) AS lastIdx, count(*) AS lines, group_concat(line, '' ORDER BY idx) AS chunk FROM (
           SELECT idx, '{"custom_id":' || json_quote(custom_id) || ',"result":' || result || '}' || char(10) AS line
           FROM message_batch_requests WHERE batch_seq = ? AND idx > ? AND result IS NOT NULL ORDER BY idx LIMIT ?)`,
      )
      .get(batchSeq, afterIdx, limit) as { lastIdx: number | null; lines: number; chunk: string | null };
    return row.lastIdx === null || row.chunk === null ? null : { lastIdx: row.lastIdx, lines: row.lines, chunk: row.chunk };
  }

  /** Per request: its state and when it started and ended (tests and the bench read this; never content). */
  timeline(batchSeq: number): Array<{ idx: number; custom_id: string; state: RequestState; started_at: number | null; ended_at: number | null }> {
    return this.db
      .prepare("SELECT idx, custom_id, state, started_at, ended_at FROM message_batch_requests WHERE batch_seq = ? ORDER BY idx")
      .all(batchSeq) as Array<{ idx: number; custom_id: string; state: RequestState; started_at: number | null; ended_at: number | null }>;
  }

  private endPending(batchSeq: number, state: "canceled" | "expired", at: number): void {
    const n = this.db
      .prepare("UPDATE message_batch_requests SET state = ?, result = ?, params = NULL, ended_at = ? WHERE batch_seq = ? AND state = 'pending'")
      .run(state, JSON.stringify({ type: state }), at, batchSeq).changes;
    if (n > 0) this.db.prepare(`UPDATE message_batches SET ${COUNTER[state]} = ${COUNTER[state]} + ? WHERE seq = ?`).run(n, batchSeq);
  }

  private endIfDone(batchSeq: number, at: number): void {
    this.db
      .prepare(
        `UPDATE message_batches SET status = 'ended', ended_at = ?
         WHERE seq = ? AND status IN ('in_progress', 'canceling') AND succeeded + errored + canceled + expired >= request_count`,
      )
      .run(at, batchSeq);
  }

  private deleteRows(batchSeq: number): void {
    this.db.prepare("DELETE FROM message_batch_requests WHERE batch_seq = ?").run(batchSeq);
    this.db.prepare("DELETE FROM message_batches WHERE seq = ?").run(batchSeq);
  }

  /** Old WAL frames still hold what was just deleted; a truncating checkpoint removes them from the disk file. */
  private truncateWal(): void {
    this.db.pragma("wal_checkpoint(TRUNCATE)");
  }
}
