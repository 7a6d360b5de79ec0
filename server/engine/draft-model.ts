// Why one file (over 400 lines): it is one draft model's state, its sequences and what each holds, the drafts
// being written and the rounds that write them (in JavaScript, or in one job of the engine build's addon), and
// the long prompts read between rounds; each part reads and changes what the others keep.
// Speculation's draft model (issue 44, `--draft-model`): a small GGUF with the served model's vocabulary,
// loaded beside it with a context of its own, which guesses the next tokens of an answer by writing them
// greedily. The slot loop checks the guesses against the served model in the step that decodes the sampled
// token (slot-loop.ts `verify`), exactly as prompt lookup's: an answer is the same with or without a draft
// model; only its speed changes. Where a guess is worth a position (how far a step guesses, the back-off) is
// speculation.ts's business; this file only writes the guesses.
//
// Each sequence of the served context has a sequence of the draft context, which keeps what it has read: a
// guess reads only the tokens its sequence has not (the prompt once, then the tokens kept since the last
// guess), after taking back those the served model refused.
//
// The drafts are written in rounds, as the slot loop writes answers: each round is one decode of the draft
// context holding every draft being written (what each has not read yet, or its last guess), then a greedy
// sampling of each. A step of four sequences asks for four drafts at once, and each of their 16 positions
// costs one decode of four tokens, which on a CPU costs little more than one (the 28 MB draft of bench:spec:
// 0.57 ms for one token, 0.99 for four, threads 2). They used to go through node-llama-cpp's own evaluation,
// one generator per draft with JavaScript and a trip through its batch queue between tokens: 2.3 to 6 ms a
// position for four drafts, more than half of each step of four streams, which then ran below speculation
// off (docs/performance.md section 46). A long prompt (DRAFT_CATCH_UP_TOKENS) is read in chunks between
// rounds, when no draft is being written.
//
// The rounds' decodes set their threads as the slot loop's do, from the served model's policy
// (thread-policy.ts `DecodeThreads`, an instance of its own with the served model's split and measure of other
// processes): on a CPU, capped at the cores other processes leave, and a lone draft's one-token decodes at the
// count measured faster of the lone count and one fewer. With the context's fixed count, a machine with one
// core busy elsewhere made each answer about 10 times slower than without a draft model: its two threads
// waited at every operation for the one off its core (docs/performance.md section 45).
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { AppError } from "../core/errors.js";
import { newSampler, type Binding, type DraftRounds, type Sampler } from "./context-binding.js";
import { CoreContention, DecodeThreads, type ThreadSplit } from "./thread-policy.js";

/** A draft stops at the first token the draft model gives less than this probability (node-llama-cpp's default). */
export const DRAFT_MIN_CONFIDENCE = 0.6;

/**
 * A guess waits for the draft model to read at most this many new tokens. More (a new conversation's prompt:
 * a coding agent's is 40,000 tokens) are read in the background while the served model answers without
 * guesses, so that the draft model never holds up an answer's first tokens; guessing starts once it has read them.
 */
export const DRAFT_CATCH_UP_TOKENS = 256;

/**
 * What one of a lone draft's one-token rounds took in a job (draftRounds), for the thread policy's choice of a
 * lone decode's count: the job's own measure of its rounds after the first; null with several drafts (their
 * rounds are batches) or no such round. Not the job's time over its guesses: the first round reads what the
 * sequence has not (17 tokens after a step that kept 16 guesses), and a draft cut at its first guesses counted
 * that read as one lone decode. With two threads tried against one, the count that drew such jobs looked
 * slower: bench:spec's lone draft ran its rounds on one thread (0.86 ms a round against 0.67 on two).
 */
export function loneRoundMs(written: DraftRounds, drafts: number): number | null {
  return drafts === 1 && written.laterRounds > 0 ? written.laterMs / written.laterRounds : null;
}

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
  /**
   * A round's samplings queued behind its decode (slot-loop.ts `samplingsQueue`: libuv's one pool thread runs
   * them in order), one trip through the pool a round instead of two; default off.
   */
  queuedSamplings?: boolean;
}

/** A sequence of the draft context: its id there, what its cells hold, and its greedy sampler. */
interface DraftSequence {
  /**
   * node-llama-cpp's, held for as long as the draft model: once it is garbage-collected, node-llama-cpp gives its
   * id back and empties its cells, under what `held` says they hold (every guess after the next collection was
   * then written from an empty sequence, and nearly all refused).
   */
  claimed: LlamaContextSequence;
  id: number;
  /** The tokens its cells hold, from position 0. */
  held: Token[];
  sampler: Sampler;
  /** A draft being written for it (one at a time, as the served sequence has one evaluation at a time). */
  writing: Writing | null;
  /** What it has yet to read of a long prompt (DRAFT_CATCH_UP_TOKENS); guesses for it wait until it has. */
  catchUp: Token[];
}

/** One draft being written: what it reads next round, and the guesses so far. */
interface Writing {
  sequence: DraftSequence;
  /** Decoded next round: what the sequence has not read yet, then each guess. */
  feed: Token[];
  guesses: Token[];
  max: number;
  done(guesses: Token[]): void;
}

export class DraftModel implements DraftSource {
  private readonly sequences = new Map<number, DraftSequence>();
  /** The drafts being written: each round decodes a token (or what is new) of each. */
  private writings: Writing[] = [];
  /** The rounds running (null: idle). */
  private rounds: Promise<void> | null = null;
  private closed = false;

  private constructor(
    readonly name: string,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly minConfidence: number,
    /** On a CPU with more than one thread: the count of each decode (null: the context's own). */
    private readonly threads: DecodeThreads | null,
    private readonly queuedSamplings: boolean,
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
      return new DraftModel(name, model, context, options.minConfidence ?? DRAFT_MIN_CONFIDENCE, threads, options.queuedSamplings ?? false);
    } catch (err) {
      await model.dispose().catch(() => undefined);
      throw err;
    }
  }

  async draft(sequenceId: number, tokens: readonly Token[], max: number): Promise<Token[]> {
    if (this.closed || max <= 0 || tokens.length === 0 || tokens.length + max > this.context.contextSize - 1) return [];
    const sequence = this.sequenceFor(sequenceId);
    if (!sequence || sequence.writing || sequence.catchUp.length > 0) return [];
    // What the sequence read before that these tokens still begin with; at least the last one is read again,
    // since its logits give the first guess.
    const held = sequence.held;
    let common = 0;
    while (common < held.length && common < tokens.length - 1 && held[common] === tokens[common]) common++;
    if (!this.forget(sequence, common)) return [];
    if (tokens.length - 1 - sequence.held.length > DRAFT_CATCH_UP_TOKENS) {
      sequence.catchUp = tokens.slice(sequence.held.length, -1) as Token[];
      this.run();
      return [];
    }
    return new Promise<Token[]>((resolve) => {
      const writing: Writing = {
        sequence,
        feed: tokens.slice(sequence.held.length) as Token[],
        guesses: [],
        max,
        done: (guesses) => {
          sequence.writing = null;
          resolve(guesses);
        },
      };
      sequence.writing = writing;
      this.writings.push(writing);
      this.run();
    });
  }

  /** Takes the sequence's cells from `from` on out of the cache (all of them where the cache cannot take part). */
  private forget(sequence: DraftSequence, from: number): boolean {
    if (from >= sequence.held.length) return true;
    const binding = this.binding();
    if (!binding.removeTokenCellsFromSequence(sequence.id, from, sequence.held.length)) {
      if (!binding.removeTokenCellsFromSequence(sequence.id, 0, sequence.held.length)) return false;
      from = 0;
    }
    sequence.held.length = from;
    return true;
  }

  /** Starts the rounds unless they run: after the current turn, so that the drafts asked for in it go together. */
  private run(): void {
    this.rounds ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.loop());
  }

  /** The rounds, until nothing is left to write or read; `rounds` is cleared in the turn that finds nothing left. */
  private async loop(): Promise<void> {
    try {
      for (;;) {
        if (this.closed) {
          for (const w of this.writings.splice(0)) w.done([]);
          break;
        }
        if (this.writings.length > 0) {
          if (!(await this.nativeRounds())) await this.round();
        }
        else {
          const behind = [...this.sequences.values()].find((s) => s.catchUp.length > 0);
          if (!behind) break;
          await this.readChunk(behind);
        }
      }
    } finally {
      // Here, not in a later turn: a draft asked for in between would find the rounds still running and wait forever.
      this.rounds = null;
    }
  }

  /**
   * One round: a decode holding every draft being written (what it has not read, as much as the batch holds, or
   * its last guess), then a greedy sampling of each whose feed is read; each ends at its first unsure token, an
   * end of generation, or its `max`.
   */
  private async round(): Promise<void> {
    let room = this.context.batchSize;
    const entries: Array<{ writing: Writing; tokens: Token[]; last: boolean }> = [];
    for (const writing of [...this.writings].sort((a, b) => a.sequence.id - b.sequence.id)) {
      const take = Math.min(writing.feed.length, room);
      if (take === 0) continue;
      room -= take;
      entries.push({ writing, tokens: writing.feed.slice(0, take), last: take === writing.feed.length });
    }
    const binding = this.binding();
    const sample = (logits: Uint32Array[], i: number) => binding.sampleToken(logits[i]![0]!, entries[i]!.writing.sequence.sampler, false, true).catch(() => -1 as const);
    // Queued behind the decode, where the pool runs jobs in order: its samplings start as it ends, with no
    // trip through JavaScript between (docs/performance.md section 49).
    const decoded = await this.decode(
      entries.map((e) => ({ sequence: e.writing.sequence, tokens: e.tokens, logit: e.last })),
      this.queuedSamplings ? (logits) => entries.map((e, i) => (e.last ? sample(logits, i) : null)) : undefined,
    );
    if (decoded === null) {
      for (const { writing } of entries) this.finish(writing);
      return;
    }
    const { logits, queued } = decoded;
    for (const e of entries) e.writing.feed = e.writing.feed.slice(e.tokens.length);
    const samples = await Promise.all(
      entries.map(async ({ writing, last }, i) => {
        if (!last) return null;
        const sampled = await (queued?.[i] ?? sample(logits, i));
        const [token, confidence] = Array.isArray(sampled) ? [sampled[0], sampled[2] ?? 1] : [sampled, 1];
        const ends = token < 0 || writing.guesses.length + 1 >= writing.max || this.model.isEogToken(token as Token);
        return { writing, token: token as Token, sure: confidence >= this.minConfidence, ends };
      }),
    );
    // A draft ends at the first token the draft model is unsure of, unless a draft written beside it goes on
    // for sure: then it goes on too, as long as one does. Its guesses then fill the positions of the step's
    // pass that the longer draft makes anyway (with one KV cache per sequence, llama.cpp decodes a step in
    // passes of as many tokens of each sequence, step-costs.ts microBatches): ended there, the step would have
    // been two passes, or its price would have cut every draft to the shortest (docs/performance.md section 46).
    const goesOn = samples.some((x) => x !== null && x.sure && !x.ends);
    for (const x of samples) {
      if (x === null) continue;
      if (x.token < 0 || (!x.sure && !goesOn)) {
        this.finish(x.writing);
        continue;
      }
      x.writing.guesses.push(x.token);
      if (x.ends) this.finish(x.writing);
      else x.writing.feed = [x.token];
    }
  }

  /**
   * With `svc engine build`'s binaries: every round of the drafts being written, all new (none has a guess
   * yet) and read in one batch, in one job (draftRounds); false where it cannot (the prebuilt binaries, or
   * drafts that `round` has started). A draft asked for meanwhile waits for the job. Its decodes take the
   * policy's batch count for the first round and the count of a round of as many tokens as drafts for the
   * others; a lone draft's rounds after its first count as lone decodes of their mean time (loneRoundMs), as
   * many as they are towards the policy's next try of the other count.
   */
  private async nativeRounds(): Promise<boolean> {
    const binding = this.binding();
    const writings = [...this.writings].sort((a, b) => a.sequence.id - b.sequence.id);
    const size = writings.reduce((n, w) => n + w.feed.length, 0);
    if (!binding.draftRounds || writings.some((w) => w.guesses.length > 0) || size > this.context.batchSize) return false;
    const first = this.threads?.forBatch(size) ?? 0;
    const next = this.threads?.forBatch(writings.length) ?? 0;
    let written: DraftRounds;
    try {
      written = await binding.draftRounds(
        Uint32Array.from(writings, (w) => w.sequence.id),
        Uint32Array.from(writings, (w) => w.sequence.held.length),
        Uint32Array.from(writings.flatMap((w) => w.feed)),
        Uint32Array.from(writings, (w) => w.feed.length),
        Uint32Array.from(writings, (w) => w.max),
        this.minConfidence,
        first,
        next,
      );
    } catch {
      for (const w of writings) {
        this.empty(w.sequence, w.sequence.held.length + w.feed.length + w.max);
        this.finish(w);
      }
      return true;
    }
    writings.forEach((w, i) => {
      const [read = 0, ...guesses] = written[i] ?? [];
      w.sequence.held.push(...([...w.feed, ...guesses] as Token[]).slice(0, read));
      w.feed = [];
      w.guesses = guesses as Token[];
      this.finish(w);
    });
    const lone = loneRoundMs(written, writings.length);
    if (this.threads && lone !== null) this.threads.decoded(1, next, lone, written.laterRounds);
    return true;
  }

  /** Reads a chunk of a long prompt (no logits): between rounds, when no draft is being written. */
  private async readChunk(sequence: DraftSequence): Promise<void> {
    const tokens = sequence.catchUp.slice(0, Math.min(DRAFT_CATCH_UP_TOKENS, this.context.batchSize));
    const ok = (await this.decode([{ sequence, tokens, logit: false }])) !== null;
    if (ok) sequence.catchUp = sequence.catchUp.slice(tokens.length);
  }

  /**
   * Decodes each part's tokens at its sequence's next positions, with the logits of its last token where
   * `logit`; returns each part's logit indexes, or null where the decode failed (the parts' sequences are then
   * emptied, to be read again from the start).
   */
  private async decode<T>(
    parts: Array<{ sequence: DraftSequence; tokens: Token[]; logit: boolean }>,
    /** Jobs to queue right behind the decode (its samplings), given the parts' logit indexes. */
    queue?: (logits: Uint32Array[]) => T[],
  ): Promise<{ logits: Uint32Array[]; queued: T[] | undefined } | null> {
    const binding = this.binding();
    const size = parts.reduce((n, p) => n + p.tokens.length, 0);
    let queued: T[] | undefined;
    try {
      binding.initBatch(size);
      const logits = parts.map((p) =>
        binding.addToBatch(p.sequence.id, p.sequence.held.length, Uint32Array.from(p.tokens), p.logit ? Uint32Array.of(p.tokens.length - 1) : new Uint32Array(0)),
      );
      const threads = this.threads?.forBatch(size);
      if (threads !== undefined) binding.setThreads(threads);
      const started = performance.now();
      const decoding = binding.decodeBatch();
      queued = queue?.(logits);
      await decoding;
      if (threads !== undefined) this.threads!.decoded(size, threads, performance.now() - started);
      for (const p of parts) p.sequence.held.push(...p.tokens);
      return { logits, queued };
    } catch {
      // What was queued behind a failed decode ends before its sequences are emptied.
      if (queued) await Promise.allSettled(queued);
      for (const p of parts) this.empty(p.sequence, p.sequence.held.length + p.tokens.length);
      return null;
    }
  }

  /**
   * After a failed decode (what it wrote before it failed is unknown): the sequence's cells up to `end` out of
   * the cache, nothing held and nothing left to read, so that its next draft reads it again from the start.
   */
  private empty(sequence: DraftSequence, end: number): void {
    this.binding().removeTokenCellsFromSequence(sequence.id, 0, end);
    sequence.held.length = 0;
    sequence.catchUp = [];
  }

  private finish(writing: Writing): void {
    this.writings = this.writings.filter((w) => w !== writing);
    writing.done(writing.guesses);
  }

  private binding(): Binding {
    return (this.context as unknown as { _ctx: Binding })._ctx;
  }

  private sequenceFor(sequenceId: number): DraftSequence | null {
    let sequence = this.sequences.get(sequenceId);
    if (!sequence) {
      if (this.context.sequencesLeft === 0) return null;
      const claimed = this.context.getSequence() as unknown as LlamaContextSequence & {
        _sequenceId: number;
        _resolveSamplerConfig(options: { temperature: number }): unknown;
      };
      const sampler = newSampler(this.model);
      sampler.applyConfig(claimed._resolveSamplerConfig({ temperature: 0 }));
      sequence = { claimed, id: claimed._sequenceId, held: [], sampler, writing: null, catchUp: [] };
      this.sequences.set(sequenceId, sequence);
    }
    return sequence;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.rounds;
    for (const sequence of this.sequences.values()) sequence.sampler.dispose();
    await this.context.dispose();
    await this.model.dispose();
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
