// The query parameters of GET /v1/audit and /v1/audit/stats (and the console's copies): filters, the time
// range (epoch seconds, ISO 8601, or a calendar day in the caller's X-Timezone) and the list cursor.
import { AppError } from "../../core/errors.js";
import type { AuditFilter } from "../../store/audit-repository.js";
import { isCalendarDate, nextDay, startOfDay } from "./zoned-days.js";

/** The values of `surface`: the areas whose requests are recorded. */
export const AUDIT_SURFACES = ["chat", "responses", "messages", "batches", "files", "agent"] as const;

export const DEFAULT_LIST_LIMIT = 20;
export const MAX_LIST_LIMIT = 100;

export interface AuditListQuery {
  filter: AuditFilter;
  limit: number;
  after?: string;
  before?: string;
}

function bad(message: string, param: string): AppError {
  return new AppError("invalid_request", message, { code: "invalid_request", param });
}

function single(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw bad(`Give ${name} once.`, name);
  const text = String(value).trim();
  return text === "" ? undefined : text;
}

/**
 * A point in time: epoch seconds, an ISO 8601 date-time, or a day (YYYY-MM-DD) in the zone. A day given as
 * `until` means through the end of that day.
 */
export function parseInstant(value: string, param: string, timeZone: string, end: boolean): number {
  if (/^\d{1,12}$/.test(value)) return Number(value) * 1000;
  if (isCalendarDate(value)) return startOfDay(end ? nextDay(value) : value, timeZone);
  if (/^\d{4}-\d{2}-\d{2}T/.test(value)) {
    const ms = Date.parse(value);
    if (Number.isFinite(ms)) return ms;
  }
  throw bad(`${param} must be epoch seconds, an ISO 8601 date-time or a day (YYYY-MM-DD, in your X-Timezone); got '${value}'.`, param);
}

function parseStatus(value: string): { min: number; max: number } {
  const v = value.toLowerCase();
  if (/^[1-5]\d\d$/.test(v)) return { min: Number(v), max: Number(v) };
  if (/^[1-5]xx$/.test(v)) return { min: Number(v[0]) * 100, max: Number(v[0]) * 100 + 99 };
  if (v === "error") return { min: 400, max: 599 };
  if (v === "success" || v === "ok") return { min: 100, max: 399 };
  throw bad(`status must be a status code (429), a class (4xx) or 'error' / 'success'; got '${value}'.`, "status");
}

export function parseAuditFilter(query: Record<string, unknown>, accountId: string, timeZone: string): AuditFilter {
  const filter: AuditFilter = { accountId };
  const since = single(query, "since");
  const until = single(query, "until");
  if (since !== undefined) filter.sinceMs = parseInstant(since, "since", timeZone, false);
  if (until !== undefined) filter.untilMs = parseInstant(until, "until", timeZone, true);
  const surface = single(query, "surface");
  if (surface !== undefined) {
    const surfaces = surface.split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== "");
    const unknown = surfaces.find((s) => !(AUDIT_SURFACES as readonly string[]).includes(s));
    if (unknown !== undefined) throw bad(`surface must be one or more of ${AUDIT_SURFACES.join(", ")} (comma-separated); got '${unknown}'.`, "surface");
    filter.surfaces = surfaces;
  }
  const status = single(query, "status");
  if (status !== undefined) filter.status = parseStatus(status);
  const keyId = single(query, "key_id");
  if (keyId !== undefined) filter.keyId = keyId;
  const sessionId = single(query, "session_id");
  if (sessionId !== undefined) filter.sessionId = sessionId;
  return filter;
}

export function parseAuditListQuery(query: Record<string, unknown>, accountId: string, timeZone: string): AuditListQuery {
  const filter = parseAuditFilter(query, accountId, timeZone);
  const limitText = single(query, "limit");
  let limit = DEFAULT_LIST_LIMIT;
  if (limitText !== undefined) {
    limit = Number(limitText);
    if (!/^\d+$/.test(limitText) || limit < 1 || limit > MAX_LIST_LIMIT) throw bad(`limit must be an integer from 1 to ${MAX_LIST_LIMIT}; got '${limitText}'.`, "limit");
  }
  // OpenAI's lists page with `after`, Anthropic's with `after_id` / `before_id`: both spellings work.
  const after = single(query, "after") ?? single(query, "after_id");
  const before = single(query, "before") ?? single(query, "before_id");
  if (after !== undefined && before !== undefined) throw bad("Give after or before, not both.", "before");
  return { filter, limit, after, before };
}
