// How the engine process sends its generations' events to the server (engine-child.ts): together, so that the
// server's process wakes about 60 times a second for a generation's tokens, not for each. On a machine with as
// many decode threads as cores, every wake-up takes a core from a decode whose threads spin waiting for each
// other (thread-policy.ts).
import type { EngineEvent } from "./types.js";

/** The least time between two messages of events, except for a start and for bursts. */
export const FLUSH_MS = 16;
/** A burst: this many or more of one generation's events in one turn of the event loop. */
export const BURST_EVENTS = 4;
/** A burst goes at once when this long has passed since the last burst went. */
export const BURST_GAP_MS = FLUSH_MS / 2;

export type EventBatches = Array<{ id: number; events: EngineEvent[] }>;

/**
 * Events leave together: those of one turn of the event loop at once when nothing left in the last FLUSH_MS,
 * otherwise FLUSH_MS after the last message, and a generation's start at once. A burst (BURST_EVENTS or more
 * of one generation's events in one turn: a solo run's tokens, which the addon hands over together at most
 * every 16 ms itself, or a step's accepted guesses) goes at once too when BURST_GAP_MS have passed since the
 * last burst went. Without that, the two 16 ms clocks fell out of step: a run's first token (handed over at
 * once) set this one's, and every later batch of a run's tokens then waited 9 to 14 ms here for a timer, a
 * second wake-up of the engine process for each (docs/performance.md, section 52). Counted from the last
 * message of any kind, a batch that came 2 or 3 ms after a timer's message still waited for the next timer,
 * and the next batch again. So messages of single events come at most every FLUSH_MS, and bursts at most
 * every BURST_GAP_MS.
 */
export class EventOutbox {
  private outbox: EventBatches = [];
  private timer: NodeJS.Timeout | null = null;
  private lastFlush = -Infinity;
  /** When a message last carried a burst, and whether the waiting events hold one. */
  private lastBurstFlush = -Infinity;
  private holdsBurst = false;
  /**
   * This turn's events, looked at once as the turn ends (setImmediate): whether one is a start, and the longest
   * run of one generation's. Deciding then rather than at each event sets no timer for a burst's first event
   * (a timer cleared again still woke the process once, Node's timer list being re-armed lazily).
   */
  private turn: { start: boolean; id: number; run: number; longest: number } | null = null;

  constructor(
    private readonly send: (batches: EventBatches) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  queue(id: number, event: EngineEvent): void {
    const last = this.outbox.at(-1);
    if (last?.id === id) last.events.push(event);
    else this.outbox.push({ id, events: [event] });
    if (this.turn === null) {
      this.turn = { start: false, id, run: 0, longest: 0 };
      setImmediate(() => this.endTurn());
    }
    const turn = this.turn;
    turn.run = turn.id === id ? turn.run + 1 : 1;
    turn.id = id;
    turn.longest = Math.max(turn.longest, turn.run);
    if (event.type === "start") turn.start = true;
  }

  private endTurn(): void {
    const turn = this.turn!;
    this.turn = null;
    if (this.outbox.length === 0) return;
    if (turn.longest >= BURST_EVENTS) this.holdsBurst = true;
    const now = this.now();
    const since = now - this.lastFlush;
    if (turn.start || since >= FLUSH_MS || (this.holdsBurst && now - this.lastBurstFlush >= BURST_GAP_MS)) this.flush();
    else if (this.timer === null) this.timer = setTimeout(() => this.flush(), FLUSH_MS - since);
  }

  /** Sends what waits now (before a generation's end or failure, which must come after its events). */
  flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.outbox.length === 0) return;
    const batches = this.outbox;
    this.outbox = [];
    this.lastFlush = this.now();
    if (this.holdsBurst) this.lastBurstFlush = this.lastFlush;
    this.holdsBurst = false;
    this.send(batches);
  }
}
