// Admission and ordering for every inference (HTTP surfaces, batch items, agent steps): a ticket per run,
// taken before the engine gives it a sequence. Engine-independent and pure apart from the clock it is given.
//
// - Classes: interactive before agent before batch. A waiting ticket gains one class level every `agingMs`,
//   so background work is never starved forever; within a level, first come first served.
// - While the engine has more than one sequence, background work (agent, batch) holds at most all but one:
//   one sequence stays free for interactive work.
// - Interactive requests are admitted per account up to `accountLimit` in flight (running plus waiting), and
//   at most `maxQueue` of them wait at once; beyond either, a 429 with an honest Retry-After. Background
//   classes are bounded by their owners (the batch worker, the agent's run limit), so they always queue.
// - A waiter whose signal aborts leaves the queue at once.
import { AppError } from "../core/errors.js";
import type { WorkClass } from "../core/request-context.js";

export type { WorkClass };

const CLASS_LEVEL: Record<WorkClass, number> = { interactive: 0, agent: 1, batch: 2 };

export interface Clock {
  /** Milliseconds, monotonic. */
  now(): number;
}

export const systemClock: Clock = { now: () => performance.now() };

export interface SchedulerOptions {
  /** Sequences the engine serves now; 0 while no model is ready (waiters then fail with `unavailable()`). */
  capacity: () => number;
  /** Interactive requests one account may have in flight. Default: 4 per sequence (each busy, three waiting). */
  accountLimit?: number;
  /** Interactive requests that may wait at once, all accounts together. Default 64. */
  maxQueue?: number;
  /** A waiting ticket rises one class level per this many ms. Default 60 s. */
  agingMs?: number;
  /** The error waiters get when capacity drops to 0 (no model, or one loading). */
  unavailable?: () => AppError;
  /** While this says so, capacity 0 is a pause (the engine is starting again): waiters keep waiting. */
  paused?: () => boolean;
  clock?: Clock;
}

export interface TicketRequest {
  accountId: string;
  workClass: WorkClass;
  signal: AbortSignal;
}

export interface Ticket {
  readonly accountId: string;
  readonly workClass: WorkClass;
  /** Time spent waiting for a sequence, in ms. */
  readonly waitedMs: number;
  /** Gives the place back; idempotent. */
  release(): void;
}

/** What the rate headers say for one account. */
export interface AccountUsage {
  /** The concurrent-request limit (X-RateLimit-Limit). */
  limit: number;
  /** Interactive requests of the account in flight now. */
  inFlight: number;
  /** limit - inFlight, never below 0 (X-RateLimit-Remaining). */
  remaining: number;
  /** Seconds until the account is expected to have room again; 0 while it has room (X-RateLimit-Reset). */
  resetSeconds: number;
}

export interface SchedulerStats {
  capacity: number;
  running: number;
  waiting: number;
  byClass: Record<WorkClass, { running: number; waiting: number }>;
  /** Mean time a ticket was held over the recent ones, ms (the Retry-After estimates' base). */
  recentDurationMs: number;
}

interface Entry {
  seq: number;
  accountId: string;
  workClass: WorkClass;
  arrivedAt: number;
  startedAt: number | null;
  signal: AbortSignal;
  resolve: (ticket: Ticket) => void;
  reject: (err: unknown) => void;
  onAbort: () => void;
}

const DEFAULT_AGING_MS = 60_000;
const DEFAULT_MAX_QUEUE = 64;
const PER_SEQUENCE_LIMIT = 4;
/** Before anything has finished, estimates assume this much per request. */
const PRIOR_DURATION_MS = 10_000;
const RECENT = 32;

export class Scheduler {
  private readonly waiting: Entry[] = [];
  private readonly running = new Set<Entry>();
  private readonly recent: number[] = [];
  private seq = 0;
  private readonly clock: Clock;

  constructor(private readonly options: SchedulerOptions) {
    this.clock = options.clock ?? systemClock;
  }

  /** The per-account limit in force now. */
  accountLimit(): number {
    return this.options.accountLimit ?? Math.max(1, this.options.capacity()) * PER_SEQUENCE_LIMIT;
  }

  get maxQueue(): number {
    return this.options.maxQueue ?? DEFAULT_MAX_QUEUE;
  }

  /**
   * Takes a place: resolves with a ticket once a sequence is free for it, or rejects at once with a 429
   * (account over its limit, queue full), with the abort reason when the signal aborts first, or with the
   * unavailable error when the model goes away while it waits.
   */
  acquire(request: TicketRequest): Promise<Ticket> {
    if (request.signal.aborted) return Promise.reject(request.signal.reason);
    if (request.workClass === "interactive") {
      try {
        this.admit(request.accountId);
      } catch (err) {
        return Promise.reject(err);
      }
    }
    return new Promise<Ticket>((resolve, reject) => {
      const entry: Entry = {
        seq: ++this.seq,
        accountId: request.accountId,
        workClass: request.workClass,
        arrivedAt: this.clock.now(),
        startedAt: null,
        signal: request.signal,
        resolve,
        reject,
        onAbort: () => {
          const i = this.waiting.indexOf(entry);
          if (i < 0) return;
          this.waiting.splice(i, 1);
          reject(request.signal.reason);
          // A background waiter that leaves may unblock nothing, but an interactive one frees queue room.
          this.dispatch();
        },
      };
      request.signal.addEventListener("abort", entry.onAbort, { once: true });
      this.waiting.push(entry);
      this.dispatch();
    });
  }

  /** Re-examines the queue after the capacity changed (a model loaded, unloaded or is switching). */
  refresh(): void {
    if (this.options.capacity() <= 0 && this.waiting.length > 0 && !this.options.paused?.()) {
      const error = this.options.unavailable?.() ?? new AppError("unavailable", "No model is ready.", { retryAfter: 5 });
      for (const entry of this.waiting.splice(0)) {
        entry.signal.removeEventListener("abort", entry.onAbort);
        entry.reject(error);
      }
      return;
    }
    this.dispatch();
  }

  usage(accountId: string): AccountUsage {
    const limit = this.accountLimit();
    const inFlight = this.inFlightOf(accountId);
    const remaining = Math.max(0, limit - inFlight);
    return { limit, inFlight, remaining, resetSeconds: remaining > 0 ? 0 : this.secondsUntilAccountRoom(accountId) };
  }

  stats(): SchedulerStats {
    const byClass: SchedulerStats["byClass"] = {
      interactive: { running: 0, waiting: 0 },
      agent: { running: 0, waiting: 0 },
      batch: { running: 0, waiting: 0 },
    };
    for (const e of this.running) byClass[e.workClass].running++;
    for (const e of this.waiting) byClass[e.workClass].waiting++;
    return { capacity: this.options.capacity(), running: this.running.size, waiting: this.waiting.length, byClass, recentDurationMs: this.meanDuration() };
  }

  private admit(accountId: string): void {
    const limit = this.accountLimit();
    if (this.inFlightOf(accountId) >= limit) {
      const retryAfter = this.secondsUntilAccountRoom(accountId);
      throw new AppError(
        "rate_limit",
        `This account already has ${limit} request${limit === 1 ? "" : "s"} in flight, its concurrency limit. ` +
          `Wait for one to finish (about ${retryAfter} s) and retry.`,
        { code: "concurrency_limit_exceeded", retryAfter },
      );
    }
    const queued = this.waiting.filter((e) => e.workClass === "interactive").length;
    // A request that can start at once never counts as queued, so only a full queue with no free sequence refuses.
    if (queued >= this.maxQueue && !this.canStartNow("interactive")) {
      const retryAfter = this.secondsUntilQueueMoves();
      throw new AppError("rate_limit", `The server is busy: ${queued} requests are waiting. Retry in about ${retryAfter} s.`, {
        code: "queue_full",
        retryAfter,
      });
    }
  }

  private inFlightOf(accountId: string): number {
    let n = 0;
    for (const e of this.running) if (e.workClass === "interactive" && e.accountId === accountId) n++;
    for (const e of this.waiting) if (e.workClass === "interactive" && e.accountId === accountId) n++;
    return n;
  }

  private backgroundRunning(): number {
    let n = 0;
    for (const e of this.running) if (e.workClass !== "interactive") n++;
    return n;
  }

  private canStartNow(workClass: WorkClass): boolean {
    const capacity = this.options.capacity();
    if (this.running.size >= capacity) return false;
    if (workClass === "interactive" || capacity <= 1) return true;
    return this.backgroundRunning() < capacity - 1;
  }

  /** Class level after aging: lower runs first. */
  private level(entry: Entry, now: number): number {
    const aging = this.options.agingMs ?? DEFAULT_AGING_MS;
    return Math.max(0, CLASS_LEVEL[entry.workClass] - Math.floor((now - entry.arrivedAt) / aging));
  }

  private dispatch(): void {
    for (;;) {
      if (this.running.size >= this.options.capacity()) return;
      const now = this.clock.now();
      let best: Entry | null = null;
      let bestLevel = Number.POSITIVE_INFINITY;
      for (const entry of this.waiting) {
        if (!this.canStartNow(entry.workClass)) continue;
        const level = this.level(entry, now);
        if (level < bestLevel || (level === bestLevel && entry.seq < best!.seq)) {
          best = entry;
          bestLevel = level;
        }
      }
      if (!best) return;
      this.start(best, now);
    }
  }

  private start(entry: Entry, now: number): void {
    this.waiting.splice(this.waiting.indexOf(entry), 1);
    entry.signal.removeEventListener("abort", entry.onAbort);
    entry.startedAt = now;
    this.running.add(entry);
    let released = false;
    entry.resolve({
      accountId: entry.accountId,
      workClass: entry.workClass,
      waitedMs: now - entry.arrivedAt,
      release: () => {
        if (released) return;
        released = true;
        this.running.delete(entry);
        this.record(this.clock.now() - now);
        this.dispatch();
      },
    });
  }

  private record(durationMs: number): void {
    this.recent.push(durationMs);
    if (this.recent.length > RECENT) this.recent.shift();
  }

  private meanDuration(): number {
    if (this.recent.length === 0) return PRIOR_DURATION_MS;
    return this.recent.reduce((a, b) => a + b, 0) / this.recent.length;
  }

  /** Expected ms until each running ticket ends: the recent mean minus what it has run, at least a second's tenth. */
  private remainingOfRunning(entries: Iterable<Entry>, now: number): number[] {
    const mean = this.meanDuration();
    const out: number[] = [];
    for (const e of entries) out.push(Math.max(100, mean - (now - (e.startedAt ?? now))));
    return out.sort((a, b) => a - b);
  }

  /** Seconds until one of the account's requests is expected to finish. */
  private secondsUntilAccountRoom(accountId: string): number {
    const now = this.clock.now();
    const own = [...this.running].filter((e) => e.workClass === "interactive" && e.accountId === accountId);
    if (own.length > 0) return toSeconds(this.remainingOfRunning(own, now)[0]!);
    // All of its requests wait: the first of them must reach a sequence (one round of the queue per
    // `capacity` requests ahead of it), then finish.
    const waiting = this.waiting.filter((e) => e.workClass === "interactive");
    const ahead = Math.max(0, waiting.findIndex((e) => e.accountId === accountId));
    const rounds = Math.floor(ahead / Math.max(1, this.options.capacity()));
    return toSeconds(this.msUntilQueueMoves(now) + rounds * this.meanDuration() + this.meanDuration());
  }

  private secondsUntilQueueMoves(): number {
    return toSeconds(this.msUntilQueueMoves(this.clock.now()));
  }

  /** Expected ms until some running request ends and the queue's head can start. */
  private msUntilQueueMoves(now: number): number {
    const ends = this.remainingOfRunning(this.running, now);
    return ends[0] ?? this.meanDuration();
  }
}

function toSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
