// Generation steps of plain text, decoded and sampled by us on node-llama-cpp's binding.
//
// node-llama-cpp's `sequence.evaluate` spends 350 to 400 µs of JavaScript per token between the decode and
// the sampling and back (its generator, batch queue, locks and sampler set-up), on top of the two trips
// through the libuv pool each token needs anyway. Driven directly, the same binding generated 6 to 9%
// faster for one sequence and, with the sequences of a step in one batch and their samplings in parallel,
// 307 to 326 tokens/s for four (node-llama-cpp's path: 246 to 268; llama-server: 300 to 322).
// docs/performance.md has the measurements.
//
// A prompt (or any feed longer than a few tokens) is read by node-llama-cpp, which splits it into batches
// and frees space by context shift, all but its last token, which is decoded here with the first step.
// Phases with a grammar or token probabilities, models that need context checkpoints and a sequence near
// the end of its context stay on `evaluate` altogether.
//
// What this relies on in node-llama-cpp 3.22 (not public API; `available` checks the shapes, and without
// them everything stays on `evaluate`): the context's binding (`_ctx`: initBatch, addToBatch, decodeBatch,
// sampleToken), its sampler class (`_llama._bindings.AddonSampler`), the sequence's id, next position and
// token record (`_sequenceId`, `_nextTokenIndex`, `_contextTokens`, updated here exactly as its own decode
// does), its sampler settings (`_resolveSamplerConfig`), and the context lock its own batches hold
// (lifecycle-utils `withLock([context, "context"])`), so that our batches and its own never interleave.
import { createRequire } from "node:module";
import { withLock } from "lifecycle-utils";
import type { LlamaContext, LlamaContextSequence, LlamaModel, SequenceEvaluateOptions, Token } from "node-llama-cpp";

/**
 * The context lock is lifecycle-utils' `withLock` on the context: shared with node-llama-cpp only if both
 * load the same copy of lifecycle-utils. Were node-llama-cpp to get a copy of its own, the two would decode
 * at once on one context; the loop stays off instead.
 */
function sharesLockModule(): boolean {
  try {
    const here = createRequire(import.meta.url);
    return here.resolve("lifecycle-utils") === createRequire(here.resolve("node-llama-cpp")).resolve("lifecycle-utils");
  } catch {
    return false;
  }
}
const SHARED_LOCKS = sharesLockModule();

/** Feeds up to this long are decoded here; longer ones (prompts) go through `sequence.evaluate`. */
export const MAX_STEP_FEED = 8;

interface Binding {
  initBatch(size: number): void;
  addToBatch(sequenceId: number, firstTokenIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array;
  decodeBatch(): Promise<void>;
  sampleToken(batchLogitIndex: number, sampler: unknown): Promise<number>;
}
interface Sampler {
  applyConfig(config: unknown): void;
  dispose(): void;
}
interface SequenceInternals {
  _sequenceId: number;
  _nextTokenIndex: number;
  _contextTokens: Token[];
  _loadedTokenPredictions?: unknown[];
  needsCheckpoints?: boolean;
  _resolveSamplerConfig(options: SequenceEvaluateOptions): unknown;
}

interface Step {
  sequence: SequenceInternals;
  sampler: Sampler;
  feed: Token[];
  options: SequenceEvaluateOptions;
  resolve(token: Token): void;
  reject(err: unknown): void;
}

export interface SampledStep {
  token: Token;
}

export class StepLoop {
  private pending: Step[] = [];
  private scheduled = false;
  private running = false;

  /**
   * @param schedule when to send the queued steps as one batch (the decode round's: at once when one
   *   sequence generates, after the current cascade of promise jobs when several do).
   */
  constructor(
    private readonly context: LlamaContext,
    private readonly model: LlamaModel,
    private readonly schedule: (dispatch: () => void) => void,
  ) {}

  /** Whether this node-llama-cpp has the shapes the loop relies on. */
  get available(): boolean {
    const binding = (this.context as unknown as { _ctx?: Partial<Binding> })._ctx;
    const sampler = (this.model as unknown as { _llama?: { _bindings?: { AddonSampler?: unknown } } })._llama?._bindings?.AddonSampler;
    return (
      SHARED_LOCKS &&
      typeof binding?.initBatch === "function" &&
      typeof binding.addToBatch === "function" &&
      typeof binding.decodeBatch === "function" &&
      typeof binding.sampleToken === "function" &&
      typeof sampler === "function"
    );
  }

  /** Whether a sequence's evaluation with these options can take its steps here. */
  qualifies(sequence: LlamaContextSequence, metadata: object, options: SequenceEvaluateOptions): boolean {
    const s = sequence as unknown as Partial<SequenceInternals>;
    return (
      this.available &&
      options.grammarEvaluationState == null &&
      Object.values(metadata).every((v) => !v) &&
      typeof s._sequenceId === "number" &&
      typeof s._nextTokenIndex === "number" &&
      Array.isArray(s._contextTokens) &&
      typeof s._resolveSamplerConfig === "function" &&
      (s._loadedTokenPredictions?.length ?? 0) === 0 &&
      !s.needsCheckpoints
    );
  }

  /**
   * Like `sequence.evaluateWithMetadata(tokens, {}, options)` with `yieldEogToken`: yields each sampled
   * token, end-of-generation tokens included; the caller stops pulling when it is done.
   */
  async *evaluate(sequence: LlamaContextSequence, tokens: Token[], options: SequenceEvaluateOptions): AsyncGenerator<SampledStep, void, unknown> {
    let feed = tokens;
    if (feed.length > MAX_STEP_FEED) {
      // The prompt: node-llama-cpp batches it and shifts the context if it must; its last token is decoded
      // here, so that every token of the evaluation comes from this one sampler. A seed then gives the same
      // answer whether the prompt was read fresh or mostly from the cache (one random stream, not two).
      await sequence.evaluateWithoutGeneratingNewTokens(feed.slice(0, -1));
      feed = feed.slice(-1);
    }
    const internals = sequence as unknown as SequenceInternals;
    const Sampler = (this.model as unknown as { _llama: { _bindings: { AddonSampler: new (model: unknown) => Sampler } } })._llama._bindings.AddonSampler;
    const sampler = new Sampler((this.model as unknown as { _model: unknown })._model);
    try {
      while (true) {
        if (internals._nextTokenIndex + feed.length >= this.context.contextSize - 1) {
          // Near the end of the context: node-llama-cpp's context shift takes over.
          yield* sequence.evaluateWithMetadata(feed, {}, { ...options, yieldEogToken: true }) as AsyncGenerator<SampledStep, void, unknown>;
          return;
        }
        const token = await this.step(internals, sampler, feed, options);
        yield { token };
        feed = [token];
      }
    } finally {
      sampler.dispose();
    }
  }

  private step(sequence: SequenceInternals, sampler: Sampler, feed: Token[], options: SequenceEvaluateOptions): Promise<Token> {
    return new Promise<Token>((resolve, reject) => {
      this.pending.push({ sequence, sampler, feed, options, resolve, reject });
      this.kick();
    });
  }

  /** One batch at a time; steps asked for meanwhile go in the next one, sent when this one is done. */
  private kick(): void {
    if (this.scheduled || this.running) return;
    this.scheduled = true;
    this.schedule(() => {
      this.scheduled = false;
      void this.dispatch();
    });
  }

  private async dispatch(): Promise<void> {
    this.running = true;
    let steps: Step[] = [];
    try {
      await withLock([this.context, "context"], async () => {
        // Taken once the context is ours: steps asked for while node-llama-cpp's own batch ran join this one.
        steps = this.pending.splice(0).sort((a, b) => a.sequence._sequenceId - b.sequence._sequenceId);
        if (steps.length === 0) return;
        const binding = (this.context as unknown as { _ctx: Binding })._ctx;
        binding.initBatch(steps.reduce((n, s) => n + s.feed.length, 0));
        // In ascending sequence order: llama.cpp decodes consecutive ids in one micro-batch (batch-order.ts).
        const logitIndexes = steps.map((s) => binding.addToBatch(s.sequence._sequenceId, s.sequence._nextTokenIndex, Uint32Array.from(s.feed), Uint32Array.of(s.feed.length - 1))[0]!);
        await binding.decodeBatch();
        for (const s of steps) {
          // What node-llama-cpp's own decode records for the sequence (its cache reuse reads these).
          s.sequence._nextTokenIndex += s.feed.length;
          s.sequence._contextTokens.push(...s.feed);
        }
        const tokens = await Promise.all(
          steps.map((s, i) => {
            s.sampler.applyConfig(s.sequence._resolveSamplerConfig(s.options));
            return binding.sampleToken(logitIndexes[i]!, s.sampler);
          }),
        );
        steps.forEach((s, i) => {
          const token = tokens[i]!;
          if (token === -1) s.reject(new Error("llama.cpp could not sample the next token."));
          else s.resolve(token as Token);
        });
      });
    } catch (err) {
      for (const s of steps) s.reject(err);
    } finally {
      this.running = false;
      if (this.pending.length > 0) this.kick();
    }
  }
}
