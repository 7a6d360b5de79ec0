// How many CPU threads each llama.cpp decode gets: all of them for batches (prompt text, or several
// sequences' generation steps together), one core fewer for a lone sequence's generation step when the
// threads would take every core.
//
// Why: node-llama-cpp's prebuilt CPU binaries are built without OpenMP. Each decode with n > 1 threads
// makes a throw-away ggml thread pool (starting n - 1 threads) whose threads wait for each other at every
// operation by spinning, never sleeping. A one-token step is hundreds of such barriers in a few
// milliseconds; when another thread wants one of the cores (our JavaScript thread handling the token just
// made, or any other process), a spinning thread holds it while the one it waits for is off the CPU.
// Measured on 2 cores, 2 threads generated one stream 3 to 13 times slower than 1 (docs/performance.md).
// A prompt batch is long enough per barrier for the threads to pay off, and so, since each token's decode
// is queued ahead of its delivery (step-loop.ts), is a step of several sequences: 4 streams on 2 cores
// made 307 to 370 tokens/s with 2 threads against 267 to 283 with 1, 3 streams 312 and 340 against 223
// and 230, 2 streams about the same either way (bench:peer, alternated runs).
//
// node-llama-cpp sets one thread count per context; the count for each decode is applied here, just
// before the decode, through its context binding (the `_ctx` object its LlamaContext drives). Without that
// object (another node-llama-cpp version), nothing is changed and every decode uses the context's threads.
import type { LlamaContext } from "node-llama-cpp";

export interface ThreadSplit {
  /** Threads for decodes of more than one token: prompt text, or several sequences' steps together. */
  batch: number;
  /** Threads for a decode of one token (a lone sequence's generation step). */
  single: number;
}

/**
 * One core is left to the JavaScript thread while a lone sequence generates, when the threads would take
 * them all and the binary's thread pool spins (no OpenMP). A build with OpenMP (llama-server's default, or
 * node-llama-cpp's default local build) keeps its threads, whose waits end in sleep rather than spinning.
 */
export function splitThreads(threads: number, cores: number, openMp = false): ThreadSplit {
  const single = !openMp && threads >= cores && cores > 1 ? Math.max(1, cores - 1) : threads;
  return { batch: threads, single: Math.min(threads, single) };
}

/** Whether the loaded llama.cpp runs its CPU threads with OpenMP (from its system info line). */
export function usesOpenMp(systemInfo: string): boolean {
  return /OPENMP = 1/.test(systemInfo);
}

interface ContextBinding {
  initBatch(size: number): unknown;
  addToBatch(sequenceId: number, firstTokenIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array): unknown;
  setThreads(threads: number): unknown;
  decodeBatch(): Promise<unknown>;
}

function isBinding(value: unknown): value is ContextBinding {
  const v = value as Partial<ContextBinding> | null;
  return (
    v != null &&
    typeof v.initBatch === "function" &&
    typeof v.addToBatch === "function" &&
    typeof v.setThreads === "function" &&
    typeof v.decodeBatch === "function"
  );
}

/**
 * Applies the split to every decode of the context. Returns false (and changes nothing) when this
 * node-llama-cpp does not expose its context binding the way this relies on.
 */
export function applyThreadSplit(context: LlamaContext, split: ThreadSplit): boolean {
  if (split.batch === split.single) return true;
  const holder = context as unknown as { _ctx?: unknown };
  const binding = holder._ctx;
  if (!isBinding(binding)) return false;
  let tokensInBatch = 0;
  const overrides: Partial<ContextBinding> = {
    initBatch(size) {
      tokensInBatch = 0;
      return binding.initBatch(size);
    },
    addToBatch(sequenceId, firstTokenIndex, tokens, logitIndexes) {
      tokensInBatch += tokens.length;
      return binding.addToBatch(sequenceId, firstTokenIndex, tokens, logitIndexes);
    },
    // node-llama-cpp sets the context's count before each decode; the count for this batch is set last.
    setThreads() {
      return undefined;
    },
    decodeBatch() {
      binding.setThreads(tokensInBatch > 1 ? split.batch : split.single);
      return binding.decodeBatch();
    },
  };
  const bound = new Map<PropertyKey, unknown>();
  holder._ctx = new Proxy(binding, {
    get(target, key) {
      if (Object.prototype.hasOwnProperty.call(overrides, key)) return overrides[key as keyof ContextBinding];
      const value = Reflect.get(target, key) as unknown;
      if (typeof value !== "function") return value;
      let fn = bound.get(key);
      if (fn === undefined) bound.set(key, (fn = (value as (...args: unknown[]) => unknown).bind(target)));
      return fn;
    },
  });
  return true;
}
