// The audit endpoints as the window calls them: over HTTP with the window's own key, like any client, in
// the machine's time zone. The shapes are those of docs/api.md ("Audit").
import type { ServerInfo } from "../../server/features/console/contract";
import { consoleApi } from "./console-client";

export interface AuditRecord {
  id: string;
  request_id: string;
  created_at: number;
  key_id: string;
  surface: string;
  method: string;
  path: string;
  model: string | null;
  mode: string | null;
  status: number;
  error_code: string | null;
  aborted: boolean;
  latency_ms: number;
  ttft_ms: number | null;
  usage: { input_tokens: number | null; output_tokens: number | null; reasoning_tokens: number | null; cached_tokens: number | null };
  session_id: string | null;
  batch_id: string | null;
  run_id: string | null;
}

export interface AuditList {
  data: AuditRecord[];
  has_more: boolean;
  first_id: string | null;
  last_id: string | null;
}

export interface Percentiles {
  p50: number | null;
  p95: number | null;
}

export interface AuditDay {
  date: string;
  requests: number;
  errors: number;
  tokens: { input: number; output: number; reasoning: number; cached: number };
}

export interface AuditStats {
  timezone: string;
  requests: number;
  errors: number;
  error_rate: number;
  tokens: { input: number; output: number; reasoning: number; cached: number };
  latency_ms: Percentiles;
  ttft_ms: Percentiles;
  days: AuditDay[];
  retention_days: number;
}

export const LOCAL_TIMEZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

async function call<T>(info: ServerInfo, path: string, method: "GET" | "DELETE" = "GET"): Promise<T> {
  const key = await consoleApi.windowKey();
  const res = await fetch(`${info.baseUrl}${path}`, { method, headers: { authorization: `Bearer ${key}`, "x-timezone": LOCAL_TIMEZONE } });
  const body = (await res.json()) as T & { error?: { message?: string } };
  if (!res.ok) throw new Error(body.error?.message ?? `HTTP ${res.status}`);
  return body;
}

export function fetchAudit(info: ServerInfo, query: URLSearchParams): Promise<AuditList> {
  return call(info, `/v1/audit?${query}`);
}

export function fetchAuditStats(info: ServerInfo, query: URLSearchParams): Promise<AuditStats> {
  return call(info, `/v1/audit/stats?${query}`);
}

export function eraseAuditRecord(info: ServerInfo, id: string): Promise<unknown> {
  return call(info, `/v1/audit/${encodeURIComponent(id)}`, "DELETE");
}

/** The days from `first` through `last` ("YYYY-MM-DD"), so a chart shows quiet days as empty. */
export function daysBetween(first: string, last: string): string[] {
  const out: string[] = [];
  for (let d = new Date(`${first}T00:00:00Z`); out.length < 400; d.setUTCDate(d.getUTCDate() + 1)) {
    const day = d.toISOString().slice(0, 10);
    out.push(day);
    if (day >= last) break;
  }
  return out;
}

/** Today in the machine's zone, "YYYY-MM-DD". */
export function localDay(ms: number = Date.now()): string {
  return new Intl.DateTimeFormat("en-CA", { timeZone: LOCAL_TIMEZONE, year: "numeric", month: "2-digit", day: "2-digit" }).format(ms);
}
