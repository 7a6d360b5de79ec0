// The audit of the window's own account: a chart of requests and tokens per day, figures for the period, and
// a table of recent requests with filters; a record can be erased. It calls /v1/audit over HTTP with the
// window's key, in this machine's time zone. No content is ever in the audit: only who, what and how it went.
import { Fragment, useCallback, useEffect, useState } from "react";
import type { KeyView } from "../../../server/features/console/contract";
import type { AuditDay, AuditRecord, AuditStats } from "../../../server/features/console/wire";
import { daysBetween, eraseAuditRecord, fetchAudit, fetchAuditStats, localDay, LOCAL_TIMEZONE } from "../audit-api";
import { ConfirmInline } from "../components/confirm-inline";
import { DataTable } from "../components/data-table";
import { consoleApi } from "../console-client";
import { useWindow } from "../state/window-state";

const SURFACES = ["chat", "responses", "messages", "batches", "files", "agent"];
const STATUSES = [
  { value: "", label: "any status" },
  { value: "success", label: "success" },
  { value: "error", label: "errors" },
  { value: "4xx", label: "4xx" },
  { value: "5xx", label: "5xx" },
  { value: "429", label: "429" },
];
const PERIODS = [1, 7, 14, 30, 90];
const PAGE = 50;

interface Filters {
  days: number;
  surface: string;
  status: string;
  keyId: string;
  sessionId: string;
}

function query(filters: Filters, extra: Record<string, string> = {}): URLSearchParams {
  const q = new URLSearchParams({ since: localDay(Date.now() - (filters.days - 1) * 86_400_000), ...extra });
  if (filters.surface) q.set("surface", filters.surface);
  if (filters.status) q.set("status", filters.status);
  if (filters.keyId) q.set("key_id", filters.keyId);
  if (filters.sessionId.trim()) q.set("session_id", filters.sessionId.trim());
  return q;
}

/** A path that may wrap at its slashes (never inside a word) in a narrow column. */
function pathWithBreaks(path: string) {
  return path.split("/").map((part, i) => (i === 0 ? part : <Fragment key={i}><wbr />/{part}</Fragment>));
}

const int = (n: number | null | undefined) => (n === null || n === undefined ? "–" : n.toLocaleString());
const ms = (n: number | null | undefined) => (n === null || n === undefined ? "–" : n < 10_000 ? `${n} ms` : `${(n / 1000).toFixed(1)} s`);

function time(seconds: number): string {
  return new Date(seconds * 1000).toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

/** Bars per day; `parts` stack from the bottom. */
function DayChart({ title, days, parts, testId }: { title: string; days: Array<{ date: string; day?: AuditDay }>; parts: Array<{ label: string; color: string; value: (d: AuditDay) => number }>; testId: string }) {
  const width = 560;
  const height = 150;
  const bottom = 18;
  const max = Math.max(1, ...days.map(({ day }) => (day ? parts.reduce((sum, p) => sum + p.value(day), 0) : 0)));
  const slot = width / Math.max(1, days.length);
  const bar = Math.max(2, Math.min(28, slot * 0.7));
  const every = Math.ceil(days.length / 8);
  return (
    <figure className="chart" data-testid={testId}>
      <figcaption>
        {title} <span className="muted small">(max {int(max)})</span>{" "}
        {parts.length > 1 &&
          parts.map((p) => (
            <span key={p.label} className="legend small">
              <i style={{ background: p.color }} /> {p.label}
            </span>
          ))}
      </figcaption>
      <svg viewBox={`0 0 ${width} ${height}`} width="100%" height={height} role="img" aria-label={title}>
        <line x1={0} x2={width} y1={height - bottom} y2={height - bottom} stroke="var(--border)" />
        {days.map(({ date, day }, i) => {
          const x = i * slot + (slot - bar) / 2;
          let y = height - bottom;
          const total = day ? parts.reduce((sum, p) => sum + p.value(day), 0) : 0;
          return (
            <g key={date} data-testid="audit-bar" data-date={date} data-value={total}>
              <title>{`${date}: ${parts.map((p) => `${int(day ? p.value(day) : 0)} ${p.label}`).join(", ")}`}</title>
              {day &&
                parts.map((p) => {
                  const h = (p.value(day) / max) * (height - bottom - 6);
                  y -= h;
                  return h > 0 ? <rect key={p.label} x={x} y={y} width={bar} height={h} fill={p.color} rx={1.5} /> : null;
                })}
              {i % every === 0 && (
                <text x={x + bar / 2} y={height - 4} fontSize={10} textAnchor="middle" fill="var(--muted)">
                  {date.slice(5)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
    </figure>
  );
}

export function AuditPage() {
  const info = useWindow((s) => s.info);
  const [filters, setFilters] = useState<Filters>({ days: 14, surface: "", status: "", keyId: "", sessionId: "" });
  const [records, setRecords] = useState<AuditRecord[]>([]);
  const [more, setMore] = useState(false);
  const [stats, setStats] = useState<AuditStats | null>(null);
  const [keys, setKeys] = useState<KeyView[]>([]);
  const [confirming, setConfirming] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);

  const load = useCallback(async () => {
    if (!info) return;
    setLoading(true);
    setError(null);
    try {
      const [list, summary, allKeys] = await Promise.all([fetchAudit(info, query(filters, { limit: String(PAGE) })), fetchAuditStats(info, query(filters)), consoleApi.listKeys()]);
      setRecords(list.data);
      setMore(list.has_more);
      setStats(summary);
      setKeys(allKeys);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setLoading(false);
    }
  }, [info, filters]);

  useEffect(() => {
    void load();
  }, [load]);

  const loadMore = async () => {
    if (!info || records.length === 0) return;
    try {
      const next = await fetchAudit(info, query(filters, { limit: String(PAGE), after: records.at(-1)!.id }));
      setRecords((current) => [...current, ...next.data]);
      setMore(next.has_more);
    } catch (err) {
      setError((err as Error).message);
    }
  };

  const erase = async (id: string) => {
    if (!info) return;
    setConfirming(null);
    try {
      await eraseAuditRecord(info, id);
      await load();
    } catch (err) {
      setError((err as Error).message);
    }
  };

  const set = (patch: Partial<Filters>) => setFilters((f) => ({ ...f, ...patch }));
  const keyHint = (id: string) => keys.find((k) => k.id === id);
  const byDate = new Map((stats?.days ?? []).map((d) => [d.date, d]));
  const days = daysBetween(localDay(Date.now() - (filters.days - 1) * 86_400_000), localDay()).map((date) => ({ date, day: byDate.get(date) }));
  const windowAccount = keys.find((k) => k.name === "Desktop window" && k.revokedAt === null)?.account ?? "local";

  return (
    <section className="page" data-testid="audit-page">
      <header className="page-header">
        <h1>Audit</h1>
        <button onClick={() => void load()} disabled={loading} data-testid="audit-refresh">
          {loading ? "Loading…" : "Refresh"}
        </button>
      </header>

      <div className="card toolbar" data-testid="audit-filters">
        <select value={filters.days} onChange={(e) => set({ days: Number(e.target.value) })} data-testid="audit-filter-period" aria-label="Period">
          {PERIODS.map((d) => (
            <option key={d} value={d}>
              {d === 1 ? "today" : `last ${d} days`}
            </option>
          ))}
        </select>
        <select value={filters.surface} onChange={(e) => set({ surface: e.target.value })} data-testid="audit-filter-surface" aria-label="Surface">
          <option value="">all surfaces</option>
          {SURFACES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
        <select value={filters.status} onChange={(e) => set({ status: e.target.value })} data-testid="audit-filter-status" aria-label="Status">
          {STATUSES.map((s) => (
            <option key={s.value} value={s.value}>
              {s.label}
            </option>
          ))}
        </select>
        <select value={filters.keyId} onChange={(e) => set({ keyId: e.target.value })} data-testid="audit-filter-key" aria-label="Key">
          <option value="">all keys</option>
          {keys
            .filter((k) => k.account === windowAccount)
            .map((k) => (
              <option key={k.id} value={k.id}>
                {k.hint} {k.name ?? ""}
                {k.revokedAt !== null ? " (revoked)" : ""}
              </option>
            ))}
        </select>
        <input value={filters.sessionId} onChange={(e) => set({ sessionId: e.target.value })} placeholder="session_id" data-testid="audit-filter-session" aria-label="Session id" />
        <span className="muted small">
          account <b>{windowAccount}</b> · times in {LOCAL_TIMEZONE}
        </span>
      </div>

      {error && (
        <p className="error" data-testid="audit-error">
          {error}
        </p>
      )}

      {stats && (
        <div className="card">
          <div className="figures" data-testid="audit-summary">
            <div>
              <span className="muted small">Requests</span>
              <b data-testid="audit-summary-requests">{int(stats.requests)}</b>
            </div>
            <div>
              <span className="muted small">Tokens in / out</span>
              <b data-testid="audit-summary-tokens">
                {int(stats.tokens.input)} / {int(stats.tokens.output)}
              </b>
            </div>
            <div>
              <span className="muted small">Error rate</span>
              <b data-testid="audit-summary-errors">{(stats.error_rate * 100).toFixed(1)} %</b>
            </div>
            <div>
              <span className="muted small">Latency p50 / p95</span>
              <b>
                {ms(stats.latency_ms.p50)} / {ms(stats.latency_ms.p95)}
              </b>
            </div>
            <div>
              <span className="muted small">First token p50</span>
              <b>{ms(stats.ttft_ms.p50)}</b>
            </div>
          </div>
          <div className="charts">
            <DayChart
              title="Requests per day"
              days={days}
              testId="audit-chart-requests"
              parts={[
                { label: "ok", color: "var(--accent)", value: (d) => d.requests - d.errors },
                { label: "errors", color: "var(--danger)", value: (d) => d.errors },
              ]}
            />
            <DayChart
              title="Tokens per day"
              days={days}
              testId="audit-chart-tokens"
              parts={[
                { label: "input", color: "#7c8cf0", value: (d) => d.tokens.input },
                { label: "output", color: "#2ea043", value: (d) => d.tokens.output },
              ]}
            />
          </div>
        </div>
      )}

      <div className="card">
        <DataTable
          testId="audit-table"
          rows={records}
          rowKey={(r) => r.id}
          rowAttributes={(r) => ({ "data-testid": "audit-row", "data-request-id": r.id, "data-surface": r.surface, "data-status": String(r.status) })}
          empty={loading ? "Loading…" : "No requests match."}
          columns={[
            { key: "time", header: "Time", cell: (r) => <span title={r.id}>{time(r.created_at)}</span> },
            {
              key: "request",
              header: "Request",
              cell: (r) => (
                <>
                  <code className="wrap-at-slash">
                    {r.method} {pathWithBreaks(r.path)}
                  </code>
                  <div className="muted small">
                    {r.surface}
                    {r.model ? ` · ${r.model}` : ""}
                    {r.mode ? ` ${r.mode}` : ""}
                  </div>
                </>
              ),
            },
            {
              key: "status",
              header: "Status",
              cell: (r) => (
                <span className={r.status >= 400 ? "error" : undefined}>
                  {r.status}
                  {r.error_code && <span className="small"> {r.error_code}</span>}
                  {r.aborted && <span className="muted small"> cut</span>}
                  {r.stop_reason && <div className="muted small">{r.stop_reason}</div>}
                  {r.run_status && (
                    <div className="muted small">
                      run {r.run_status}
                      {r.run_steps !== null ? `, ${r.run_steps} steps` : ""}
                    </div>
                  )}
                </span>
              ),
            },
            {
              key: "tokens",
              header: "Tokens in / out",
              kind: "num",
              cell: (r) => (
                <>
                  {int(r.usage.input_tokens)} / {int(r.usage.output_tokens)}
                  {!!r.usage.reasoning_tokens && <div className="muted small">{int(r.usage.reasoning_tokens)} reasoning</div>}
                  {!!r.usage.cached_tokens && <div className="muted small">{int(r.usage.cached_tokens)} cached</div>}
                </>
              ),
            },
            {
              key: "latency",
              header: "Latency",
              kind: "num",
              cell: (r) => (
                <>
                  {ms(r.latency_ms)}
                  {r.ttft_ms !== null && <div className="muted small">first token {ms(r.ttft_ms)}</div>}
                  {!!r.queued_ms && <div className="muted small">queued {ms(r.queued_ms)}</div>}
                </>
              ),
            },
            {
              key: "key",
              header: "Key / session",
              narrow: "hide",
              cell: (r) => (
                <>
                  <code className="small">{keyHint(r.key_id)?.hint ?? r.key_id}</code>
                  {r.session_id && <div className="muted small">{r.session_id}</div>}
                </>
              ),
            },
            {
              key: "actions",
              header: { hidden: "Actions" },
              kind: "actions",
              cell: (r) =>
                confirming === r.id ? (
                  <ConfirmInline confirmLabel="Erase now" testId="audit-erase-confirm" onConfirm={() => void erase(r.id)} onCancel={() => setConfirming(null)} />
                ) : (
                  <button data-testid="audit-erase" onClick={() => setConfirming(r.id)}>
                    Erase
                  </button>
                ),
            },
          ]}
        />
        {more && (
          <button onClick={() => void loadMore()} data-testid="audit-more">
            Load more
          </button>
        )}
        <p className="muted small">
          The audit keeps no content: no prompts, answers, files or tool arguments. Records older than {stats?.retention_days ?? 90} days are removed automatically; Erase removes
          one now, for good.
        </p>
      </div>
    </section>
  );
}
