// How many CPU threads each llama.cpp decode gets, and on how many libuv pool threads the decodes run.
//
// The pool first. node-llama-cpp runs each decode and each sampling as a job on libuv's thread pool (4
// threads unless UV_THREADPOOL_SIZE says otherwise), and each job goes to whichever pool thread has waited
// longest, so a generation's decodes hop from one pool thread to the next. With n > 1 threads each decode
// also starts n - 1 ggml threads of its own (node-llama-cpp's CPU binaries have no OpenMP and attach no
// thread pool), and a decode started from a pool thread other than the last one's ran at about half speed
// with 2 threads on 2 cores: 4 sequences' steps took 10 to 16 ms instead of 6.5, with nothing else
// running. With one pool thread (or the other three held busy) the same decodes took 6.5 to 7.2 ms, as
// fast as the same libraries driven from one thread (bench:native-loop). So the `svc` command sets
// UV_THREADPOOL_SIZE=1 unless the user set it: every decode then runs on the same thread. The engine runs in
// a process of its own (process-engine.ts), started with that setting in its environment, so it holds in the
// desktop app and on Windows too (bin/svc.js also sets it for the server process itself). The cost, now
// only inside the engine process: its other pool work waits for the decode running. docs/performance.md,
// section 9, has the measurements.
//
// Then the threads. Each decode's ggml threads meet at every operation in a barrier that spins, never
// sleeps; when another thread wants one of the cores (the JavaScript thread handling the token just made,
// or any other process), a spinning thread holds it while the one it waits for is off the CPU. With the
// decodes hopping between pool threads, 2 threads generated one stream 3 to 13 times slower than 1 on 2
// cores, so a lone sequence's step kept one core fewer; with one pool thread 2 threads generate it faster
// than 1 (bench:peer threads 2, single stream 0.86 to 0.91 of llama-server against 0.61 to 0.68), and
// the split applies only where the pool has more threads. Prompt batches and steps of several sequences use all
// threads either way.
//
// node-llama-cpp sets one thread count per context; the count for each decode is chosen here
// (DecodeThreads) and set by the slot loop (slot-loop.ts), the one way to the engine, just before each of its
// decodes and solo runs, and by a draft model's rounds before each of theirs (draft-model.ts, on its own
// context). node-llama-cpp's own decodes (where the slot loop cannot run: a model that needs context
// checkpoints, another binding) take their count from node-llama-cpp's thread splitter before each decode,
// so the policy's count is set there as its maximum (`Llama.maxThreads`: slot-loop.ts `libraryEvaluate`).
//
// Then a lone token's count, measured. Where a pool of one thread keeps every thread for a lone sequence,
// whether one core fewer is faster depends on the model: a token of the 110 MB F32 model (7 ms) decoded
// 1.1 to 1.3 times faster with 2 threads than with 1 on 2 cores, while a token of a 17 MB Q4_K_M model
// (2 ms) decoded 1.4 to 2.1 times slower, its decodes taking 2 to 45 ms instead of 2 as the JavaScript
// thread and the client woke for each token and pushed a spinning thread off its core (docs/performance.md,
// section 37). So the lone decodes try both counts, keep the one whose recent decodes took less time on
// average (a spike is what that cost is made of, so the mean, not a quartile; less the slowest of the last
// eight, so that one alone does not decide), and try the other again now and then (LoneDecodeThreads).
//
// Last, other processes. ggml's threads wait for each other at every operation by spinning; when another
// process keeps one of the cores busy, the thread that is off the CPU holds all the others up. With a
// process busy on one of 2 cores all the time, 2 threads generated a lone answer 8 times slower than 1
// (docs/performance.md, section 10). So the count for each decode is also capped at the cores that other
// processes leave free, measured over the last quarter second from the machine's CPU times less this
// process's own (`CoreContention`).
import { readFileSync } from "node:fs";
import { availableParallelism, cpus } from "node:os";

export interface ThreadSplit {
  /** Threads for decodes of more than one token: prompt text, or several sequences' steps together. */
  batch: number;
  /** Threads for a decode of one token (a lone sequence's generation step). */
  single: number;
}

/** libuv's pool size when UV_THREADPOOL_SIZE does not set one. */
export const LIBUV_DEFAULT_POOL_THREADS = 4;

/** libuv's cap on the pool. */
const LIBUV_MAX_POOL_THREADS = 1024;

/**
 * The libuv pool's size as this process's environment sets it (libuv reads it once, at the pool's first
 * job), read as libuv reads it: C's `atoi` into an unsigned count, so a value that is set but not a number
 * ("", "0", "lots") gives one thread and a negative one wraps around to the cap (counted on Linux: "0" and
 * "lots" start one pool thread, "-3" 1024, "3x" three).
 */
export function libuvPoolThreads(env: NodeJS.ProcessEnv = process.env): number {
  const value = env.UV_THREADPOOL_SIZE;
  if (value === undefined) return LIBUV_DEFAULT_POOL_THREADS;
  const digits = /^[\t\n\v\f\r ]*([+-]?)(\d*)/.exec(value)!;
  const n = Number(digits[2] || "0");
  if (n === 0) return 1;
  return digits[1] === "-" ? LIBUV_MAX_POOL_THREADS : Math.min(n, LIBUV_MAX_POOL_THREADS);
}

/**
 * One core is left to the JavaScript thread while a lone sequence generates, when the threads would take
 * them all, the binary's threads spin (no OpenMP) and the decodes hop between pool threads (a pool of more
 * than one). A build with OpenMP (llama-server's default, or node-llama-cpp's default local build) keeps
 * its threads, whose waits end in sleep rather than spinning; so does a pool of one thread.
 */
export function splitThreads(threads: number, cores: number, openMp = false, poolThreads = LIBUV_DEFAULT_POOL_THREADS): ThreadSplit {
  const single = !openMp && poolThreads > 1 && threads >= cores && cores > 1 ? Math.max(1, cores - 1) : threads;
  return { batch: threads, single: Math.min(threads, single) };
}

/** Whether the loaded llama.cpp runs its CPU threads with OpenMP (from its system info line). */
export function usesOpenMp(systemInfo: string): boolean {
  return /OPENMP = 1/.test(systemInfo);
}

/** CPU time in milliseconds: the machine's busy time over all its cores, and this process's own. */
export interface CpuClock {
  /** Milliseconds since some fixed point. */
  now(): number;
  /** Busy (not idle) time of every core together. */
  machineBusyMs(): number;
  /** This process's CPU time, all its threads. */
  ownMs(): number;
}

/**
 * In the engine process, the server that started it (its parent) is not an "other process": its HTTP and
 * encoding work serves the same tokens. Its CPU time counts as ours where the system says it (Linux's /proc).
 */
const serverPid = process.env.SVC_ENGINE_PROCESS === "1" ? process.ppid : null;

function processCpuMs(pid: number): number {
  try {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th, in clock ticks.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) || 0) + (Number(fields[12]) || 0)) * 10;
  } catch {
    return 0;
  }
}

export const systemCpuClock: CpuClock = {
  now: () => performance.now(),
  machineBusyMs: () => cpus().reduce((sum, c) => sum + c.times.user + c.times.nice + c.times.sys + c.times.irq, 0),
  ownMs: () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000 + (serverPid !== null ? processCpuMs(serverPid) : 0);
  },
};

/**
 * How many cores other processes keep busy, measured over windows of `windowMs`: the machine's busy time
 * less this process's, divided by the window. Read when a decode starts (no timer): a reading older than
 * a window starts the next one, and the count for decodes comes from the last finished window. After an
 * idle gap longer than a few windows, the old reading no longer counts.
 */
export class CoreContention {
  private start: { at: number; machine: number; own: number } | null = null;
  /** Cores the others kept busy in the last finished window; null until one finishes. */
  private last: number | null = null;

  constructor(
    private readonly clock: CpuClock = systemCpuClock,
    private readonly windowMs = 250,
  ) {}

  /** Cores busy with other processes' work (0 when not known yet). */
  othersBusy(): number {
    const at = this.clock.now();
    // After an idle gap, what happened meanwhile says little about now.
    const idleGap = this.start !== null && at - this.start.at > 4 * this.windowMs;
    if (idleGap) this.last = null;
    if (this.start === null || idleGap) {
      this.start = { at, machine: this.clock.machineBusyMs(), own: this.clock.ownMs() };
    } else if (at - this.start.at >= this.windowMs) {
      const machine = this.clock.machineBusyMs();
      const own = this.clock.ownMs();
      const others = Math.max(0, machine - this.start.machine - (own - this.start.own)) / (at - this.start.at);
      this.last = others;
      this.start = { at, machine, own };
    }
    return this.last ?? 0;
  }

  /** `threads`, capped at the cores other processes leave (at least 1); a core counts as taken from half busy. */
  cap(threads: number, cores: number): number {
    if (threads <= 1) return threads;
    const taken = Math.round(this.othersBusy());
    return Math.max(1, Math.min(threads, cores - taken));
  }
}

/** Lone decodes measured by each count: the last this many. */
export const LONE_DECODE_WINDOW = 8;
/** Decodes each count gets, in turn, before the two are compared. */
export const LONE_DECODE_FIRST = 4;
/** The other count is tried again every this many lone decodes while the two are within LONE_DECODE_CLOSE... */
export const LONE_DECODE_EXPLORE_CLOSE = 32;
/** ...and every this many once the one chosen is at least that much (1.25 times) faster. */
export const LONE_DECODE_EXPLORE_FAR = 256;
/** How much slower (the ratio of the two means) the other count may be and still be tried every 32nd decode. */
export const LONE_DECODE_CLOSE = 1.25;

/**
 * The threads of a lone token's decode, chosen between `wanted` and one fewer by what decodes with each took
 * (the mean of the last LONE_DECODE_WINDOW less the slowest): first LONE_DECODE_FIRST of each in turn, then the faster, with
 * the other tried again every LONE_DECODE_EXPLORE_CLOSE-th decode (LONE_DECODE_EXPLORE_FAR-th when it is
 * clearly slower: a try costs that much) so that a change (a longer context, another load on the machine) is
 * seen. Pure: the loop says what each decode took (`record`).
 */
export class LoneDecodeThreads {
  private readonly ms = new Map<number, number[]>();
  /** Lone decodes since the first of each count (a job's rounds count each: `record`'s `decodes`). */
  private decodes = 0;
  /** `decodes` when the other count was last tried. */
  private tried = 0;
  readonly fewer: number;

  constructor(readonly wanted: number) {
    this.fewer = Math.max(1, wanted - 1);
  }

  /** The count for the next lone decode. */
  next(): number {
    if (this.fewer === this.wanted) return this.wanted;
    if (!this.pastFirst()) return (this.ms.get(this.wanted)?.length ?? 0) <= (this.ms.get(this.fewer)?.length ?? 0) ? this.wanted : this.fewer;
    const wantedMs = this.mean(this.wanted);
    const fewerMs = this.mean(this.fewer);
    const [best, other] = wantedMs <= fewerMs ? [this.wanted, this.fewer] : [this.fewer, this.wanted];
    const ratio = Math.max(wantedMs, fewerMs) / Math.max(Math.min(wantedMs, fewerMs), 1e-6);
    const every = ratio < LONE_DECODE_CLOSE ? LONE_DECODE_EXPLORE_CLOSE : LONE_DECODE_EXPLORE_FAR;
    if (++this.decodes - this.tried < every) return best;
    this.tried = this.decodes;
    return other;
  }

  /**
   * A lone decode with `threads` took `ms` (counts other than the two are not kept: a cap chose them); or
   * `decodes` of them in one job (a draft model's rounds, draft-rounds.cpp), `ms` each on average: one
   * measure in the window, and `decodes` decodes towards the next try of the other count. Counted as one, a
   * job's 15 rounds made the tries 15 times as rare, and a job slowed once (another thread on a core while
   * both spun) kept its count's mean high for 256 jobs: bench:spec's lone draft then ran its rounds on one
   * thread for whole answers.
   */
  record(threads: number, ms: number, decodes = 1): void {
    if ((threads !== this.wanted && threads !== this.fewer) || !(ms >= 0) || !Number.isFinite(ms)) return;
    if (decodes > 1 && this.pastFirst()) this.decodes += decodes - 1;
    const last = this.ms.get(threads) ?? [];
    last.push(ms);
    if (last.length > LONE_DECODE_WINDOW) last.shift();
    this.ms.set(threads, last);
  }

  /** Whether each count has had its first LONE_DECODE_FIRST decodes. */
  private pastFirst(): boolean {
    return (this.ms.get(this.wanted)?.length ?? 0) >= LONE_DECODE_FIRST && (this.ms.get(this.fewer)?.length ?? 0) >= LONE_DECODE_FIRST;
  }

  /**
   * The mean of a count's last decodes less the slowest one. Spikes are the cost of a count that loses its
   * cores often, and they stay in the mean from the second on; but one alone, in the few decodes of the count
   * not chosen (tried every 32nd or 256th decode), kept its mean high until the next 8 tries replaced it: one
   * job of a draft model's rounds slowed 6 times (3.1 ms a round against 0.5: another thread took a core
   * while both spun) put them on one thread for the rest of bench:spec's answers, at 0.81 ms a round where
   * two threads took 0.66 on average, spikes included.
   */
  private mean(threads: number): number {
    const last = this.ms.get(threads)!;
    const sum = last.reduce((total, ms) => total + ms, 0);
    return last.length < 3 ? sum / last.length : (sum - Math.max(...last)) / (last.length - 1);
  }
}

export interface ThreadPolicyOptions {
  /** Caps each decode's threads at the cores other processes leave free. */
  contention?: CoreContention;
  /** Logical cores of the machine (default: what Node says this process may use). */
  cores?: number;
  /** Told when the capped count changes (from, to, cores busy with other processes). */
  onCapChange?: (from: number, to: number, othersBusy: number) => void;
}

/**
 * The threads of each of the slot loop's decodes: all of them for a batch of several tokens (a prompt, a step
 * of several sequences, a token with its guesses), the single count for a lone token and for a solo run; both
 * capped at the cores other processes leave when `options.contention` is given. The loop sets the count just
 * before each decode (slot-loop.ts).
 */
export class DecodeThreads {
  private lastCap: number;
  private readonly capped: boolean;
  private readonly cores: number;
  private readonly lone: LoneDecodeThreads;

  private constructor(
    private readonly split: ThreadSplit,
    private readonly options: ThreadPolicyOptions,
  ) {
    this.capped = options.contention !== undefined && split.batch > 1;
    this.cores = options.cores ?? availableParallelism();
    this.lastCap = split.batch;
    this.lone = new LoneDecodeThreads(split.single);
  }

  /** The policy for a context, or null where every decode takes the context's own count (nothing to choose). */
  static for(split: ThreadSplit, options: ThreadPolicyOptions = {}): DecodeThreads | null {
    // One thread for everything: no count to choose, nothing to cap (the lone count is never above the batch's).
    return split.batch <= 1 ? null : new DecodeThreads(split, options);
  }

  /** The count for a decode of `tokens` tokens (a lone token's: measured, LoneDecodeThreads). */
  forBatch(tokens: number): number {
    return this.capAt(tokens > 1 ? this.split.batch : this.lone.next());
  }

  /** What a decode of `tokens` tokens with `threads` took (the loop says so after each); or `decodes` of them in one job, `ms` each. */
  decoded(tokens: number, threads: number, ms: number, decodes = 1): void {
    if (tokens === 1) this.lone.record(threads, ms, decodes);
  }

  /**
   * The count for a solo run (one token at a time, with the threads set as it starts; it lasts a few dozen
   * tokens, so the cap is read again as the next one starts).
   */
  forSolo(): number {
    return this.capAt(this.split.single);
  }

  private capAt(wanted: number): number {
    if (!this.capped) return wanted;
    const cap = this.options.contention!.cap(this.split.batch, this.cores);
    if (cap !== this.lastCap) {
      this.options.onCapChange?.(this.lastCap, cap, this.options.contention!.othersBusy());
      this.lastCap = cap;
    }
    return Math.min(wanted, cap);
  }
}
