// How many CPU threads each llama.cpp decode gets: all of them for prompt batches, one core fewer for
// generation steps when the threads would take every core.
//
// Why: node-llama-cpp's prebuilt CPU binaries are built without OpenMP. Each decode with n > 1 threads
// makes a throw-away ggml thread pool (starting n - 1 threads) whose threads wait for each other at every
// operation by spinning, never sleeping. A generation step is hundreds of such barriers in a few
// milliseconds; when another thread wants one of the cores (our JavaScript thread handling the token just
// made, or any other process), a spinning thread holds it while the one it waits for is off the CPU.
// Measured on 2 cores, 2 threads generated 3 to 13 times slower than 1 (docs/performance.md). A prompt
// batch is long enough per barrier for the threads to pay off.
//
// node-llama-cpp sets one thread count per context; the count for each decode is applied here, just
// before the decode, through its context binding (the `_ctx` object its LlamaContext drives). Without that
// object (another node-llama-cpp version), nothing is changed and every decode uses the context's threads.
import type { LlamaContext } from "node-llama-cpp";

export interface ThreadSplit {
  /** Threads for decodes that read prompt text (more than one token of a sequence). */
  prompt: number;
  /** Threads for generation steps (one token per sequence). */
  generation: number;
}

/**
 * One core is left to the JavaScript thread while generating, when the threads would take them all and
 * the binary's thread pool spins (no OpenMP). A build with OpenMP (llama-server's default, or a local
 * node-llama-cpp build) keeps its threads, whose waits end in sleep rather than spinning.
 */
export function splitThreads(threads: number, cores: number, openMp = false): ThreadSplit {
  const generation = !openMp && threads >= cores && cores > 1 ? Math.max(1, cores - 1) : threads;
  return { prompt: threads, generation: Math.min(threads, generation) };
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
  if (split.prompt === split.generation) return true;
  const holder = context as unknown as { _ctx?: unknown };
  const binding = holder._ctx;
  if (!isBinding(binding)) return false;
  let promptBatch = false;
  const overrides: Partial<ContextBinding> = {
    initBatch(size) {
      promptBatch = false;
      return binding.initBatch(size);
    },
    addToBatch(sequenceId, firstTokenIndex, tokens, logitIndexes) {
      if (tokens.length > 1) promptBatch = true;
      return binding.addToBatch(sequenceId, firstTokenIndex, tokens, logitIndexes);
    },
    // node-llama-cpp sets the context's count before each decode; the count for this batch is set last.
    setThreads() {
      return undefined;
    },
    decodeBatch() {
      binding.setThreads(promptBatch ? split.prompt : split.generation);
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
