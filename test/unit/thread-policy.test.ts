import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  CoreContention,
  DecodeThreads,
  libuvPoolThreads,
  LONE_DECODE_EXPLORE_CLOSE,
  LONE_DECODE_EXPLORE_FAR,
  LONE_DECODE_FIRST,
  LoneDecodeThreads,
  splitThreads,
  systemCpuClock,
  usesOpenMp,
  type CpuClock,
} from "../../server/engine/thread-policy.js";
import type { DraftRounds } from "../../server/engine/context-binding.js";
import { loneRoundMs } from "../../server/engine/draft-model.js";

describe("splitThreads", () => {
  it("leaves a core to the JavaScript thread while a lone sequence generates, when the threads take every core", () => {
    expect(splitThreads(2, 2)).toEqual({ batch: 2, single: 1 });
    expect(splitThreads(8, 8)).toEqual({ batch: 8, single: 7 });
    expect(splitThreads(4, 2)).toEqual({ batch: 4, single: 1 });
  });

  it("keeps every thread for a build with OpenMP, whose threads sleep instead of spinning", () => {
    expect(splitThreads(2, 2, true)).toEqual({ batch: 2, single: 2 });
    expect(usesOpenMp("CPU : AVX2 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |")).toBe(true);
    expect(usesOpenMp("CPU : AVX2 = 1 | LLAMAFILE = 1 | REPACK = 1 |")).toBe(false);
  });

  it("keeps every thread when the decodes all run on one libuv pool thread", () => {
    expect(splitThreads(2, 2, false, 1)).toEqual({ batch: 2, single: 2 });
    expect(splitThreads(8, 8, false, 1)).toEqual({ batch: 8, single: 8 });
    expect(splitThreads(2, 2, false, 2)).toEqual({ batch: 2, single: 1 });
  });

  it("changes nothing when a core is free anyway", () => {
    expect(splitThreads(1, 2)).toEqual({ batch: 1, single: 1 });
    expect(splitThreads(4, 8)).toEqual({ batch: 4, single: 4 });
    expect(splitThreads(1, 1)).toEqual({ batch: 1, single: 1 });
  });
});

describe("the libuv pool size", () => {
  it("reads as libuv does: 4 when unset, C's atoi otherwise, 0 meaning 1 and at most 1024", () => {
    expect(libuvPoolThreads({})).toBe(4);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "1" })).toBe(1);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: " 2" })).toBe(2);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "3x" })).toBe(3);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "0" })).toBe(1);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "" })).toBe(1);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "lots" })).toBe(1);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "5000" })).toBe(1024);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "-3" })).toBe(1024);
  });

  it("agrees with the pool this Node starts (Linux: its threads counted in /proc)", async () => {
    if (process.platform !== "linux") return;
    const probe = [
      'const fs = require("fs");',
      "fs.readFile(__filename, () => console.log(fs.readdirSync('/proc/self/task').length));",
    ].join("\n");
    const dir = mkdtempSync(join(tmpdir(), "svc-test-pool-"));
    try {
      const file = join(dir, "probe.cjs");
      writeFileSync(file, probe);
      const threads = (value: string | undefined) => {
        const env = { ...process.env };
        if (value === undefined) delete env.UV_THREADPOOL_SIZE;
        else env.UV_THREADPOOL_SIZE = value;
        return Number(execFileSync(process.execPath, [file], { env, encoding: "utf8" }).trim());
      };
      // Node's own threads are the same in every run; the pool's are the difference.
      const base = threads("1") - 1;
      for (const value of [undefined, "0", "lots", "3x", " 2"]) expect(threads(value) - base, String(value)).toBe(libuvPoolThreads(value === undefined ? {} : { UV_THREADPOOL_SIZE: value }));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the svc command's pool (bin/libuv-pool.js)", () => {
  const { useOnePoolThread } = createRequire(import.meta.url)("../../bin/libuv-pool.js") as {
    useOnePoolThread(env: NodeJS.ProcessEnv, platform: NodeJS.Platform): boolean;
  };

  it("asks for one pool thread unless the user set a size", () => {
    const env: NodeJS.ProcessEnv = {};
    expect(useOnePoolThread(env, "linux")).toBe(true);
    expect(env.UV_THREADPOOL_SIZE).toBe("1");
    const mine: NodeJS.ProcessEnv = { UV_THREADPOOL_SIZE: "4" };
    expect(useOnePoolThread(mine, "darwin")).toBe(false);
    expect(mine.UV_THREADPOOL_SIZE).toBe("4");
  });

  it("leaves Windows alone, where a size set from inside the process does not reach libuv", () => {
    const env: NodeJS.ProcessEnv = {};
    expect(useOnePoolThread(env, "win32")).toBe(false);
    expect(env.UV_THREADPOOL_SIZE).toBeUndefined();
    expect(libuvPoolThreads(env)).toBe(4);
  });
});

describe("DecodeThreads", () => {
  it("gives a lone token's decode and a solo run the single count, prompts and batched steps all threads", () => {
    const threads = DecodeThreads.for({ batch: 2, single: 1 })!;
    // A prompt, one sequence generating, four together, two generating while a third reads its prompt, one
    // token with its guesses, alone again.
    expect([40, 1, 4, 302, 3, 1].map((n) => threads.forBatch(n))).toEqual([2, 1, 2, 2, 2, 1]);
    expect(threads.forSolo()).toBe(1);
  });

  it("is null where there is nothing to choose: one thread for every decode", () => {
    expect(DecodeThreads.for({ batch: 1, single: 1 })).toBeNull();
    expect(DecodeThreads.for({ batch: 1, single: 1 }, { contention: new CoreContention() })).toBeNull();
    // A lone token's count is measured between 2 and 1 (LoneDecodeThreads).
    expect(DecodeThreads.for({ batch: 2, single: 2 })).not.toBeNull();
    expect(DecodeThreads.for({ batch: 2, single: 2 }, { contention: new CoreContention() })).not.toBeNull();
  });

  it("measures a lone token's decodes with the single count and one fewer, and keeps the faster; batches keep every thread", () => {
    const threads = DecodeThreads.for({ batch: 2, single: 2 })!;
    // The 17 MB Q4_K_M model on 2 cores (docs/performance.md section 37): 2 threads 2 to 45 ms a token, 1 thread 2.
    const took = (n: number) => (n === 2 ? 9.7 : 2.1);
    const used: number[] = [];
    for (let i = 0; i < 40; i++) {
      const n = threads.forBatch(1);
      used.push(n);
      threads.decoded(1, n, took(n));
      expect(threads.forBatch(20)).toBe(2);
      threads.decoded(20, 2, 30); // not a lone decode: not counted
    }
    expect(used.slice(0, 2 * LONE_DECODE_FIRST)).toEqual([2, 1, 2, 1, 2, 1, 2, 1]);
    expect(used.slice(2 * LONE_DECODE_FIRST)).toEqual(Array(40 - 2 * LONE_DECODE_FIRST).fill(1));
    expect(threads.forSolo()).toBe(2); // a solo run (svc engine build) sets its own count as it starts
  });
});

/**
 * The counts a policy gives `decodes` lone decodes (or jobs of them), from its first; each is recorded as
 * `took` says: its ms, or its ms and the decodes it holds, or nothing (null).
 */
function drive(choice: LoneDecodeThreads, decodes: number, took: (threads: number, i: number) => number | readonly [number, number] | null): number[] {
  const used: number[] = [];
  for (let i = 0; i < decodes; i++) {
    const n = choice.next();
    used.push(n);
    const ms = took(n, i);
    if (ms === null) continue;
    if (typeof ms === "number") choice.record(n, ms);
    else choice.record(n, ms[0], ms[1]);
  }
  return used;
}

describe("LoneDecodeThreads", () => {
  /** The counts of `decodes` lone decodes after the first of each, each taking `took(threads)` ms. */
  function run(choice: LoneDecodeThreads, took: (threads: number) => number, decodes: number): number[] {
    const used: number[] = [];
    for (let i = 0; i < 2 * LONE_DECODE_FIRST + decodes; i++) {
      const n = choice.next();
      if (i >= 2 * LONE_DECODE_FIRST) used.push(n);
      choice.record(n, took(n));
    }
    return used;
  }
  const count = (used: number[], n: number) => used.filter((u) => u === n).length;

  it("keeps every thread where they are faster (the 110 MB F32 model: 5.5 ms against 7), trying one fewer every 256th decode", () => {
    const used = run(new LoneDecodeThreads(2), (n) => (n === 2 ? 5.5 : 7), 1024);
    expect(count(used, 1)).toBe(1024 / LONE_DECODE_EXPLORE_FAR);
    expect(count(used, 2)).toBe(1024 - 1024 / LONE_DECODE_EXPLORE_FAR);
  });

  it("tries the other count every 32nd decode while the two are within a quarter of each other", () => {
    const used = run(new LoneDecodeThreads(8), (n) => (n === 7 ? 10 : 11), 256);
    expect(new Set(used)).toEqual(new Set([7, 8]));
    expect(count(used, 8)).toBe(256 / LONE_DECODE_EXPLORE_CLOSE);
  });

  it("follows a change: the count chosen becomes slower and the other is taken at its next try", () => {
    const choice = new LoneDecodeThreads(2);
    let slowTwo = false;
    const took = (n: number) => (n === 2 ? (slowTwo ? 12 : 4.5) : 5);
    expect(count(run(choice, took, 64), 2)).toBe(64 - 64 / LONE_DECODE_EXPLORE_CLOSE);
    // The client now wakes the JavaScript thread for every token: two threads' decodes take three times as long.
    slowTwo = true;
    const after = run(choice, took, 64);
    // Within a window of 2's decodes the mean passes 1's, and 1 is kept from then on but for its tries of 2.
    expect(after.slice(-32).filter((n) => n === 2).length).toBeLessThanOrEqual(1);
  });

  it("counts a job's rounds towards the next try: two slow jobs of two threads are outlived in a few dozen jobs, not 256", () => {
    // bench:spec's lone draft: 15 rounds a job, 0.5 ms a round on two threads, 0.85 on one; the third and
    // fourth jobs on two threads took 2.67 ms a round (another thread on a core while both spun).
    const jobs = (counted: boolean) => {
      let twos = 0;
      return drive(new LoneDecodeThreads(2), 96, (n) => [n === 1 ? 0.85 : [3, 4].includes(++twos) ? 2.67 : 0.5, counted ? 15 : 1]);
    };
    // Counted as 15 decodes each, two threads are tried every 17th job, then every third while the means are
    // within a quarter, each try replacing a measure: from the 48th job, two threads but for one's tries.
    expect(jobs(true).slice(48).filter((n) => n === 1).length).toBeLessThanOrEqual(3);
    // Counted as one decode, two threads were tried every 256th job: one thread from there on.
    expect(jobs(false).slice(48).filter((n) => n === 2).length).toBe(0);
  });

  it("leaves one slow decode out of a count's mean: one spike in its first decodes does not decide", () => {
    let twos = 0;
    const used = drive(new LoneDecodeThreads(2), 64, (n) => (n === 1 ? 0.85 : ++twos === 2 ? 3.12 : 0.5));
    expect(used.slice(8).filter((n) => n === 1).length).toBeLessThanOrEqual(1);
    // Two slow decodes in the window stay in its mean: the count that made them is left.
    twos = 0;
    const after = drive(new LoneDecodeThreads(2), 64, (n) => (n === 1 ? 0.85 : ++twos % 2 === 0 ? 3.12 : 0.5));
    expect(after.slice(8).filter((n) => n === 2).length).toBeLessThanOrEqual(2);
  });

  it("has nothing to choose with one thread, and keeps no decode made with a count a cap chose", () => {
    const one = new LoneDecodeThreads(1);
    expect([one.next(), one.next(), one.next()]).toEqual([1, 1, 1]);
    const two = new LoneDecodeThreads(4);
    two.record(2, 0.5); // capped to 2 by other processes' load: neither 4 nor 3
    expect(two.next()).toBe(4);
    two.record(4, 10);
    expect(two.next()).toBe(3);
  });
});

describe("a draft model's rounds in one job (draft-model.ts loneRoundMs)", () => {
  /** A job of one draft on the engine build: `guesses` guesses, each round after the first `round` ms, the first (reading 17 tokens) 1.5 ms. */
  const job = (guesses: number, round: number, cut: boolean): { rounds: DraftRounds; wholeMs: number } => {
    // A draft ended by its most asked does not decode its last guess; one cut by confidence decodes them all.
    const laterRounds = cut ? guesses : guesses - 1;
    const rounds = Object.assign([[17 + laterRounds, ...Array.from({ length: guesses }, (_, i) => i)]], { laterRounds, laterMs: laterRounds * round });
    return { rounds, wholeMs: 1.5 + laterRounds * round };
  };

  it("measures the rounds after the first: a lone one's, none for a draft cut at its first guess or for several drafts", () => {
    expect(loneRoundMs(job(16, 0.67, false).rounds, 1)).toBeCloseTo(0.67);
    expect(loneRoundMs(job(3, 0.9, true).rounds, 1)).toBeCloseTo(0.9);
    expect(loneRoundMs(job(1, 0.67, false).rounds, 1)).toBeNull();
    expect(loneRoundMs(job(16, 0.67, false).rounds, 4)).toBeNull();
  });

  it("keeps two threads where their rounds are faster, though jobs cut short on them were slow over their guesses", () => {
    // bench:spec's lone draft: 0.67 ms a round on two threads, 0.86 on one; every fourth job cut at its first
    // guess, and those fell on two threads.
    const choose = (measure: (j: { rounds: DraftRounds; wholeMs: number }, guesses: number) => number | null) => {
      const used = drive(new LoneDecodeThreads(2), 64, (threads, i) => {
        const guesses = i % 4 === 0 && threads === 2 ? 1 : 16;
        return measure(job(guesses, threads === 2 ? 0.67 : 0.86, false), guesses);
      });
      return used.slice(-32).filter((n) => n === 2).length;
    };
    expect(choose((j) => loneRoundMs(j.rounds, 1))).toBeGreaterThanOrEqual(31);
    // The job's whole time over its guesses (what was measured before) made two threads look slower here.
    expect(choose((j, guesses) => j.wholeMs / guesses)).toBeLessThanOrEqual(1);
  });
});

/** A CPU clock driven by the test: time passes, this process and the others use CPU. */
function fakeClock() {
  let at = 0;
  let machine = 0;
  let own = 0;
  const clock: CpuClock = { now: () => at, machineBusyMs: () => machine, ownMs: () => own };
  /** `ms` pass with this process on `ownCores` cores and other processes on `otherCores`. */
  const pass = (ms: number, ownCores: number, otherCores: number) => {
    at += ms;
    own += ms * ownCores;
    machine += ms * (ownCores + otherCores);
  };
  return { clock, pass };
}

/** A gauge on a fake clock that has taken its first reading. */
function startedGauge() {
  const { clock, pass } = fakeClock();
  const gauge = new CoreContention(clock, 250);
  gauge.othersBusy();
  return { gauge, pass };
}

describe("CoreContention", () => {
  it("measures the cores other processes keep busy over each finished window, not this process's own", () => {
    const { clock, pass } = fakeClock();
    const gauge = new CoreContention(clock, 250);
    expect(gauge.othersBusy()).toBe(0); // nothing measured yet
    pass(100, 2, 1);
    expect(gauge.othersBusy()).toBe(0); // the window is not over
    pass(150, 2, 1);
    expect(gauge.othersBusy()).toBeCloseTo(1);
    pass(300, 1.5, 0.2);
    expect(gauge.othersBusy()).toBeCloseTo(0.2);
  });

  it("caps the threads at the cores the others leave, counting a core from half busy, never below 1", () => {
    const { gauge, pass } = startedGauge();
    pass(250, 2, 0.3);
    expect(gauge.cap(2, 2)).toBe(2);
    pass(250, 2, 0.6);
    expect(gauge.cap(2, 2)).toBe(1);
    pass(250, 1, 3);
    expect(gauge.cap(2, 2)).toBe(1);
    expect(gauge.cap(4, 8)).toBe(4); // 3 of 8 cores taken leaves 5
    pass(250, 4, 6);
    expect(gauge.cap(4, 8)).toBe(2);
    expect(gauge.cap(1, 2)).toBe(1);
  });

  it("forgets a reading after an idle gap: what ran then says little about now", () => {
    const { gauge, pass } = startedGauge();
    pass(250, 2, 1);
    expect(gauge.cap(2, 2)).toBe(1);
    pass(5000, 0, 0);
    expect(gauge.cap(2, 2)).toBe(2);
    pass(250, 2, 0);
    expect(gauge.cap(2, 2)).toBe(2);
  });

  it("reads this machine's CPU times (a busy loop here is this process's own, not another's)", () => {
    const gauge = new CoreContention(systemCpuClock, 50);
    gauge.othersBusy();
    const end = performance.now() + 120;
    while (performance.now() < end);
    const others = gauge.othersBusy();
    expect(others).toBeGreaterThanOrEqual(0);
    expect(others).toBeLessThanOrEqual(availableParallelism());
  });
});

describe("DecodeThreads with other processes' load", () => {
  it("caps every decode's threads while other processes keep cores busy, and says when the cap changes", () => {
    const { clock, pass } = fakeClock();
    const changes: string[] = [];
    const contention = new CoreContention(clock, 250);
    const threads = DecodeThreads.for({ batch: 2, single: 2 }, { contention, cores: 2, onCapChange: (from, to, others) => changes.push(`${from}->${to} at ${others.toFixed(1)}`) })!;
    const decodedWith = [threads.forBatch(1)]; // first reading: no cap yet
    pass(250, 2, 1);
    decodedWith.push(threads.forBatch(1)); // a core busy elsewhere
    decodedWith.push(threads.forBatch(40)); // a prompt batch too
    pass(250, 1, 0.1);
    decodedWith.push(threads.forBatch(2)); // free again
    expect(decodedWith).toEqual([2, 1, 1, 2]);
    expect(changes).toEqual(["2->1 at 1.0", "1->2 at 0.1"]);
  });

  it("starts each solo run with the lone-step threads under the cap, read as it starts", () => {
    const { clock, pass } = fakeClock();
    const changes: string[] = [];
    const contention = new CoreContention(clock, 250);
    const threads = DecodeThreads.for({ batch: 2, single: 2 }, { contention, cores: 2, onCapChange: (from, to) => changes.push(`${from}->${to}`) })!;
    const decodedWith = [threads.forSolo()]; // first reading: no cap yet
    pass(250, 2, 1);
    decodedWith.push(threads.forSolo()); // a core busy elsewhere
    pass(250, 1, 0);
    decodedWith.push(threads.forBatch(2)); // two together, free again
    expect(decodedWith).toEqual([2, 1, 2]);
    expect(changes).toEqual(["2->1", "1->2"]);
  });

  it("keeps the lone-step split under the cap", () => {
    const { clock, pass } = fakeClock();
    const contention = new CoreContention(clock, 250);
    const threads = DecodeThreads.for({ batch: 4, single: 3 }, { contention, cores: 4 })!;
    const decodedWith = [threads.forBatch(1)];
    pass(250, 3, 2);
    decodedWith.push(threads.forBatch(1), threads.forBatch(2));
    expect(decodedWith).toEqual([3, 2, 2]);
  });
});
