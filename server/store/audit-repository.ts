import type { Db } from "./database.js";

/** One request to a key endpoint: who, what, how it went. Never any content. */
export interface AuditRow {
  request_id: string;
  account_id: string;
  key_id: string;
  created_ms: number;
  surface: string;
  method: string;
  path: string;
  model: string | null;
  mode: string | null;
  status: number;
  error_code: string | null;
  stop_reason: string | null;
  aborted: number;
  latency_ms: number;
  ttft_ms: number | null;
  queued_ms: number | null;
  input_tokens: number | null;
  output_tokens: number | null;
  reasoning_tokens: number | null;
  cached_tokens: number | null;
  session_id: string | null;
  batch_id: string | null;
  run_id: string | null;
  /** An agent run's final status and its number of steps (migration 0006). */
  run_status: string | null;
  run_steps: number | null;
}

export interface AuditFilter {
  accountId: string;
  /** Epoch ms, inclusive. */
  sinceMs?: number;
  /** Epoch ms, exclusive. */
  untilMs?: number;
  surfaces?: string[];
  /** Status codes from min to max, inclusive. */
  status?: { min: number; max: number };
  keyId?: string;
  sessionId?: string;
}

export interface AuditCursor {
  createdMs: number;
  requestId: string;
}

const COLUMNS = [
  "request_id",
  "account_id",
  "key_id",
  "created_ms",
  "surface",
  "method",
  "path",
  "model",
  "mode",
  "status",
  "error_code",
  "stop_reason",
  "aborted",
  "latency_ms",
  "ttft_ms",
  "queued_ms",
  "input_tokens",
  "output_tokens",
  "reasoning_tokens",
  "cached_tokens",
  "session_id",
  "batch_id",
  "run_id",
  "run_status",
  "run_steps",
] as const;

function where(filter: AuditFilter): { sql: string; params: unknown[] } {
  const clauses = ["account_id = ?"];
  const params: unknown[] = [filter.accountId];
  if (filter.sinceMs !== undefined) {
    clauses.push("created_ms >= ?");
    params.push(filter.sinceMs);
  }
  if (filter.untilMs !== undefined) {
    clauses.push("created_ms < ?");
    params.push(filter.untilMs);
  }
  if (filter.surfaces?.length) {
    clauses.push(`surface IN (${filter.surfaces.map(() => "?").join(", ")})`);
    params.push(...filter.surfaces);
  }
  if (filter.status) {
    clauses.push("status BETWEEN ? AND ?");
    params.push(filter.status.min, filter.status.max);
  }
  if (filter.keyId !== undefined) {
    clauses.push("key_id = ?");
    params.push(filter.keyId);
  }
  if (filter.sessionId !== undefined) {
    clauses.push("session_id = ?");
    params.push(filter.sessionId);
  }
  return { sql: clauses.join(" AND "), params };
}

export class AuditRepository {
  private readonly insertStatement;

  constructor(private readonly db: Db) {
    this.insertStatement = db.prepare(
      `INSERT OR IGNORE INTO audit_records (${COLUMNS.join(", ")}) VALUES (${COLUMNS.map((c) => `@${c}`).join(", ")})`,
    );
  }

  /** All rows in one transaction. */
  insertMany(rows: readonly AuditRow[]): void {
    this.db.transaction(() => {
      for (const row of rows) this.insertStatement.run(row);
    }).immediate();
  }

  find(accountId: string, requestId: string): AuditRow | undefined {
    return this.db.prepare("SELECT * FROM audit_records WHERE request_id = ? AND account_id = ?").get(requestId, accountId) as AuditRow | undefined;
  }

  /**
   * Newest first. `after`: the page of records older than the cursor; `before`: the page of records newer
   * than it (still newest first). Fetches one more than `limit` so the caller knows whether more exist.
   */
  page(filter: AuditFilter, limit: number, cursor: { after?: AuditCursor; before?: AuditCursor } = {}): { rows: AuditRow[]; hasMore: boolean } {
    const { sql, params } = where(filter);
    let order = "DESC";
    let extra = "";
    if (cursor.after) {
      extra = " AND (created_ms < ? OR (created_ms = ? AND request_id < ?))";
      params.push(cursor.after.createdMs, cursor.after.createdMs, cursor.after.requestId);
    } else if (cursor.before) {
      extra = " AND (created_ms > ? OR (created_ms = ? AND request_id > ?))";
      params.push(cursor.before.createdMs, cursor.before.createdMs, cursor.before.requestId);
      order = "ASC";
    }
    const rows = this.db
      .prepare(`SELECT * FROM audit_records WHERE ${sql}${extra} ORDER BY created_ms ${order}, request_id ${order} LIMIT ?`)
      .all(...params, limit + 1) as AuditRow[];
    const hasMore = rows.length > limit;
    const kept = rows.slice(0, limit);
    return { rows: order === "ASC" ? kept.reverse() : kept, hasMore };
  }

  /** The rows statistics need, oldest first. */
  statsRows(filter: AuditFilter): Array<Pick<AuditRow, "created_ms" | "surface" | "status" | "aborted" | "latency_ms" | "ttft_ms" | "input_tokens" | "output_tokens" | "reasoning_tokens" | "cached_tokens">> {
    const { sql, params } = where(filter);
    return this.db
      .prepare(
        `SELECT created_ms, surface, status, aborted, latency_ms, ttft_ms, input_tokens, output_tokens, reasoning_tokens, cached_tokens
         FROM audit_records WHERE ${sql} ORDER BY created_ms`,
      )
      .all(...params) as ReturnType<AuditRepository["statsRows"]>;
  }

  delete(accountId: string, requestId: string): boolean {
    return this.db.prepare("DELETE FROM audit_records WHERE request_id = ? AND account_id = ?").run(requestId, accountId).changes > 0;
  }

  /** Removes the records that arrived before `beforeMs`; returns how many. */
  deleteOlderThan(beforeMs: number): number {
    return this.db.prepare("DELETE FROM audit_records WHERE created_ms < ?").run(beforeMs).changes;
  }

  /**
   * Makes erased bytes unrecoverable from the data dir: secure_delete (set on every connection, see
   * database.ts) zeroes them in the page, and this moves every page out of the write-ahead log and truncates
   * it, so no older copy of a page holding them stays in svc.sqlite3-wal. False if a reader kept the
   * checkpoint from completing (the next erasure or retention sweep tries again).
   */
  scrub(): boolean {
    const [result] = this.db.pragma("wal_checkpoint(TRUNCATE)") as Array<{ busy: number; log: number; checkpointed: number }>;
    return result !== undefined && result.busy === 0;
  }
}
