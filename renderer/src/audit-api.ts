// The audit endpoints as the window calls them: over HTTP with the window's own key, like any client, in
// the machine's time zone. The shapes are the wire types (docs/api.md, "Audit").
import type { ServerInfo } from "../../server/features/console/contract";
import type { AuditList, AuditStats } from "../../server/features/console/wire";
import { apiJson, LOCAL_TIMEZONE } from "./api/http";

export { LOCAL_TIMEZONE };

export function fetchAudit(info: ServerInfo, query: URLSearchParams): Promise<AuditList> {
  return apiJson(`${info.baseUrl}/v1/audit?${query}`);
}

export function fetchAuditStats(info: ServerInfo, query: URLSearchParams): Promise<AuditStats> {
  return apiJson(`${info.baseUrl}/v1/audit/stats?${query}`);
}

export function eraseAuditRecord(info: ServerInfo, id: string): Promise<unknown> {
  return apiJson(`${info.baseUrl}/v1/audit/${encodeURIComponent(id)}`, { method: "DELETE" });
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
