// The engine process's batching of events to the server (server/engine/event-outbox.ts), on fake timers:
// when a message goes out, and what it holds.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { BURST_EVENTS, BURST_GAP_MS, EventOutbox, FLUSH_MS, type EventBatches } from "../../server/engine/event-outbox.js";
import type { EngineEvent } from "../../server/engine/types.js";

const text = (t: string): EngineEvent => ({ type: "text.delta", text: t });
const start: EngineEvent = { type: "start", mode: "fast", promptTokens: 3, cachedTokens: 0 };

/** An outbox on fake time: what it sent, and when (ms of fake time). */
function outbox() {
  const sent: Array<{ at: number; batches: EventBatches }> = [];
  const box = new EventOutbox((batches) => sent.push({ at: Date.now(), batches }), () => Date.now());
  /** Ends the current turn of the event loop (its setImmediate callbacks run) without moving time. */
  const endTurn = () => vi.advanceTimersByTime(0);
  const texts = (i: number) => sent[i]!.batches.flatMap((b) => b.events.map((e) => (e.type === "text.delta" ? `${b.id}:${e.text}` : `${b.id}:${e.type}`)));
  return { box, sent, endTurn, texts };
}

describe("EventOutbox", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setImmediate", "Date"], now: 100_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("sends a generation's start at the end of its turn, and a lone event after a quiet spell at once", () => {
    const { box, sent, endTurn, texts } = outbox();
    box.queue(1, start);
    box.queue(1, text("a"));
    expect(sent).toHaveLength(0);
    endTurn();
    expect(sent).toHaveLength(1);
    expect(texts(0)).toEqual(["1:start", "1:a"]);
    vi.advanceTimersByTime(FLUSH_MS);
    box.queue(1, text("b"));
    endTurn();
    expect(sent).toHaveLength(2);
    expect(texts(1)).toEqual(["1:b"]);
  });

  it("holds single events that come sooner than FLUSH_MS after a message, and sends them together once FLUSH_MS has passed", () => {
    const { box, sent, endTurn, texts } = outbox();
    box.queue(1, start);
    endTurn();
    const first = sent[0]!.at;
    for (const t of ["a", "b", "c", "d", "e"]) {
      vi.advanceTimersByTime(2);
      box.queue(1, text(t));
      endTurn();
    }
    expect(sent).toHaveLength(1);
    vi.advanceTimersByTime(FLUSH_MS - 10 - 1);
    expect(sent).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(sent).toHaveLength(2);
    expect(sent[1]!.at - first).toBe(FLUSH_MS);
    expect(texts(1)).toEqual(["1:a", "1:b", "1:c", "1:d", "1:e"]);
  });

  it("sends a burst of one generation's events in one turn at once, so a solo run's batches do not wait for a timer", () => {
    const { box, sent, endTurn, texts } = outbox();
    box.queue(1, start);
    endTurn();
    // A run's first token, handed over at once, 2.5 ms after the start: held (the rate limit).
    vi.advanceTimersByTime(2.5);
    box.queue(1, text("t0"));
    endTurn();
    expect(sent).toHaveLength(1);
    vi.advanceTimersByTime(FLUSH_MS - 2.5);
    expect(sent).toHaveLength(2);
    expect(texts(1)).toEqual(["1:t0"]);
    // The run's next batch comes 16 ms after its first token, 2.5 ms after the timer's message: at once (before,
    // it waited 13.5 ms for the next timer, and every batch after it the same).
    vi.advanceTimersByTime(2.5);
    const timers = vi.spyOn(globalThis, "setTimeout");
    for (let i = 1; i <= 7; i++) box.queue(1, text(`t${i}`));
    const arrived = Date.now();
    endTurn();
    expect(sent).toHaveLength(3);
    expect(sent[2]!.at).toBe(arrived);
    // No timer was set for it (one set and cleared again still woke the process: Node re-arms lazily).
    expect(timers).not.toHaveBeenCalled();
    expect(texts(2)).toEqual(["1:t1", "1:t2", "1:t3", "1:t4", "1:t5", "1:t6", "1:t7"]);
    // And the batches after it, every 16 to 18 ms, go at once too.
    for (const gap of [17, 16, 18]) {
      vi.advanceTimersByTime(gap);
      for (let i = 0; i < 7; i++) box.queue(1, text(`u${i}`));
      const at = Date.now();
      endTurn();
      expect(sent.at(-1)!.at).toBe(at);
    }
    expect(timers).not.toHaveBeenCalled();
    expect(sent).toHaveLength(6);
  });

  it("sends bursts at most every BURST_GAP_MS (a lone answer's steps with their guesses kept)", () => {
    const { box, sent, endTurn } = outbox();
    box.queue(1, start);
    endTurn();
    vi.advanceTimersByTime(FLUSH_MS);
    for (let i = 0; i < BURST_EVENTS; i++) box.queue(1, text(`a${i}`));
    endTurn();
    expect(sent).toHaveLength(2);
    const burstAt = Date.now();
    vi.advanceTimersByTime(BURST_GAP_MS - 1);
    for (let i = 0; i < BURST_EVENTS + 2; i++) box.queue(1, text(`b${i}`));
    endTurn();
    expect(sent).toHaveLength(2);
    // It waits for the timer of the rate for single events (FLUSH_MS after the last message).
    vi.advanceTimersByTime(burstAt + FLUSH_MS - Date.now() - 1);
    expect(sent).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(sent).toHaveLength(3);
  });

  it("counts a burst within one turn only: single events over several turns keep the 16 ms rate", () => {
    const { box, sent, endTurn } = outbox();
    box.queue(1, start);
    endTurn();
    for (let i = 0; i < BURST_EVENTS * 2; i++) {
      vi.advanceTimersByTime(1.5);
      box.queue(1, text(`s${i}`));
      endTurn();
    }
    // 12 ms, eight single events in eight turns: still held.
    expect(sent).toHaveLength(1);
    vi.advanceTimersByTime(FLUSH_MS - 12);
    expect(sent).toHaveLength(2);
  });

  it("does not count several generations' events in one turn as a burst (a step of four answers keeps the 16 ms rate)", () => {
    const { box, sent, endTurn, texts } = outbox();
    for (const id of [1, 2, 3, 4]) box.queue(id, start);
    endTurn();
    expect(sent).toHaveLength(1);
    for (let step = 0; step < 3; step++) {
      vi.advanceTimersByTime(5);
      for (const id of [1, 2, 3, 4]) box.queue(id, text(`${step}`));
      endTurn();
    }
    expect(sent).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(sent).toHaveLength(2);
    expect(texts(1)).toEqual(["1:0", "2:0", "3:0", "4:0", "1:1", "2:1", "3:1", "4:1", "1:2", "2:2", "3:2", "4:2"]);
  });

  it("flush() sends what waits at once (before a generation's end), and nothing when nothing waits", () => {
    const { box, sent, endTurn, texts } = outbox();
    box.queue(1, start);
    endTurn();
    vi.advanceTimersByTime(3);
    box.queue(1, text("last"));
    box.flush();
    expect(sent).toHaveLength(2);
    expect(texts(1)).toEqual(["1:last"]);
    box.flush();
    vi.advanceTimersByTime(FLUSH_MS * 2);
    expect(sent).toHaveLength(2);
  });
});
