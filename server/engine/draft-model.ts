// Speculation's draft model (issue 44, `--draft-model`): a small GGUF with the served model's vocabulary,
// loaded beside it with a context of its own, which guesses the next tokens of an answer by writing them
// greedily. The slot loop checks the guesses against the served model in the step that decodes the sampled
// token (slot-loop.ts `verify`), exactly as prompt lookup's: an answer is the same with or without a draft
// model; only its speed changes. Where a guess is worth a position (how far a step guesses, the back-off) is
// speculation.ts's business; this file only writes the guesses.
//
// Each sequence of the served context has a sequence of the draft context with the same id, used by one
// evaluation at a time (as the served one is), which keeps what it has read: a guess reads only the tokens
// its sequence has not (the prompt once, then the tokens kept since the last guess), after taking back those
// the served model refused.
//
// Its decodes' threads follow the served model's policy (thread-policy.ts `DecodeThreads`, an instance of its
// own with the served model's split and measure of other processes): on a CPU, capped at the cores other
// processes leave, and a lone draft's one-token decodes at the count measured faster of the lone count and one
// fewer (several drafts written together decode a token of each at once: the batch count). They go through
// node-llama-cpp's own evaluation, which sets the context's count before each decode from the Llama's thread
// splitter, so the count is set as the splitter's maximum (`Llama.maxThreads`, public): the draft context is
// the one context whose decodes take that path while a draft model is in use (the served model's all go
// through the slot loop, which sets its own). With the context's fixed count, a
// machine with one core busy elsewhere made each answer about 10 times slower than without a draft model:
// its two threads waited at every operation for the one off its core (docs/performance.md section 45).
import { withLock } from "lifecycle-utils";
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { AppError } from "../core/errors.js";
import { CoreContention, DecodeThreads, type ThreadSplit } from "./thread-policy.js";

/** A draft stops at the first token the draft model gives less than this probability (node-llama-cpp's default). */
export const DRAFT_MIN_CONFIDENCE = 0.6;

/**
 * A guess waits for the draft model to read at most this many new tokens. More (a new conversation's prompt:
 * a coding agent's is 40,000 tokens) are read in the background while the served model answers without
 * guesses, so that the draft model never holds up an answer's first tokens; guessing starts once it has read them.
 */
export const DRAFT_CATCH_UP_TOKENS = 256;

/** What the slot loop asks of a draft model (a fake in unit tests). */
export interface DraftSource {
  /**
   * Up to `max` tokens the draft model writes after `tokens` (the served sequence's tokens and the one just
   * sampled), for the served sequence `sequenceId`; fewer where it is unsure, none where it cannot.
   */
  draft(sequenceId: number, tokens: readonly Token[], max: number): Promise<Token[]>;
}

export interface DraftModelOptions {
  llama: Llama;
  modelPath: string;
  /** The served model and context: the draft's vocabulary must be theirs, and it has as many sequences. */
  target: { model: LlamaModel; context: LlamaContext };
  threads: number;
  gpuLayers?: number;
  /** A draft stops at the first token the draft model gives less than this; default DRAFT_MIN_CONFIDENCE. */
  minConfidence?: number;
  /** The served model's split of `threads` (thread-policy.ts splitThreads); default all of them for both. */
  split?: ThreadSplit;
  /** What measures other processes' load on the cores (the served model's; a fake in tests); default a new one. */
  contention?: CoreContention;
  /** Logical cores of the machine (default: what Node says this process may use). */
  cores?: number;
}

export class DraftModel implements DraftSource {
  private readonly sequences = new Map<number, LlamaContextSequence>();
  /** Sequences reading a long prompt in the background (see DRAFT_CATCH_UP_TOKENS). */
  private readonly catchingUp = new Set<LlamaContextSequence>();
  private closed = false;
  /** Drafts being written now (a one-token decode's time is measured only where one is alone). */
  private writing = 0;

  private constructor(
    readonly name: string,
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly minConfidence: number,
    /** On a CPU with more than one thread: the count of each decode (null: the context's own). */
    private readonly threads: DecodeThreads | null,
    /** The splitter's maximum before the draft model set it, put back at close. */
    private readonly maxThreadsBefore: number,
  ) {}

  /** Loads the draft model and its context; throws AppError when it cannot serve as the target's draft. */
  static async load(options: DraftModelOptions): Promise<DraftModel> {
    const { llama, modelPath, target } = options;
    let model: LlamaModel;
    try {
      model = await llama.loadModel({ modelPath, ...(options.gpuLayers !== undefined ? { gpuLayers: options.gpuLayers } : {}) });
    } catch (err) {
      throw new AppError("unavailable", `Could not load the draft model ${modelPath}: ${(err as Error).message}`, { code: "draft_model_load_failed" });
    }
    try {
      const mismatch = vocabularyMismatch(model, target.model);
      if (mismatch)
        throw new AppError("unavailable", `The draft model ${modelPath} cannot guess for this model: ${mismatch}. A draft model needs the served model's vocabulary (the same family).`, {
          code: "draft_model_incompatible",
        });
      // As long as the served context where the memory left holds it (a shorter one stops guessing past its end).
      const size = target.context.contextSize;
      const context = await model.createContext({ contextSize: { min: Math.min(2048, size), max: size }, sequences: target.context.totalSequences, threads: options.threads });
      try {
        // llama.cpp's own check (vocabulary type, special tokens, token texts).
        (target.context as unknown as { _ctx: { ensureDraftContextIsCompatibleForSpeculative(c: unknown): void } })._ctx.ensureDraftContextIsCompatibleForSpeculative(
          (context as unknown as { _ctx: unknown })._ctx,
        );
      } catch (err) {
        await context.dispose();
        throw new AppError("unavailable", `The draft model ${modelPath} cannot guess for this model: ${(err as Error).message}`, { code: "draft_model_incompatible" });
      }
      const name = model.fileInfo.metadata?.general?.name ?? modelPath.split(/[\\/]/).pop()!;
      const onCpu = llama.gpu === false || model.gpuLayers <= 0;
      const threads = onCpu
        ? DecodeThreads.for(options.split ?? { batch: options.threads, single: options.threads }, { contention: options.contention ?? new CoreContention(), cores: options.cores })
        : null;
      return new DraftModel(name, llama, model, context, options.minConfidence ?? DRAFT_MIN_CONFIDENCE, threads, llama.maxThreads);
    } catch (err) {
      await model.dispose().catch(() => undefined);
      throw err;
    }
  }

  async draft(sequenceId: number, tokens: readonly Token[], max: number): Promise<Token[]> {
    if (this.closed || max <= 0 || tokens.length === 0 || tokens.length + max > this.context.contextSize - 1) return [];
    const sequence = this.sequenceFor(sequenceId);
    if (!sequence || this.catchingUp.has(sequence)) return [];
    return withLock([sequence, "draft"], async () => {
      if (this.closed) return [];
      // What the sequence read before that these tokens still begin with; at least the last one is read again,
      // since its logits give the first guess.
      const had = sequence.contextTokens;
      let common = 0;
      while (common < had.length && common < tokens.length - 1 && had[common] === tokens[common]) common++;
      if (common < sequence.nextTokenIndex) await sequence.eraseContextTokenRanges([{ start: common, end: sequence.nextTokenIndex }]);
      if (tokens.length - 1 - common > DRAFT_CATCH_UP_TOKENS) {
        this.catchUp(sequence, tokens.slice(common, -1) as Token[]);
        return [];
      }
      const guesses: Token[] = [];
      // The first decode reads what is new (a batch); the next ones a token each, batched by node-llama-cpp
      // with the other drafts being written (a step of several sequences asks for theirs together).
      this.useThreads(tokens.length - common);
      let threads: number | null = null;
      this.writing++;
      const written = sequence.evaluateWithMetadata(tokens.slice(common) as Token[], { confidence: true }, { temperature: 0 });
      // The one-token decodes' time: from the first guess to the last.
      let firstAt = 0;
      let alone = this.writing === 1;
      try {
        for await (const { token, confidence } of written) {
          if (guesses.length === 0) {
            threads = this.useThreads(this.writing);
            firstAt = performance.now();
          }
          alone &&= this.writing === 1;
          if (confidence < this.minConfidence) break;
          guesses.push(token);
          if (guesses.length >= max || this.model.isEogToken(token)) break;
        }
      } finally {
        this.writing--;
        await written.return(undefined);
      }
      if (threads !== null && alone && guesses.length > 1) this.threads!.decoded(1, threads, (performance.now() - firstAt) / (guesses.length - 1));
      return guesses;
    });
  }

  /** Sets the threads of the next decodes of `tokens` tokens each (null where the context's own count holds). */
  private useThreads(tokens: number): number | null {
    if (!this.threads) return null;
    const threads = this.threads.forBatch(tokens);
    this.llama.maxThreads = threads;
    return threads;
  }

  /** Reads `tokens` into the sequence in the background; guesses for it wait until it is done (draft returns none). */
  private catchUp(sequence: LlamaContextSequence, tokens: Token[]): void {
    this.catchingUp.add(sequence);
    void withLock([sequence, "draft"], async () => {
      if (this.closed) return;
      this.useThreads(tokens.length);
      await sequence.evaluateWithoutGeneratingNewTokens(tokens);
    })
      .catch(() => undefined)
      .finally(() => this.catchingUp.delete(sequence));
  }

  private sequenceFor(sequenceId: number): LlamaContextSequence | null {
    let sequence = this.sequences.get(sequenceId);
    if (!sequence) {
      if (this.context.sequencesLeft === 0) return null;
      sequence = this.context.getSequence();
      this.sequences.set(sequenceId, sequence);
    }
    return sequence;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.sequences.values()].map((s) => withLock([s, "draft"], async () => undefined)));
    await this.context.dispose();
    await this.model.dispose();
    if (this.threads) this.llama.maxThreads = this.maxThreadsBefore;
  }
}

/** Why `draft` cannot write tokens for `target` (a different vocabulary), or null. */
function vocabularyMismatch(draft: LlamaModel, target: LlamaModel): string | null {
  const size = (m: LlamaModel) => (m.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: readonly string[] } } }).tokenizer?.ggml?.tokens?.length;
  const [a, b] = [size(draft), size(target)];
  if (a !== undefined && b !== undefined && a !== b) return `its vocabulary has ${a} tokens, this model's ${b}`;
  const sample = "The quick brown fox: `const x = 42;`";
  const [ta, tb] = [draft.tokenize(sample, false), target.tokenize(sample, false)];
  if (ta.length !== tb.length || ta.some((t, i) => t !== tb[i])) return "it splits text into different tokens";
  return null;
}
