import { describe, expect, it } from "vitest";
import { DecodeRound, LATE_MS, pacedTokens } from "../../server/engine/decode-round.js";

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A token source whose decodes complete when the test says so, like sequences sharing a batch. */
function scriptedSource() {
  const waiting: Array<(value: IteratorResult<number, void>) => void> = [];
  let requests = 0;
  let n = 0;
  const inner: AsyncGenerator<number, void, unknown> = {
    next: () => {
      requests++;
      return new Promise((resolve) => waiting.push(resolve));
    },
    return: async () => ({ value: undefined, done: true }),
    throw: async (e) => {
      throw e;
    },
    [Symbol.asyncIterator]() {
      return inner;
    },
  };
  return {
    inner,
    get requests() {
      return requests;
    },
    /** Completes the pending decode with the next token. */
    deliver() {
      waiting.shift()?.({ value: n++, done: false });
    },
  };
}

describe("DecodeRound", () => {
  it("dispatches at once while one sequence generates", () => {
    const round = new DecodeRound();
    let dispatched = 0;
    round.schedule(() => dispatched++);
    expect(dispatched).toBe(1);
  });

  it("lets a lone sequence ask for its next token without waiting", async () => {
    const round = new DecodeRound();
    const src = scriptedSource();
    const tokens = pacedTokens(src.inner, round.member());
    const first = tokens.next();
    src.deliver();
    expect(await first).toEqual({ value: 0, done: false });
    void tokens.next();
    await Promise.resolve();
    expect(src.requests).toBe(2);
  });

  it("holds each sequence's next request until every member has its token, then releases them together", async () => {
    const round = new DecodeRound();
    const a = scriptedSource();
    const b = scriptedSource();
    const ma = round.member();
    const mb = round.member();
    const ta = pacedTokens(a.inner, ma);
    const tb = pacedTokens(b.inner, mb);
    // Both read their prompts and get their first tokens: both are members now.
    const fa = ta.next();
    const fb = tb.next();
    a.deliver();
    b.deliver();
    await Promise.all([fa, fb]);
    // Second tokens: a's arrives first; a must not ask for its third token before b has its second.
    const sa = ta.next();
    const sb = tb.next();
    await tick();
    expect([a.requests, b.requests]).toEqual([2, 2]);
    a.deliver();
    await sa;
    void ta.next();
    await tick();
    expect(a.requests).toBe(2);
    b.deliver();
    await sb;
    void tb.next();
    await tick();
    expect([a.requests, b.requests]).toEqual([3, 3]);
    ma.leave();
    mb.leave();
  });

  it("batches several sequences: the dispatch waits until the promise jobs under way (the members queueing) are done", async () => {
    const round = new DecodeRound();
    const a = scriptedSource();
    const b = scriptedSource();
    const ta = pacedTokens(a.inner, round.member());
    const tb = pacedTokens(b.inner, round.member());
    const fa = ta.next();
    const fb = tb.next();
    a.deliver();
    b.deliver();
    await Promise.all([fa, fb]);
    const order: string[] = [];
    await Promise.resolve().then(() => {
      round.schedule(() => order.push("dispatch"));
      // A member still on its way to the queue: a cascade of promise jobs.
      let chain = Promise.resolve();
      for (let i = 0; i < 50; i++) chain = chain.then(() => undefined);
      void chain.then(() => order.push("last member queued"));
      setImmediate(() => order.push("I/O turn"));
    });
    await tick();
    await tick();
    expect(order).toEqual(["last member queued", "dispatch", "I/O turn"]);
  });

  it("does not let a member that holds its token wait the others for more than LATE_MS", async () => {
    const round = new DecodeRound();
    const a = scriptedSource();
    const b = scriptedSource();
    const ta = pacedTokens(a.inner, round.member());
    const tb = pacedTokens(b.inner, round.member());
    const fa = ta.next();
    const fb = tb.next();
    a.deliver();
    b.deliver();
    await Promise.all([fa, fb]);
    // b never asks for its next token (its consumer stalled); a asks and is held at most about LATE_MS.
    const started = performance.now();
    void ta.next();
    await tick();
    expect(a.requests).toBe(1);
    while (a.requests === 1 && performance.now() - started < 1000) await new Promise((r) => setTimeout(r, 1));
    expect(a.requests).toBe(2);
    expect(performance.now() - started).toBeGreaterThanOrEqual(LATE_MS - 1);
    // From then on b is left out: a's following tokens do not wait for it.
    a.deliver();
    await tick();
    void ta.next();
    await tick();
    expect(a.requests).toBe(3);
    // When b asks again, it waits for a's token in flight, then both go on together.
    void tb.next();
    await tick();
    expect(b.requests).toBe(1);
    a.deliver();
    await tick();
    void ta.next();
    await tick();
    expect([a.requests, b.requests]).toEqual([4, 2]);
  });

  it("releases the waiting members when another leaves", async () => {
    const round = new DecodeRound();
    const a = scriptedSource();
    const b = scriptedSource();
    const mb = round.member();
    const ta = pacedTokens(a.inner, round.member());
    const tb = pacedTokens(b.inner, mb);
    const fa = ta.next();
    const fb = tb.next();
    a.deliver();
    b.deliver();
    await Promise.all([fa, fb]);
    void ta.next();
    await tick();
    expect(a.requests).toBe(1);
    mb.leave();
    await tick();
    expect(a.requests).toBe(2);
  });
});
