// The scheduler alone, on a fake clock: ordering, aging, the interactive reserve, limits, Retry-After and
// cancellation.
import { describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import { Scheduler, type Ticket, type WorkClass } from "../../server/pipeline/scheduler.js";

class FakeClock {
  t = 0;
  now(): number {
    return this.t;
  }
}

function setup(options: { capacity?: number; accountLimit?: number; maxQueue?: number; agingMs?: number } = {}) {
  const clock = new FakeClock();
  let capacity = options.capacity ?? 1;
  const scheduler = new Scheduler({
    capacity: () => capacity,
    accountLimit: options.accountLimit,
    maxQueue: options.maxQueue,
    agingMs: options.agingMs,
    clock,
    unavailable: () => new AppError("unavailable", "No model.", { code: "model_not_loaded", retryAfter: 30 }),
  });
  const started: string[] = [];
  const tickets = new Map<string, Ticket>();
  const take = (name: string, workClass: WorkClass = "interactive", accountId = "acct_a", signal = new AbortController().signal) => {
    const p = scheduler.acquire({ accountId, workClass, signal }).then((ticket) => {
      started.push(name);
      tickets.set(name, ticket);
      return ticket;
    });
    return p;
  };
  const release = async (name: string) => {
    tickets.get(name)!.release();
    await flush();
  };
  return { scheduler, clock, started, take, release, setCapacity: (n: number) => (capacity = n) };
}

const flush = () => new Promise((r) => setImmediate(r));

describe("ordering", () => {
  it("starts interactive before agent before batch, first come first served within a class", async () => {
    const s = setup({ capacity: 1 });
    void s.take("first");
    await flush();
    void s.take("b1", "batch");
    void s.take("a1", "agent");
    void s.take("i1");
    void s.take("b2", "batch");
    void s.take("i2");
    await flush();
    expect(s.started).toEqual(["first"]);
    for (const name of ["first", "i1", "i2", "a1", "b1"]) await s.release(name);
    expect(s.started).toEqual(["first", "i1", "i2", "a1", "b1", "b2"]);
  });

  it("with one sequence, an interactive request sent during a flood of batch work starts next", async () => {
    const s = setup({ capacity: 1 });
    for (let i = 0; i < 20; i++) void s.take(`b${i}`, "batch");
    await flush();
    expect(s.started).toEqual(["b0"]);
    void s.take("chat");
    await flush();
    await s.release("b0");
    expect(s.started).toEqual(["b0", "chat"]);
  });

  it("ages waiting work one class level per agingMs, so batch work is never starved", async () => {
    const s = setup({ capacity: 1, agingMs: 1000 });
    void s.take("i0");
    await flush();
    void s.take("batch", "batch");
    s.clock.t = 1500; // batch is now at the agent level: still behind fresh interactive work
    void s.take("i1");
    await s.release("i0");
    expect(s.started).toEqual(["i0", "i1"]);
    s.clock.t = 2500; // two levels up: it ranks with interactive work and arrived before i2
    void s.take("i2");
    await s.release("i1");
    expect(s.started).toEqual(["i0", "i1", "batch"]);
  });
});

describe("the interactive reserve", () => {
  it("keeps one sequence free for interactive work while background work runs, when there is more than one", async () => {
    const s = setup({ capacity: 3 });
    for (let i = 0; i < 5; i++) void s.take(`b${i}`, "batch");
    void s.take("a0", "agent");
    await flush();
    // Two of three sequences: the agent step outranks the batch items still waiting but the reserve holds.
    expect(s.started).toEqual(["b0", "b1"]);
    expect(s.scheduler.stats()).toMatchObject({ running: 2, waiting: 4 });
    void s.take("chat");
    await flush();
    expect(s.started).toEqual(["b0", "b1", "chat"]);
    await s.release("b0");
    expect(s.started.at(-1)).toBe("a0");
  });

  it("lets background work use the only sequence when there is just one", async () => {
    const s = setup({ capacity: 1 });
    void s.take("b0", "batch");
    await flush();
    expect(s.started).toEqual(["b0"]);
  });
});

describe("limits", () => {
  it("refuses an account's request beyond its limit with a 429 whose Retry-After comes from recent durations", async () => {
    const s = setup({ capacity: 2, accountLimit: 2 });
    // History: requests have been taking 8 s.
    for (let i = 0; i < 3; i++) {
      void s.take(`h${i}`);
      await flush();
      s.clock.t += 8000;
      await s.release(`h${i}`);
    }
    void s.take("x");
    void s.take("y");
    await flush();
    s.clock.t += 3000;
    const refused = await s.take("z").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AppError);
    expect(refused).toMatchObject({ kind: "rate_limit", status: 429, code: "concurrency_limit_exceeded", retryAfter: 5 });
    // Another account is not affected.
    void s.take("other", "interactive", "acct_b");
    expect(s.scheduler.usage("acct_a")).toEqual({ limit: 2, inFlight: 2, remaining: 0, resetSeconds: 5 });
    expect(s.scheduler.usage("acct_b")).toMatchObject({ limit: 2, inFlight: 1, remaining: 1, resetSeconds: 0 });
  });

  it("estimates Retry-After for an account whose requests all wait from their place in the queue", async () => {
    const s = setup({ capacity: 1, accountLimit: 1 });
    void s.take("h");
    await flush();
    s.clock.t += 4000;
    await s.release("h"); // requests take 4 s
    void s.take("r", "interactive", "acct_a");
    void s.take("w1", "interactive", "acct_c");
    void s.take("w2", "interactive", "acct_d");
    void s.take("w3", "interactive", "acct_b");
    await flush();
    s.clock.t += 1000;
    const refused = await s.take("x", "interactive", "acct_b").catch((e: unknown) => e);
    // r ends in about 3 s; w1 and w2 then take 4 s each before w3 starts, which takes 4 s more.
    expect(refused).toMatchObject({ status: 429, retryAfter: 15 });
  });

  it("sizes the default account limit to the engine's sequences", () => {
    const s = setup({ capacity: 2 });
    expect(s.scheduler.accountLimit()).toBe(8);
    s.setCapacity(1);
    expect(s.scheduler.accountLimit()).toBe(4);
  });

  it("refuses with 429 queue_full once maxQueue requests wait, and admits again when the queue moves", async () => {
    const s = setup({ capacity: 1, maxQueue: 2 });
    void s.take("r", "interactive", "acct_1");
    void s.take("w1", "interactive", "acct_2");
    void s.take("w2", "interactive", "acct_3");
    await flush();
    const refused = await s.take("w3", "interactive", "acct_4").catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 429, code: "queue_full" });
    expect((refused as AppError).retryAfter).toBeGreaterThanOrEqual(1);
    // Background work is bounded by its owners, not by the queue.
    void s.take("b", "batch", "acct_5");
    await s.release("r");
    let refusedAgain: unknown = null;
    void s.take("w4", "interactive", "acct_4").catch((e: unknown) => (refusedAgain = e));
    await flush();
    expect(refusedAgain).toBeNull();
    expect(s.scheduler.stats().byClass).toMatchObject({ interactive: { running: 1, waiting: 2 }, batch: { waiting: 1 } });
  });

  it("never counts batch or agent work against the account's interactive limit", async () => {
    const s = setup({ capacity: 1, accountLimit: 1 });
    void s.take("b0", "batch");
    void s.take("b1", "batch");
    await flush();
    void s.take("chat");
    await flush();
    expect(s.scheduler.usage("acct_a")).toMatchObject({ inFlight: 1, remaining: 0 });
  });
});

describe("cancellation and capacity", () => {
  it("a waiter whose client disconnects leaves the queue at once and frees its account's place", async () => {
    const s = setup({ capacity: 1, accountLimit: 2 });
    void s.take("r");
    await flush();
    const controller = new AbortController();
    const waiting = s.take("w", "interactive", "acct_a", controller.signal).catch((e: unknown) => e);
    await flush();
    expect(s.scheduler.stats().waiting).toBe(1);
    expect(s.scheduler.usage("acct_a").remaining).toBe(0);
    controller.abort(new Error("client disconnected"));
    expect(await waiting).toMatchObject({ message: "client disconnected" });
    expect(s.scheduler.stats().waiting).toBe(0);
    expect(s.scheduler.usage("acct_a").remaining).toBe(1);
    await s.release("r");
    expect(s.started).toEqual(["r"]);
  });

  it("an already aborted signal is refused without queueing", async () => {
    const s = setup();
    const controller = new AbortController();
    controller.abort(new Error("gone"));
    await expect(s.take("x", "interactive", "acct_a", controller.signal)).rejects.toThrow("gone");
    expect(s.scheduler.stats()).toMatchObject({ running: 0, waiting: 0 });
  });

  it("releasing twice frees one place", async () => {
    const s = setup({ capacity: 1 });
    const t = await s.take("a");
    void s.take("b");
    void s.take("c");
    t.release();
    t.release();
    await flush();
    expect(s.started).toEqual(["a", "b"]);
  });

  it("fails waiters with the unavailable error when the model goes away, and serves new capacity", async () => {
    const s = setup({ capacity: 1 });
    void s.take("r");
    await flush();
    const waiting = s.take("w").catch((e: unknown) => e);
    s.setCapacity(0);
    s.scheduler.refresh();
    expect(await waiting).toMatchObject({ status: 503, code: "model_not_loaded" });
    s.setCapacity(2);
    void s.take("x");
    await flush();
    expect(s.started).toEqual(["r", "x"]);
  });

  it("records how long each ticket waited", async () => {
    const s = setup({ capacity: 1 });
    const first = await s.take("a");
    const second = s.take("b");
    s.clock.t = 2500;
    first.release();
    expect((await second).waitedMs).toBe(2500);
  });
});
