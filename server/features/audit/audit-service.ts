// Audit records: one per request to a key endpoint, written after its response ended (a RequestObserver:
// the request only hands its context over; writes are batched into one transaction per turn of the event
// loop and can never fail a request). Never any content: no prompt, output, file text or tool arguments,
// only what is listed in AuditRow. Reads are per account; erasure zeroes the bytes (see AuditRepository.scrub);
// records older than the retention period are removed automatically.
import { AppError } from "../../core/errors.js";
import type { RequestContext, RequestObserver, RequestOutcome } from "../../core/request-context.js";
import type { AuditFilter, AuditRow } from "../../store/audit-repository.js";
import type { Store } from "../../store/store.js";
import type { AuditListQuery } from "./audit-query.js";
import { dayOf, nextDay, startOfDay } from "./zoned-days.js";

// The facts beyond the basics that the audit records about a request: the features that know them (batches,
// the agent) set them on the request's context; the layers below never see these names.
declare module "../../core/request-context.js" {
  interface RequestContext {
    /** The batch a request reads or creates (/v1/messages/batches). */
    batchId?: string;
    /** The agent run a request starts or cancels. */
    runId?: string;
    /** An agent run's outcome (its status and number of steps), for the audit record. */
    run?: { status: string; steps: number };
  }
}

export const DEFAULT_RETENTION_DAYS = 90;
const SWEEP_INTERVAL_MS = 60 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

export interface AuditUsage {
  input_tokens: number | null;
  output_tokens: number | null;
  reasoning_tokens: number | null;
  cached_tokens: number | null;
}

/** What GET /v1/audit/{request_id} returns. */
export interface AuditRecord {
  id: string;
  object: "audit.record";
  request_id: string;
  created_at: number;
  account_id: string;
  key_id: string;
  surface: string;
  method: string;
  path: string;
  model: string | null;
  mode: string | null;
  status: number;
  error_code: string | null;
  stop_reason: string | null;
  aborted: boolean;
  latency_ms: number;
  ttft_ms: number | null;
  queued_ms: number | null;
  usage: AuditUsage;
  session_id: string | null;
  batch_id: string | null;
  run_id: string | null;
  /** For an agent run (POST /v1/agent/run): how it ended and how many steps it took. */
  run_status: string | null;
  run_steps: number | null;
}

export interface AuditList {
  object: "list";
  data: AuditRecord[];
  has_more: boolean;
  first_id: string | null;
  last_id: string | null;
}

export interface Percentiles {
  p50: number | null;
  p95: number | null;
}

export interface TokenTotals {
  input: number;
  output: number;
  reasoning: number;
  cached: number;
}

export interface AuditDay {
  date: string;
  requests: number;
  errors: number;
  tokens: TokenTotals;
  latency_ms: Percentiles;
}

export interface AuditStats {
  object: "audit.stats";
  timezone: string;
  since: number | null;
  until: number | null;
  requests: number;
  errors: number;
  error_rate: number;
  aborted: number;
  tokens: TokenTotals;
  latency_ms: Percentiles;
  ttft_ms: Percentiles;
  surfaces: Record<string, number>;
  days: AuditDay[];
  /** Records older than this many days are removed automatically. */
  retention_days: number;
}

export interface AuditServiceOptions {
  /** Records older than this many days are removed; default 90. */
  retentionDays?: number;
  log?: (level: "debug" | "info" | "warn" | "error", message: string) => void;
  now?: () => number;
}

/** "/v1/audit/:request_id" → "/v1/audit/{request_id}": the route, never the ids in the path. */
export function routePattern(route: string | undefined, path: string): string {
  return (route ?? path).replace(/:([A-Za-z0-9_]+)/g, "{$1}");
}

function toRecord(row: AuditRow): AuditRecord {
  return {
    id: row.request_id,
    object: "audit.record",
    request_id: row.request_id,
    created_at: Math.floor(row.created_ms / 1000),
    account_id: row.account_id,
    key_id: row.key_id,
    surface: row.surface,
    method: row.method,
    path: row.path,
    model: row.model,
    mode: row.mode,
    status: row.status,
    error_code: row.error_code,
    stop_reason: row.stop_reason,
    aborted: row.aborted === 1,
    latency_ms: row.latency_ms,
    ttft_ms: row.ttft_ms,
    queued_ms: row.queued_ms,
    usage: { input_tokens: row.input_tokens, output_tokens: row.output_tokens, reasoning_tokens: row.reasoning_tokens, cached_tokens: row.cached_tokens },
    session_id: row.session_id,
    batch_id: row.batch_id,
    run_id: row.run_id,
    run_status: row.run_status ?? null,
    run_steps: row.run_steps ?? null,
  };
}

/** Nearest-rank percentile of sorted values; null for none. */
function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

function percentiles(values: number[]): Percentiles {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p95: percentile(sorted, 95) };
}

function recordNotFound(id: string): AppError {
  return new AppError("not_found", `No audit record with request id '${id}'.`, { code: "audit_record_not_found", param: "request_id" });
}

function round(ms: number | undefined): number | null {
  return ms === undefined || !Number.isFinite(ms) ? null : Math.max(0, Math.round(ms));
}

export class AuditService {
  readonly retentionDays: number;
  private pending: AuditRow[] = [];
  private flushScheduled = false;
  private sweeper: NodeJS.Timeout | null = null;
  private readonly now: () => number;

  constructor(
    private readonly store: Store,
    private readonly options: AuditServiceOptions = {},
  ) {
    this.retentionDays = options.retentionDays ?? DEFAULT_RETENTION_DAYS;
    this.now = options.now ?? Date.now;
  }

  /** The observer to put in ServerDeps.observers. */
  readonly observer: RequestObserver = (ctx, outcome) => this.record(ctx, outcome);

  /** Queues the record of a finished request. Requests to the audit endpoints themselves are not recorded. */
  record(ctx: RequestContext, outcome: RequestOutcome): void {
    if (!ctx.principal || ctx.area === "audit") return;
    const usage = ctx.inference.usage;
    this.pending.push({
      request_id: ctx.id,
      account_id: ctx.principal.accountId,
      key_id: ctx.principal.keyId,
      created_ms: ctx.receivedAt,
      surface: ctx.area,
      method: ctx.method,
      path: routePattern(ctx.route, ctx.path),
      model: ctx.inference.model ?? null,
      mode: ctx.inference.mode ?? null,
      status: outcome.statusCode,
      error_code: ctx.errorCode ?? null,
      stop_reason: ctx.inference.stopReason ?? null,
      aborted: outcome.aborted ? 1 : 0,
      latency_ms: round(outcome.durationMs) ?? 0,
      ttft_ms: round(ctx.inference.ttftMs),
      queued_ms: round(ctx.inference.queuedMs),
      input_tokens: usage?.promptTokens ?? null,
      output_tokens: usage?.completionTokens ?? null,
      reasoning_tokens: usage?.reasoningTokens ?? null,
      cached_tokens: usage?.cachedTokens ?? null,
      session_id: ctx.inference.sessionId ?? null,
      batch_id: ctx.batchId ?? null,
      run_id: ctx.runId ?? null,
      run_status: ctx.run?.status ?? null,
      run_steps: ctx.run?.steps ?? null,
    });
    if (this.pending.length >= 1000) this.flush();
    else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Writes the queued records in one transaction. A failure is logged and loses only those records. */
  flush(): void {
    this.flushScheduled = false;
    if (this.pending.length === 0) return;
    const rows = this.pending;
    this.pending = [];
    try {
      this.store.audit.insertMany(rows);
    } catch (err) {
      this.options.log?.("error", `Could not write ${rows.length} audit record(s): ${(err as Error).message}`);
    }
  }

  list(query: AuditListQuery): AuditList {
    this.flush();
    const cursorOf = (id: string, param: string) => {
      const row = this.store.audit.find(query.filter.accountId, id);
      if (!row) throw new AppError("invalid_request", `${param} names no audit record of yours: '${id}'.`, { code: "invalid_request", param });
      return { createdMs: row.created_ms, requestId: row.request_id };
    };
    const after = query.after !== undefined ? cursorOf(query.after, "after") : undefined;
    const before = query.before !== undefined ? cursorOf(query.before, "before") : undefined;
    const { rows, hasMore } = this.store.audit.page(query.filter, query.limit, { after, before });
    const data = rows.map(toRecord);
    return { object: "list", data, has_more: hasMore, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
  }

  /** Another account's record is as unknown as a record that does not exist. */
  get(accountId: string, requestId: string): AuditRecord {
    this.flush();
    const row = this.store.audit.find(accountId, requestId);
    if (!row) throw recordNotFound(requestId);
    return toRecord(row);
  }

  /** Erases the record: gone from lists and statistics, and its bytes overwritten in the data dir. */
  erase(accountId: string, requestId: string): { id: string; object: "audit.record.deleted"; deleted: true } {
    this.flush();
    if (!this.store.audit.delete(accountId, requestId)) throw recordNotFound(requestId);
    if (!this.store.audit.scrub()) this.options.log?.("warn", "The write-ahead log could not be truncated after an audit erasure (a reader held it); it will be on the next one.");
    return { id: requestId, object: "audit.record.deleted", deleted: true };
  }

  stats(filter: AuditFilter, timeZone: string): AuditStats {
    this.flush();
    const rows = this.store.audit.statsRows(filter);
    const totals = (): TokenTotals => ({ input: 0, output: 0, reasoning: 0, cached: 0 });
    const tokens = totals();
    const surfaces: Record<string, number> = {};
    const latencies: number[] = [];
    const ttfts: number[] = [];
    const days = new Map<string, { requests: number; errors: number; tokens: TokenTotals; latencies: number[] }>();
    let errors = 0;
    let aborted = 0;
    // Rows come oldest first: ask the zone only when a row passes the end of the current day.
    let date = "";
    let dayEnd = -Infinity;
    for (const row of rows) {
      const isError = row.status >= 400;
      if (isError) errors++;
      if (row.aborted) aborted++;
      surfaces[row.surface] = (surfaces[row.surface] ?? 0) + 1;
      latencies.push(row.latency_ms);
      if (row.ttft_ms !== null) ttfts.push(row.ttft_ms);
      if (row.created_ms >= dayEnd || row.created_ms < dayEnd - 26 * 3_600_000) {
        date = dayOf(row.created_ms, timeZone);
        dayEnd = startOfDay(nextDay(date), timeZone);
      }
      let day = days.get(date);
      if (!day) days.set(date, (day = { requests: 0, errors: 0, tokens: totals(), latencies: [] }));
      day.requests++;
      if (isError) day.errors++;
      day.latencies.push(row.latency_ms);
      for (const t of [tokens, day.tokens]) {
        t.input += row.input_tokens ?? 0;
        t.output += row.output_tokens ?? 0;
        t.reasoning += row.reasoning_tokens ?? 0;
        t.cached += row.cached_tokens ?? 0;
      }
    }
    return {
      object: "audit.stats",
      timezone: timeZone,
      since: filter.sinceMs !== undefined ? Math.floor(filter.sinceMs / 1000) : null,
      until: filter.untilMs !== undefined ? Math.floor(filter.untilMs / 1000) : null,
      requests: rows.length,
      errors,
      error_rate: rows.length === 0 ? 0 : Math.round((errors / rows.length) * 10_000) / 10_000,
      aborted,
      tokens,
      latency_ms: percentiles(latencies),
      ttft_ms: percentiles(ttfts),
      surfaces,
      days: [...days.entries()]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([date, d]) => ({ date, requests: d.requests, errors: d.errors, tokens: d.tokens, latency_ms: percentiles(d.latencies) })),
      retention_days: this.retentionDays,
    };
  }

  /** Removes records older than the retention period; returns how many. */
  sweep(): number {
    this.flush();
    const removed = this.store.audit.deleteOlderThan(this.now() - this.retentionDays * DAY_MS);
    if (removed > 0) {
      this.store.audit.scrub();
      this.options.log?.("info", `Audit retention: removed ${removed} record(s) older than ${this.retentionDays} days.`);
    }
    return removed;
  }

  /** Sweeps now and every hour until close(). */
  startRetention(intervalMs = SWEEP_INTERVAL_MS): void {
    if (this.sweeper) return;
    const run = () => {
      try {
        this.sweep();
      } catch (err) {
        this.options.log?.("error", `Audit retention sweep failed: ${(err as Error).message}`);
      }
    };
    run();
    this.sweeper = setInterval(run, intervalMs);
    this.sweeper.unref();
  }

  /** Stops the sweeper and writes what is queued (before the store closes). */
  close(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    this.flush();
  }
}
