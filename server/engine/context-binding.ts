// The calls the engine makes on node-llama-cpp's native bindings, in one place: a context's binding
// (node-llama-cpp's private `_ctx`: its own calls, and those `svc engine build`'s addon adds, present only in that
// build's binaries) and its samplers. The slot loop (slot-loop.ts) drives the served model's context through
// them, a draft model (draft-model.ts) its own context.
import type { LlamaModel } from "node-llama-cpp";

/** A context's native binding (node-llama-cpp's `_ctx`). */
export interface Binding {
  initBatch(size: number): void;
  addToBatch(sequenceId: number, firstTokenIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array;
  decodeBatch(): Promise<void>;
  /** The threads of the decodes from now on (DecodeThreads chooses them, thread-policy.ts). */
  setThreads(threads: number): void;
  /** Removes the sequence's cells in [start, end) from the KV cache (false where the cache cannot). */
  removeTokenCellsFromSequence(sequenceId: number, start: number, end: number): boolean;
  /** With probabilities or confidence asked for: [token, [token, probability, ...]?, confidence?]. */
  sampleToken(batchLogitIndex: number, sampler: unknown, probabilities?: boolean, confidence?: boolean): Promise<number | [number, number[]?, number?]>;
  /** Only in `svc engine build`'s binaries (resources/engine-native/solo-loop.cpp); see slot-loop.ts `solo`. */
  runSolo?(
    sequenceId: number,
    position: number,
    feed: Uint32Array,
    sampler: unknown,
    maxPosition: number,
    maxSamples: number,
    askWaitMs: number,
    allowFirst: number,
    callback: (tokens: number[] | -1, decoded?: number, error?: string) => void,
    ahead: number,
    deliverMs: number,
  ): void;
  soloAsk?(asked: number, allow: number): void;
  soloStop?(): void;
  /**
   * Only in `svc engine build`'s binaries (resources/engine-native/step-sampling.cpp): decodeBatch, then
   * each listed logit sampled with its sampler in the same job; -1 where sampling failed. See slot-loop.ts `dispatch`.
   */
  decodeBatchAndSample?(logitIndexes: Uint32Array, samplers: unknown[]): Promise<number[]>;
  /**
   * Only in `svc engine build`'s binaries (resources/engine-native/draft-rounds.cpp): every round of these
   * drafts in one job, each next token the most likely one, by draft-model.ts `round`'s rules. Per draft: the tokens its
   * sequence read (its feed, then the guesses decoded after it), then its guesses; on the array, the rounds
   * after the first and what they took (DraftRounds). Threads 0: the context's.
   */
  draftRounds?(
    sequenceIds: Uint32Array,
    positions: Uint32Array,
    feed: Uint32Array,
    feedLengths: Uint32Array,
    maxGuesses: Uint32Array,
    minConfidence: number,
    firstThreads: number,
    nextThreads: number,
  ): Promise<DraftRounds>;
}

/**
 * What draftRounds wrote: per draft, what its sequence read, then its guesses; and the rounds after the first
 * (a token of each draft still being written) with their milliseconds, decodes and choices.
 */
export type DraftRounds = number[][] & { laterRounds: number; laterMs: number };

/** A native sampler (node-llama-cpp's AddonSampler): settings applied before a sampling. */
export interface Sampler {
  applyConfig(config: unknown): void;
  dispose(): void;
}

/** A new native sampler for this model's vocabulary (node-llama-cpp makes one per evaluation the same way). */
export function newSampler(model: LlamaModel): Sampler {
  const internals = model as unknown as { _llama: { _bindings: { AddonSampler: new (model: unknown) => Sampler } }; _model: unknown };
  return new internals._llama._bindings.AddonSampler(internals._model);
}
