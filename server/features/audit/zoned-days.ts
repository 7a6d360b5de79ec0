// Calendar days in an IANA time zone, with Intl only: which day an instant falls on, and when a day starts
// (DST days are 23 or 25 hours long; both are handled).
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-CA", { timeZone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" });
    formatters.set(timeZone, f);
  }
  return f;
}

function wallClock(ms: number, timeZone: string): { year: number; month: number; day: number; hour: number; minute: number; second: number } {
  const parts: Record<string, number> = {};
  for (const part of formatter(timeZone).formatToParts(ms)) if (part.type !== "literal") parts[part.type] = Number(part.value);
  return { year: parts.year!, month: parts.month!, day: parts.day!, hour: parts.hour!, minute: parts.minute!, second: parts.second! };
}

/** The zone's offset from UTC at this instant, in ms (Berlin in winter: +3600000). */
export function zoneOffsetMs(ms: number, timeZone: string): number {
  const w = wallClock(ms, timeZone);
  return Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second) - Math.floor(ms / 1000) * 1000;
}

/** "YYYY-MM-DD" of the instant in the zone. */
export function dayOf(ms: number, timeZone: string): string {
  const w = wallClock(ms, timeZone);
  return `${String(w.year).padStart(4, "0")}-${String(w.month).padStart(2, "0")}-${String(w.day).padStart(2, "0")}`;
}

export const DATE_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;

/** Epoch ms of the first instant of the day ("YYYY-MM-DD") in the zone. */
export function startOfDay(date: string, timeZone: string): number {
  const match = DATE_PATTERN.exec(date);
  if (!match) throw new RangeError(`Not a date: ${date}`);
  const midnightUtc = Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]));
  // Two rounds: the offset at the first guess may differ from the offset at the answer across a DST change.
  let guess = midnightUtc - zoneOffsetMs(midnightUtc, timeZone);
  guess = midnightUtc - zoneOffsetMs(guess, timeZone);
  // Where midnight itself does not exist (a DST jump at 00:00), the day starts at the first instant after it.
  while (dayOf(guess, timeZone) !== date && guess < midnightUtc + 36 * 3600_000) guess += 15 * 60_000;
  return guess;
}

/** The day after "YYYY-MM-DD". */
export function nextDay(date: string): string {
  const match = DATE_PATTERN.exec(date)!;
  return new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]) + 1)).toISOString().slice(0, 10);
}

/** Whether "YYYY-MM-DD" names a real calendar day. */
export function isCalendarDate(value: string): boolean {
  const match = DATE_PATTERN.exec(value);
  if (!match) return false;
  const d = new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])));
  return d.toISOString().slice(0, 10) === value;
}
