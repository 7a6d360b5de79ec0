// Why one file (over 900 lines): it must stay one piece, as the slot loop is the one scheduler of a context's
// batches: queuing a feed, filling a batch, decoding ahead, taking a token back and the native solo run all read
// and change the same state (the queued feeds, the tokens decoded ahead, the dispatch under way, the solo run's
// interrupt); the comment below is its design. What is not the batches' business is apart: whether an
// evaluation may guess and whether a guess is worth a position (speculation.ts), what a step's guesses cost
// (step-costs.ts), prompt lookup (prompt-lookup.ts), token probabilities.
//
// How every token of a context is produced: one slot loop per context, in the style of llama-server's
// `update_slots`. Each evaluation (a prompt and the answer after it, a forced feed, a warm start's read) queues
// its feed here; each batch takes every queued feed it has room for, in ascending sequence order, a long
// prompt in chunks (the generating sequences' tokens first, so a prompt never holds their steps up), decodes,
// and samples each sequence whose feed is done with its own sampler: grammars, penalties, token biases and
// token probabilities alike. The choice of how tokens are made is taken once, when the model loads
// (`SlotLoop`'s constructor: the binding's shapes, the model's need for context checkpoints, the engine
// build's native paths), never per call.
//
// node-llama-cpp's `sequence.evaluate` spends 350 to 400 µs of JavaScript per token between the decode and
// the sampling and back (its generator, batch queue, locks and sampler set-up), on top of the two trips
// through the libuv pool each token needs anyway. Driven directly, the same binding generated 6 to 9%
// faster for one sequence and, with the sequences of a step in one batch and their samplings in parallel,
// 307 to 326 tokens/s for four (node-llama-cpp's path: 246 to 268; llama-server: 300 to 322).
// docs/performance.md has the measurements.
//
// Each sampled token is decoded ahead: its decode goes out with the batch that follows at once, before the
// token is handed to its generation, whose work (and the codec's and HTTP's) then runs while it decodes;
// the sampling after it waits for the generation's ask (with `svc engine build`'s binaries and settings that
// do not change from token to token, it is done in the decode's job and the token kept for the ask; see
// `dispatch`). A generation that stops or turns instead has the token taken back out (see Ahead below).
//
// With `svc engine build`'s binaries, a lone generation's steps go further: the addon decodes, samples and
// decodes ahead on a thread of its own, with no trip through JavaScript between two tokens (see `solo`).
//
// What this relies on in node-llama-cpp (pinned; not public API; the constructor checks the shapes, and
// without them, or for models that need context checkpoints, every token comes from node-llama-cpp's own
// `evaluateWithMetadata`): the context's binding (`_ctx`: initBatch, addToBatch, decodeBatch, sampleToken),
// its sampler class (`_llama._bindings.AddonSampler`), the sequence's id, next position and token record
// (`_sequenceId`, `_nextTokenIndex`, `_contextTokens`, updated here exactly as its own decode does), its
// sampler settings (`_resolveSamplerConfig`), and the context lock its own batches hold (lifecycle-utils
// `withLock([context, "context"])`), so that its work (erasing, saving and loading states) never interleaves
// with our batches.
import { createRequire } from "node:module";
import { acquireLock, withLock } from "lifecycle-utils";
import type { LlamaContext, LlamaContextSequence, LlamaModel, SequenceEvaluateOptions, Token } from "node-llama-cpp";
import { newSampler, type Binding, type Sampler } from "./context-binding.js";
import type { DraftSource } from "./draft-model.js";
import { Guesser, isLookaheadBias, KeepRateHistory, predictionPrefix, takesGuesses, type SpeculationLookup } from "./speculation.js";
import { libuvPoolThreads, type DecodeThreads } from "./thread-policy.js";
import { keptGuesses, microBatches, StepCosts } from "./step-costs.js";
import type { SampledToken, TokenMetadata } from "./token-probabilities.js";

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

/**
 * Whether the context's sequences share one KV cache: node-llama-cpp 3.22's addon always gives each its own
 * (`kv_unified` off), so llama.cpp splits a batch into passes of equal counts per sequence (step-costs.ts).
 */
const UNIFIED_KV = false;

/** Feeds up to this long count as a generation's step (batched first); longer ones are prompts, read in chunks. */
export const MAX_STEP_FEED = 8;

interface SequenceInternals {
  _sequenceId: number;
  _nextTokenIndex: number;
  _contextTokens: Token[];
  _resolveSamplerConfig(options: SequenceEvaluateOptions): unknown;
}

/** One evaluation on the loop: its sequence, its sampler and options, and the token decoded ahead for it. */
interface Track {
  sequence: SequenceInternals;
  /** Null for a read (a prompt prefix decoded without sampling). */
  sampler: Sampler | null;
  options: SequenceEvaluateOptions;
  metadata: TokenMetadata;
  /** How many more tokens the generation can take after the one just sampled (decoded ahead only if any). */
  more: () => number;
  /** The request's: once it is aborted, what is left of its feed is not decoded (a long prompt stops within a batch). */
  signal: AbortSignal | undefined;
  ahead: Ahead | null;
  closed: boolean;
  /** Its sampler settings are the same for every token and nothing is reported with a token (`samplesAhead`). */
  fixed: boolean;
  configured: boolean;
  /**
   * Tokens a verification step sampled past the one it handed over (guesses the model agreed with, and the
   * token after the last of them): yielded next, with no decode; all but the last are in the sequence.
   */
  accepted: SampledToken[];
  /**
   * Speculation (speculation.ts): the track's guesses and their back-off; null where the loop makes none (off,
   * a read, or sampler settings that change from token to token or report something with each).
   */
  guesser: Guesser | null;
}

/**
 * A step's decode, sent before its sampling was asked for: as soon as a token is sampled, it is decoded as
 * the sequence's next input while the token travels through the generation, the codec and HTTP, since the
 * generation asks for that next token almost always. The sampling waits for the ask (repeat penalties read
 * the tokens the generation has taken in, and a seed's draws keep their order). If the generation stops or
 * changes course instead, the token is taken out of the sequence again, leaving it as it would be without
 * the decode ahead.
 */
interface Ahead {
  track: Track;
  token: Token;
  /**
   * Speculation: the tokens guessed to follow `token` (prompt lookup or a draft model), decoded with it in
   * one step; its sampling then checks them in order (see `verify`). Empty: a plain step.
   */
  draft: Token[];
  /** A draft model writing `draft` (set when it is done): the batch that decodes the token waits for it. */
  drafting: Promise<void> | null;
  /** Its dispatch let the context go without sampling it: its logits are gone. */
  stale: boolean;
  sampled: boolean;
  /** The generation will not ask for it. */
  dropped: boolean;
  /** Where the token went in the sequence; -1 until it is decoded. */
  position: number;
  /**
   * The token after it, sampled in its decode's job (`decodeBatchAndSample`) before the generation asked
   * for it; kept for the ask. `sampled` stays false until then, so a generation that stops without asking
   * has the token taken out again as usual.
   */
  presampled: Token | undefined;
  /** The generation's ask; resolved with null when it must be decoded again (it went stale). */
  ask: { resolve(token: SampledToken | null): void; reject(err: unknown): void } | null;
  /** Settles when the dispatch that took it is done with it. */
  settled: Promise<void>;
  settle(): void;
  error: unknown;
}

/** A feed waiting for the batches: what is left of it, and whether its last token's logits are sampled. */
interface Feed {
  track: Track;
  tokens: Token[];
  sample: boolean;
  resolve(token: SampledToken | null): void;
  reject(err: unknown): void;
}

/**
 * How long a batch waits, after its decode, for the generations to ask for the tokens decoded ahead. They
 * have asked long before on any real model (a generation takes a token in within a millisecond, a decode
 * takes several); a generation whose reader stalls holds the others up once by this much, then decodes
 * its token again when it asks.
 */
export const AHEAD_WAIT_MS = 4;

/** The most tokens one solo run samples before it hands the context back (and a new run starts). */
export const SOLO_MAX_SAMPLES = 32;

/**
 * A solo run posts its tokens to JavaScript together, at most every SOLO_DELIVER_MS (the first of a run
 * at once, and always before it waits or ends), and samples up to SOLO_AHEAD tokens past the one the
 * generation asked for last, so that it does not wait for JavaScript to take a batch in. JavaScript then
 * wakes once for the five tokens a fast model makes in 16 ms instead of for each, and leaves the cores to
 * the decode (docs/performance.md, section 16); no token waits longer than one frame of a 60 Hz screen,
 * and a model slower than 60 tokens/s has each token posted at once. Tokens sampled past where the
 * generation stops are taken out of the sequence again, as a token decoded ahead (`solo`).
 */
export const SOLO_AHEAD = 16;
export const SOLO_DELIVER_MS = 16;

/**
 * Which of the engine build's paths the loop may take, chosen once when the model loads (with the binaries'
 * capabilities): solo runs for a lone generation, samplings in the decode's job for a step of several.
 */
export interface TokenPaths {
  solo: boolean;
  stepSampling: boolean;
  /** Prompt-lookup speculation (issue 44): guessed tokens checked in the step that decodes a sampled token. */
  speculation: boolean;
  /**
   * A greedy verification's samplings queued together (`verify`), one trip through libuv's pool for all of a
   * step's guesses; taken only where the pool has one thread (`svc serve` and the engine process: bin/libuv-pool.js),
   * which runs them one after another in the order queued (two at once on one sampler would share its buffer).
   */
  queuedSamplings: boolean;
}

/** Whether the binding's jobs may be queued behind one another (`queuedSamplings`): asked for, and libuv's pool has one thread, which runs them in the order queued. */
export function samplingsQueue(paths: TokenPaths): boolean {
  return paths.queuedSamplings && libuvPoolThreads() === 1;
}

/**
 * The paths asked for at load: all, unless `SVC_SOLO_LOOP=0`, `SVC_STEP_SAMPLING=0` or `SVC_QUEUED_SAMPLINGS=0`
 * (to compare them with the token-by-token path) or `SVC_SPECULATION=off` (`svc serve --speculation off`), read
 * here once, never per call.
 */
export function tokenPathsFromEnvironment(env: NodeJS.ProcessEnv = process.env): TokenPaths {
  const speculation = (env.SVC_SPECULATION ?? "").trim().toLowerCase();
  return { solo: env.SVC_SOLO_LOOP !== "0", stepSampling: env.SVC_STEP_SAMPLING !== "0", speculation: speculation !== "off" && speculation !== "0", queuedSamplings: env.SVC_QUEUED_SAMPLINGS !== "0" };
}


/** The tokens a generation can take after the one just sampled, as the binding takes it (a whole number up to 2^20). */
function budget(track: Track): number {
  const more = track.more();
  return more > 0 ? Math.min(Math.floor(more), 1 << 20) : 0;
}

/**
 * Whether a track's next token may be sampled before its generation asks for it (in a solo run, or in its
 * decode's job): its sampler settings do not change from token to token and nothing is reported with the
 * token. Repeat penalties read the tokens the generation has taken in, a bias function may answer
 * differently each time, and a grammar's state moves with every token the generation keeps.
 */
function samplesAhead(options: SequenceEvaluateOptions, metadata: TokenMetadata): boolean {
  return (
    !options.repeatPenalty &&
    !options.dryRepeatPenalty &&
    typeof options.tokenBias !== "function" &&
    options.grammarEvaluationState == null &&
    !metadata.probabilities &&
    !metadata.confidence
  );
}

/**
 * Applies the track's sampler settings before a sampling: every time where they change from token to token
 * (repeat penalties read the tokens taken in, a grammar's state), once where they do not. Resolving and
 * applying them cost 40 to 50 µs a sequence in a step of four (a sixth of the JavaScript between two decodes).
 */
function configure(track: Track): void {
  if (track.fixed && track.configured) return;
  track.sampler!.applyConfig(track.sequence._resolveSamplerConfig(track.options));
  track.configured = true;
}

/**
 * The settings of a step's `at`-th guessed position where they change from token to token: the bias once the
 * guesses before it are taken.
 */
function configureAfter(track: Track, draft: readonly Token[], at: number): void {
  if (track.fixed) return;
  const bias = track.options.tokenBias;
  track.sampler!.applyConfig(track.sequence._resolveSamplerConfig(isLookaheadBias(bias) ? { ...track.options, tokenBias: bias.after(draft.slice(0, at)) } : track.options));
}

/** What the binding's sampling returns, as the generation reads it (node-llama-cpp's `evaluateWithMetadata` shape). */
function sampledFrom(result: number | [number, number[]?, number?]): SampledToken {
  if (typeof result === "number") return { token: result as Token };
  const [token, pairs, confidence] = result;
  const sampled: SampledToken = { token: token as Token };
  if (pairs != null) {
    const probabilities = new Map<Token, number>();
    for (let i = 1; i < pairs.length; i += 2) probabilities.set(pairs[i - 1] as Token, pairs[i]!);
    sampled.probabilities = probabilities;
  }
  if (confidence != null) sampled.confidence = confidence;
  return sampled;
}

/** The queue of those waiting for a lifecycle-utils lock (not public API; the solo loop stays off without it). */
function lockWaiters(lock: object): { isEmpty: boolean } | null {
  const queue = (lock as { _state?: unknown[] })._state?.[0] as { isEmpty?: unknown } | undefined;
  return queue && typeof queue.isEmpty === "boolean" ? (queue as { isEmpty: boolean }) : null;
}

/** Whether a model needs node-llama-cpp's context checkpoints (recurrent, hybrid, or sliding-window attention without a full cache). */
function needsCheckpoints(model: LlamaModel, context: LlamaContext): boolean {
  const insights = model.fileInsights;
  if (insights.isHybrid || insights.isRecurrent) return true;
  return insights.swaSize != null && !(context as unknown as { _swaFullCache?: boolean })._swaFullCache;
}

export class SlotLoop {
  private pending: Feed[] = [];
  private pendingAhead: Ahead[] = [];
  private scheduled = false;
  private running = false;
  /** Wakes the dispatch waiting for asks (awaitAsks) when one comes or a token is dropped. */
  private askArrived: (() => void) | null = null;
  /** Evaluations and reads under way on the loop. */
  private live = 0;
  /** Ends the solo run under way, if any (another evaluation wants the context). */
  private soloInterrupt: (() => void) | null = null;

  /**
   * Whether tokens are produced here (decided at load): node-llama-cpp has the shapes the loop relies on and
   * the model needs no context checkpoints. Otherwise every evaluation is node-llama-cpp's own.
   */
  readonly available: boolean;
  /** The engine build's paths this loop takes: asked for at load, and present in the binaries (decided at load). */
  readonly paths: TokenPaths;
  /** How often the loop's recent verifications kept their guesses: where a new evaluation's guessing starts. */
  private readonly keepRates = new KeepRateHistory();

  constructor(
    private readonly context: LlamaContext,
    private readonly model: LlamaModel,
    paths: TokenPaths = tokenPathsFromEnvironment(),
    /** Speculation's guesses from a draft model (--draft-model) instead of prompt lookup. */
    private readonly draftModel: DraftSource | null = null,
    /** What this context's passes have cost, by size: the price of a step's guesses (step-costs.ts). */
    private readonly costs: StepCosts = new StepCosts({ warmUp: true }),
    /** The threads of each decode (thread-policy.ts); null: the context's own count for all. */
    private readonly threads: DecodeThreads | null = null,
  ) {
    const binding = (this.context as unknown as { _ctx?: Partial<Binding> })._ctx;
    const sampler = (this.model as unknown as { _llama?: { _bindings?: { AddonSampler?: unknown } } })._llama?._bindings?.AddonSampler;
    this.available =
      SHARED_LOCKS &&
      typeof binding?.initBatch === "function" &&
      typeof binding.addToBatch === "function" &&
      typeof binding.decodeBatch === "function" &&
      typeof binding.sampleToken === "function" &&
      typeof sampler === "function" &&
      !needsCheckpoints(model, context);
    this.paths = {
      solo: this.available && paths.solo && typeof binding?.runSolo === "function",
      stepSampling: this.available && paths.stepSampling && typeof binding?.decodeBatchAndSample === "function",
      speculation: this.available && paths.speculation && typeof binding?.removeTokenCellsFromSequence === "function",
      queuedSamplings: this.available && samplingsQueue(paths),
    };
  }

  /**
   * node-llama-cpp's own evaluation, for a model the loop cannot drive. Its dispatch sets the context's count
   * before each decode from the Llama's thread splitter, so the policy's count (capped at the cores other
   * processes leave) is set as the splitter's maximum (`Llama.maxThreads`, public; the engine puts it back
   * when it closes): before the feed, then before each next token. With the context's fixed count, one core
   * busy elsewhere made a lone answer about 8 times slower on 2 cores (docs/performance.md sections 10, 45).
   */
  private async *libraryEvaluate(sequence: LlamaContextSequence, tokens: Token[], metadata: TokenMetadata, options: SequenceEvaluateOptions): AsyncGenerator<SampledToken, void, unknown> {
    const llama = this.model.llama;
    if (this.threads) llama.maxThreads = this.threads.forBatch(tokens.length);
    for await (const sampled of sequence.evaluateWithMetadata(tokens, metadata, { ...options, yieldEogToken: true }) as AsyncGenerator<SampledToken, void, unknown>) {
      if (this.threads) llama.maxThreads = this.threads.forSolo();
      yield sampled;
    }
  }

  /** The path in words, for the load's log line. */
  describe(): string {
    if (!this.available)
      return needsCheckpoints(this.model, this.context)
        ? "node-llama-cpp's evaluate for every token (the model needs context checkpoints)"
        : "node-llama-cpp's evaluate for every token (its binding lacks the slot loop's shapes)";
    const extras = [
      this.paths.solo ? "solo runs" : "",
      this.paths.stepSampling ? "sampling in the decode's job" : "",
      this.paths.speculation ? (this.draftModel ? "draft-model speculation" : "prompt-lookup speculation") : "",
    ].filter(Boolean);
    return `the slot loop${extras.length ? ` with ${extras.join(" and ")}` : ""}`;
  }

  /**
   * Like `sequence.evaluateWithMetadata(tokens, metadata, options)` with `yieldEogToken`: feeds the tokens,
   * then yields each sampled token (end-of-generation tokens included, with the probabilities the metadata
   * asks for); the caller stops pulling when it is done. `more()`, asked as each token is sampled, says how
   * many more tokens the caller can take after it (0: its budget ends there). Once `signal` is aborted, the
   * evaluation ends without yielding more, as soon as the batch under way is done (the sequence keeps what
   * was decoded of its feed, which the prefix cache can reuse).
   */
  async *evaluate(
    sequence: LlamaContextSequence,
    tokens: Token[],
    metadata: TokenMetadata,
    options: SequenceEvaluateOptions,
    more: () => number = () => Number.MAX_SAFE_INTEGER,
    signal?: AbortSignal,
    /** What else prompt lookup guesses from (SpeculationLookup). */
    lookup: SpeculationLookup = {},
  ): AsyncGenerator<SampledToken, void, unknown> {
    if (!this.available) {
      yield* this.libraryEvaluate(sequence, tokens, metadata, options);
      return;
    }
    const internals = sequence as unknown as SequenceInternals;
    const sampler = newSampler(this.model);
    const fixed = samplesAhead(options, metadata);
    const track: Track = {
      sequence: internals,
      sampler,
      options,
      metadata,
      more,
      signal,
      ahead: null,
      closed: false,
      fixed,
      configured: false,
      accepted: [],
      // Guesses only where a guessed position is sampled as the token-by-token path would sample it.
      guesser: this.paths.speculation && takesGuesses(options, metadata) ? new Guesser(this.draftModel, internals._sequenceId, predictionPrefix(internals._contextTokens, tokens, lookup.prediction), this.keepRates, lookup.quoted) : null,
    };
    if (tokens.length === 0) throw new Error("An evaluation needs at least one token to feed.");
    let feed = tokens;
    // Counted from here, prompt included: a solo run under way ends as this evaluation starts.
    this.live++;
    this.soloInterrupt?.();
    try {
      while (true) {
        const verified = track.accepted.shift();
        if (verified) {
          // Checked by a verification step already (guesses the model agreed with): no decode to wait for.
          yield verified;
          feed = [verified.token];
          continue;
        }
        let ahead = track.ahead;
        track.ahead = null;
        let sampled = ahead && !ahead.stale ? await this.sampleAhead(ahead) : null;
        if (sampled === null && ahead?.stale === true && ahead.draft.length > 0 && !ahead.dropped) {
          // Decoded with guesses, whose logits were let go before the generation asked (a reader that stalled
          // past AHEAD_WAIT_MS): decoded again with the same guesses, asked for at once, so that they are checked.
          await this.drop(ahead);
          ahead = this.queueAhead(track, ahead.token, ahead.draft);
          this.kick();
          sampled = await this.sampleAhead(ahead);
        }
        if (sampled === null) {
          // No decode ahead, or its logits were let go: decode the feed now.
          if (ahead) await this.drop(ahead);
          if (internals._nextTokenIndex + feed.length > this.context.contextSize - 1)
            // The generation's budget keeps every answer inside its context (llama-engine.ts); this is a bug.
            throw new Error(`The sequence's context is full (${internals._nextTokenIndex} + ${feed.length} tokens of ${this.context.contextSize}).`);
          if (this.soloFits(track, feed)) {
            const next = yield* this.solo(track, feed);
            if (next !== null) {
              feed = next;
              continue;
            }
          }
          sampled = await this.queue(track, feed, true);
          // Aborted before its feed was all decoded.
          if (sampled === null) return;
        }
        yield sampled;
        feed = [sampled.token];
      }
    } finally {
      this.live--;
      track.closed = true;
      if (track.ahead) await this.drop(track.ahead);
      if (track.accepted.length > 0) {
        // The generation stopped before taking the verified tokens: those of them in the sequence (all but the
        // last), and the one it took last, come out again, leaving the sequence as a token-by-token answer would.
        const end = internals._nextTokenIndex;
        await sequence.eraseContextTokenRanges([{ start: end - track.accepted.length, end }]);
        track.accepted = [];
      }
      sampler.dispose();
    }
  }

  /** Decodes tokens into the sequence without sampling (a warm start's prefix), in the loop's batches. */
  async read(sequence: LlamaContextSequence, tokens: Token[]): Promise<void> {
    if (tokens.length === 0) return;
    if (!this.available) return sequence.evaluateWithoutGeneratingNewTokens(tokens);
    const track: Track = {
      sequence: sequence as unknown as SequenceInternals,
      sampler: null,
      options: {},
      metadata: {},
      more: () => 0,
      signal: undefined,
      ahead: null,
      closed: false,
      fixed: true,
      configured: true,
      accepted: [],
      guesser: null,
    };
    this.live++;
    this.soloInterrupt?.();
    try {
      await this.queue(track, tokens, false);
    } finally {
      this.live--;
      track.closed = true;
    }
  }

  /**
   * Whether this evaluation may take its next steps in a solo run: the binaries have it, the evaluation is
   * the only one on the loop and nothing else is queued, its feed is a step's, and its sampler settings stay
   * the same from token to token (no repeat penalties, which read the tokens the generation has taken in; no
   * bias function, no grammar, nothing reported with a token).
   */
  private soloFits(track: Track, feed: Token[]): boolean {
    return (
      this.paths.solo &&
      this.live === 1 &&
      !this.running &&
      this.pending.length === 0 &&
      this.pendingAhead.length === 0 &&
      feed.length <= MAX_STEP_FEED &&
      track.fixed &&
      track.sequence._nextTokenIndex + feed.length < this.context.contextSize - 1 &&
      // With speculation, a step that has guesses to check takes them rather than a solo run's single tokens,
      // and guesses found or refused a few tokens ago keep the answer on steps (SPECULATION_SOLO_AFTER).
      track.guesser?.settled !== false &&
      !(feed.length === 1 && track.guesser?.wouldGuess(track.sequence._contextTokens, feed[0]!))
    );
  }

  /**
   * A lone evaluation's steps on a thread of the binding's own (resources/engine-native/solo-loop.cpp): it decodes the feed,
   * samples, and decodes each sampled token at once, without a trip through JavaScript between two tokens,
   * up to SOLO_AHEAD tokens past the one the generation asked for last and never past its budget; the
   * tokens come here a few at a time (SOLO_DELIVER_MS) and are yielded as the generation asks. The run
   * holds the context lock and ends, without decoding the token it just sampled, when that token ends the
   * generation or its budget, when the generation has not caught up within AHEAD_WAIT_MS of the run
   * reaching SOLO_AHEAD, after SOLO_MAX_SAMPLES tokens, or when anyone else wants the context (another
   * evaluation's step or prompt at once; node-llama-cpp's own work waiting for the lock at the next
   * handover). The lock goes as the run ends, not once the generation has taken its tokens: a reader that
   * stalls holds no one up. Returns the next feed (the last token sampled, not decoded), or null when the
   * run could not start (the caller steps instead). A generation that stops has the tokens decoded past the
   * one it asked for last taken out again, exactly as a dropped decode ahead.
   */
  private async *solo(track: Track, feed: Token[]): AsyncGenerator<SampledToken, Token[] | null, unknown> {
    const binding = (this.context as unknown as { _ctx: Required<Binding> })._ctx;
    const lock = await acquireLock([this.context, "context"]);
    const waiters = lockWaiters(lock);
    if (waiters === null || !waiters.isEmpty || !this.soloFits(track, feed)) {
      lock.dispose();
      return null;
    }
    const sequence = track.sequence;
    const start = sequence._nextTokenIndex;
    const sampled: Token[] = [];
    let finished = false;
    let decoded = 0;
    let error: string | undefined;
    let wake: (() => void) | null = null;
    const notify = () => {
      const w = wake;
      wake = null;
      w?.();
    };
    const interrupt = () => binding.soloStop();
    /** The run is over: record what it decoded and let the context go at once, whatever the generation does next. */
    const end = (count: number, message: string | undefined) => {
      finished = true;
      decoded = count;
      error = message;
      // What node-llama-cpp's own decode records for the sequence (its cache reuse reads these).
      const inputs = [...feed, ...sampled].slice(0, decoded);
      sequence._nextTokenIndex += inputs.length;
      sequence._contextTokens.push(...inputs);
      if (this.soloInterrupt === interrupt) this.soloInterrupt = null;
      lock.dispose();
    };
    configure(track);
    try {
      if (this.threads) binding.setThreads(this.threads.forSolo());
      binding.runSolo(sequence._sequenceId, start, Uint32Array.from(feed), track.sampler, this.context.contextSize - 2, SOLO_MAX_SAMPLES, AHEAD_WAIT_MS, budget(track), (tokens, count, message) => {
        if (tokens === -1) end(count ?? 0, message);
        else {
          for (const token of tokens) sampled.push(token as Token);
          // Someone else wants the context, or speculation has a guess to check after the last token: a step
          // with guesses takes over (a run samples single tokens; an echo answer's first 32 tokens were
          // written that way, at a fifth of the guessed speed: docs/performance.md section 34).
          if (!waiters.isEmpty || this.pending.length > 0 || track.guesser?.wouldGuessAfterRun(track.sequence._contextTokens, feed, sampled) === true) interrupt();
        }
        notify();
      }, SOLO_AHEAD, SOLO_DELIVER_MS);
    } catch (err) {
      lock.dispose();
      throw err;
    }
    this.soloInterrupt = interrupt;
    let taken = 0;
    let completed = false;
    try {
      while (true) {
        if (taken === sampled.length) {
          if (finished) break;
          await new Promise<void>((resolve) => (wake = resolve));
          continue;
        }
        const token = sampled[taken++]!;
        // Speculation's back-off counts these tokens too.
        track.guesser?.passed();
        yield { token };
        // The generation asks for its next token; `more` says how many it could take after that one.
        binding.soloAsk(taken + 1, budget(track));
      }
      completed = true;
    } finally {
      if (!finished) {
        binding.soloStop();
        while (!finished) await new Promise<void>((resolve) => (wake = resolve));
      }
      if (!completed) {
        // The generation stopped after its `taken`-th token: that token and any after it were decoded
        // ahead for nothing; the sequence is left as the token-by-token path leaves it (see drop()).
        const keep = start + feed.length + Math.max(0, taken - 1);
        if (start + decoded > keep) await (sequence as unknown as LlamaContextSequence).eraseContextTokenRanges([{ start: keep, end: start + decoded }]);
      }
    }
    if (error !== undefined) throw new Error(error);
    return [sampled.at(-1)!];
  }

  /** Queues a feed for the batches; resolves with the token sampled after it (null for a read). */
  private queue(track: Track, tokens: Token[], sample: boolean): Promise<SampledToken | null> {
    this.soloInterrupt?.();
    return new Promise<SampledToken | null>((resolve, reject) => {
      this.pending.push({ track, tokens, sample, resolve, reject });
      this.kick();
    });
  }

  /** The token after an ahead decode, sampled by the dispatch that decodes it; null: decode it again. */
  private sampleAhead(ahead: Ahead): Promise<SampledToken | null> {
    if (ahead.error != null) return Promise.reject(ahead.error);
    if (ahead.presampled !== undefined) {
      ahead.sampled = true;
      return Promise.resolve({ token: ahead.presampled });
    }
    return new Promise<SampledToken | null>((resolve, reject) => {
      ahead.ask = { resolve, reject };
      this.wakeAskWaiter();
    });
  }

  /** Takes a token decoded ahead (or about to be) out of the sequence again. */
  private async drop(ahead: Ahead): Promise<void> {
    ahead.dropped = true;
    const queued = this.pendingAhead.indexOf(ahead);
    if (queued >= 0) {
      // Not sent yet: nothing to undo.
      this.pendingAhead.splice(queued, 1);
      return;
    }
    this.wakeAskWaiter();
    await ahead.settled;
    if (ahead.position >= 0 && !ahead.sampled) {
      // The token and any guesses decoded with it.
      const sequence = ahead.track.sequence as unknown as LlamaContextSequence;
      await sequence.eraseContextTokenRanges([{ start: ahead.position, end: ahead.position + 1 + ahead.draft.length }]);
    }
  }

  /**
   * One batch at a time; feeds queued meanwhile go in the next one, sent when this one is done. Alone, a
   * feed is sent at once; with others on the loop, once the promise jobs running now are done, so that the
   * generations handed their tokens together all queue their next feeds into the same batch (a nextTick
   * queued from a promise job runs after the whole cascade; it also runs before the I/O callbacks of this
   * turn, the HTTP writes of the tokens just made, which then run while the batch decodes).
   */
  private kick(): void {
    if (this.scheduled || this.running) return;
    this.scheduled = true;
    const dispatch = () => {
      this.scheduled = false;
      if (!this.running) void this.dispatch();
    };
    if (this.live <= 1) dispatch();
    else process.nextTick(dispatch);
  }

  /**
   * Fills one batch: the tokens decoded ahead and the generations' steps first, whole, then the prompts in
   * the order they came, each as much as the batch has room for (the rest waits, first in line, for the
   * next batch); in ascending sequence order, since llama.cpp decodes consecutive sequence ids in one
   * micro-batch (with one KV cache per sequence its split is "sequential": counted during 4 concurrent
   * 150-token streams in the order requests happened to come, 150 batches became 331 to 435 decodes;
   * ordered, 150). Then decodes it and samples each finished feed with its own sampler.
   */
  private async dispatch(): Promise<void> {
    this.running = true;
    let taken: Array<{ feed: Feed; count: number }> = [];
    let aheads: Ahead[] = [];
    /** Feeds not taken whole: they go back to the front of the queue once this batch is done. */
    let rest: Feed[] = [];
    /** The sampled tokens, handed over once the next batch is on its way (below). */
    const deliveries: Array<() => void> = [];
    try {
      // A draft model is writing guesses for tokens of this batch: they go in with their guesses.
      const drafting = this.pendingAhead.flatMap((a) => (a.drafting ? [a.drafting] : []));
      if (drafting.length > 0) await Promise.all(drafting);
      await withLock([this.context, "context"], async () => {
        // Taken once the context is ours: feeds queued while node-llama-cpp's own work ran join this batch.
        const feeds = this.pending.splice(0).filter((feed) => {
          if (!feed.track.signal?.aborted) return true;
          deliveries.push(() => feed.resolve(null));
          return false;
        });
        // (One queued meanwhile whose guesses are still being written waits for the next batch.)
        aheads = this.pendingAhead.filter((a) => a.drafting === null);
        this.pendingAhead = this.pendingAhead.filter((a) => a.drafting !== null);
        if (feeds.length === 0 && aheads.length === 0) return;
        const steps = feeds.filter((f) => f.tokens.length <= MAX_STEP_FEED);
        const prompts = feeds.filter((f) => f.tokens.length > MAX_STEP_FEED);
        // A step of generations only: its guesses are kept as far as they are worth the passes they add.
        if (prompts.length === 0 && aheads.some((a) => a.draft.length > 0)) this.priceGuesses(steps, aheads);
        let room = Math.max(0, this.context.batchSize - aheads.reduce((n, a) => n + 1 + a.draft.length, 0));
        for (const feed of [...steps, ...prompts]) {
          const count = Math.min(feed.tokens.length, room);
          room -= count;
          if (count > 0) taken.push({ feed, count });
          if (count < feed.tokens.length) rest.push(feed);
        }
        const entries = [
          ...taken.map(({ feed, count }) => ({ track: feed.track, tokens: feed.tokens.slice(0, count), feed, ahead: null as Ahead | null, samples: feed.sample && count === feed.tokens.length })),
          ...aheads.map((ahead) => ({ track: ahead.track, tokens: [ahead.token, ...ahead.draft], feed: null as Feed | null, ahead, samples: true })),
        ].sort((a, b) => a.track.sequence._sequenceId - b.track.sequence._sequenceId);
        const binding = (this.context as unknown as { _ctx: Binding })._ctx;
        const batchTokens = entries.reduce((n, e) => n + e.tokens.length, 0);
        binding.initBatch(batchTokens);
        // The logits sampled: a feed's last position; a token decoded ahead with guesses, every position (verify).
        const logits = entries.map((e) => {
          const drafted = e.ahead !== null && e.ahead.draft.length > 0;
          const wanted = !e.samples ? new Uint32Array(0) : drafted ? Uint32Array.from(e.tokens, (_, i) => i) : Uint32Array.of(e.tokens.length - 1);
          return binding.addToBatch(e.track.sequence._sequenceId, e.track.sequence._nextTokenIndex, Uint32Array.from(e.tokens), wanted);
        });
        const sampling = entries.map((e, i) => ({ ...e, logit: logits[i]![0] ?? -1, positions: logits[i]! })).filter((e) => e.samples);
        // With `svc engine build`'s binaries, the tokens are sampled in the decode's own job when every
        // track's settings allow sampling before the ask: one trip through the libuv pool a step instead of
        // one for the decode and one for each sampling (docs/performance.md, section 17). Not with guesses to
        // check, which are sampled position by position once asked for (verify).
        const presample =
          this.paths.stepSampling && sampling.length > 0 && sampling.every((e) => e.track.fixed && (e.ahead === null || e.ahead.draft.length === 0));
        let presampled: number[] | null = null;
        try {
          if (presample) for (const e of sampling) configure(e.track);
          const threads = this.threads?.forBatch(batchTokens);
          if (threads !== undefined) binding.setThreads(threads);
          const started = performance.now();
          if (presample) presampled = await binding.decodeBatchAndSample!(Uint32Array.from(sampling.map((e) => e.logit)), sampling.map((e) => e.track.sampler));
          else await binding.decodeBatch();
          if (threads !== undefined) this.threads!.decoded(batchTokens, threads, performance.now() - started);
          // A step of generations (what is priced) that was one pass over the weights prices passes of its
          // size; prompts' chunks are not recorded (their sizes are never a step's).
          if (prompts.length === 0) {
            const passes = microBatches(
              entries.map((e) => ({ sequence: e.track.sequence._sequenceId, tokens: e.tokens.length })),
              UNIFIED_KV,
              this.context.batchSize,
            );
            if (passes.length === 1) this.costs.record(passes[0]!, performance.now() - started);
          }
        } catch (err) {
          for (const a of aheads) a.error = err;
          throw err;
        }
        for (const e of entries) {
          // What node-llama-cpp's own decode records for the sequence (its cache reuse reads these).
          const sequence = e.track.sequence;
          if (e.ahead) e.ahead.position = sequence._nextTokenIndex;
          sequence._nextTokenIndex += e.tokens.length;
          sequence._contextTokens.push(...e.tokens);
          if (e.feed) e.feed.tokens = e.feed.tokens.slice(e.tokens.length);
        }
        // The logits stay valid only while this batch holds the context: wait (briefly) for the asks. (Tokens
        // sampled in the decode's job need no logits; the wait lets the batch hand them over and decode them
        // ahead together.)
        await this.awaitAsks(aheads);
        const sampled = await Promise.all(
          sampling.map(async (e, i): Promise<SampledToken | SampledToken[] | null> => {
            // A token decoded ahead whose generation dropped it or has not asked yet is not handed over.
            const unasked = e.ahead !== null && (e.ahead.dropped || e.ahead.ask === null);
            if (presampled === null) {
              if (unasked) return null;
              configure(e.track);
              if (e.ahead !== null && e.ahead.draft.length > 0) return this.verify(binding, e.track, e.ahead.draft, e.positions);
              return sampledFrom(await binding.sampleToken(e.logit, e.track.sampler, e.track.metadata.probabilities === true, e.track.metadata.confidence === true));
            }
            // Sampled already: kept for an ask still to come (sampleAhead), neither handed over nor decoded
            // ahead. (A failed sampling, -1, is not kept: the ask decodes the token again and samples anew.)
            if (unasked && !e.ahead!.dropped && presampled[i] !== -1) e.ahead!.presampled = presampled[i]! as Token;
            return unasked ? null : { token: presampled[i]! as Token };
          }),
        );
        sampling.forEach((e, i) => {
          const result = sampled[i];
          if (result == null) return;
          if (e.ahead) e.ahead.sampled = true;
          if (Array.isArray(result)) {
            // A verification: the first token goes to the ask, the others wait on the track (yielded next);
            // the guesses after the last one the model agreed with come out of the sequence now, in the lock.
            if (!this.keepVerified(binding, e.track, e.ahead!.position + result.length)) {
              e.ahead!.ask!.reject(new Error("llama.cpp could not take the rejected guesses out of the sequence."));
              return;
            }
            e.track.accepted = result.slice(1);
          }
          const token = Array.isArray(result) ? result[0]! : result;
          if (token.token === -1) {
            const err = new Error("llama.cpp could not sample the next token.");
            if (e.feed) e.feed.reject(err);
            else e.ahead!.ask!.reject(err);
            return;
          }
          this.decodeAhead(e.track, (e.track.accepted.at(-1) ?? token).token, e.track.accepted.length);
          deliveries.push(e.feed ? () => e.feed!.resolve(token) : () => e.ahead!.ask!.resolve(token));
        });
        // Reads done: handed back with the tokens.
        for (const e of entries) if (e.feed && !e.feed.sample && e.feed.tokens.length === 0) deliveries.push(() => e.feed!.resolve(null));
      });
    } catch (err) {
      for (const { feed } of taken) feed.reject(err);
      // Those not in the batch wait for the next one; those in it failed with it.
      rest = rest.filter((feed) => !taken.some((t) => t.feed === feed));
      for (const a of aheads) if (a.ask && !a.sampled) a.ask.reject(err);
    } finally {
      for (const a of aheads) {
        if (!a.sampled && a.presampled === undefined && a.error == null) {
          // Let go unsampled: an ask that came meanwhile decodes the token again.
          a.stale = true;
          if (a.ask && !a.dropped) a.ask.resolve(null);
        }
        a.settle();
      }
      this.pending.unshift(...rest);
      this.running = false;
      // The tokens just sampled are decoded at once (withLock runs its callback synchronously when the
      // context is free, so the decode starts before this returns), and only then handed to their
      // generations, whose work (and the HTTP work after it) then runs while the batch decodes.
      if (this.pendingAhead.length > 0 || rest.length > 0) void this.dispatch();
      else if (this.pending.length > 0) this.kick();
      for (const deliver of deliveries) deliver();
    }
  }

  /**
   * Trims the guesses of a step's tokens decoded ahead to what they are worth (step-costs.ts `keptGuesses`):
   * with one KV cache per sequence, a step where some sequences bring more tokens than others is several
   * passes over the weights, and a pass of more tokens may cost more than the guesses are likely to return.
   * Guesses dropped here are not checked; the answers are the same either way.
   */
  private priceGuesses(steps: Feed[], aheads: Ahead[]): void {
    const parts = [
      ...steps.map((feed) => ({ sequence: feed.track.sequence._sequenceId, tokens: feed.tokens.length, guesses: 0, keepRate: 0, ahead: null as Ahead | null })),
      ...aheads.map((ahead) => {
        const guesser = ahead.track.guesser;
        return { sequence: ahead.track.sequence._sequenceId, tokens: 1, guesses: ahead.draft.length, keepRate: guesser?.keepRate ?? 0, asked: guesser?.predicted === true, ahead };
      }),
    ].sort((a, b) => a.sequence - b.sequence);
    const kept = keptGuesses(parts, this.costs, UNIFIED_KV, this.context.batchSize);
    parts.forEach((part, i) => {
      if (!part.ahead || kept[i]! >= part.ahead.draft.length) return;
      part.ahead.draft = part.ahead.draft.slice(0, kept[i]);
      // None checked: nothing to learn the keep rate from this step (and a lone draft model waits a while).
      if (kept[i] === 0) part.ahead.track.guesser?.droppedByPrice(parts.length === 1);
    });
  }

  /** Waits up to AHEAD_WAIT_MS for the generations of these aheads to ask for (or drop) their tokens. */
  private async awaitAsks(aheads: Ahead[]): Promise<void> {
    const open = () => aheads.some((a) => !a.dropped && a.ask === null);
    if (!open()) return;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      this.wakeAskWaiter();
    }, AHEAD_WAIT_MS);
    while (open() && !timedOut) await new Promise<void>((resolve) => (this.askArrived = resolve));
    clearTimeout(timer);
    this.askArrived = null;
  }

  /**
   * Checks a token's guesses (its ahead's draft, decoded with it): samples the position after the token, and
   * while the sample is the guess there (and not an end of generation), the position after that guess, and so
   * on. Every sample is the one the token-by-token path would draw at that point (the same logits, the same
   * sampler, its draws in the same order), so greedy answers are the same and sampled ones follow the model's
   * distribution: a guess is kept exactly when the model would have written it. Returns the tokens sampled,
   * the last one not a kept guess (a token of the model's own, or the one after the last guess); the
   * sequence keeps its token and the guesses before that last one (keepVerified).
   */
  private async verify(binding: Binding, track: Track, draft: Token[], positions: Uint32Array): Promise<SampledToken[]> {
    const out: SampledToken[] = [];
    // Greedy with fixed settings, each position's sampling is the same whatever was kept before it (no draws,
    // no settings changed between them): they are queued several at a time and run back to back on the pool's
    // one thread, where one at a time cost a trip through the pool each (a step of 63 echo tokens on the
    // prebuilt binaries: one stream 1.28 times as fast, docs/performance.md section 49). The batches double
    // (2, 2, 4, 8, ...): a step whose guesses are all kept takes 6 trips for 63, and the samplings past the
    // first refused guess, wasted, are never more than those kept before it plus one.
    const queued: Array<ReturnType<Binding["sampleToken"]>> = [];
    const sample = (i: number) => {
      if (!this.paths.queuedSamplings || !track.fixed || (track.options.temperature ?? 0) > 0) return binding.sampleToken(positions[i]!, track.sampler);
      if (i >= queued.length) {
        const end = Math.min(draft.length + 1, Math.max(2, 2 * queued.length));
        while (queued.length < end) {
          const sampling = binding.sampleToken(positions[queued.length]!, track.sampler);
          // Read in turn, or not at all: a failure is the caller's when read, never an unhandled rejection.
          sampling.catch(() => undefined);
          queued.push(sampling);
        }
      }
      return queued[i]!;
    };
    for (let i = 0; i <= draft.length; i++) {
      if (i > 0) configureAfter(track, draft, i);
      const result = await sample(i);
      const token = (typeof result === "number" ? result : result[0]) as Token;
      if (token === -1) {
        if (i === 0) out.push({ token });
        break;
      }
      const kept = i < draft.length && token === draft[i] && !this.model.isEogToken(token);
      out.push({ token, speculation: { drafted: i === 0 ? draft.length : 0, accepted: kept } });
      if (!kept) break;
    }
    // The samplings queued past the refused guess end before the guesses come out of the sequence (keepVerified).
    await Promise.allSettled(queued.slice(out.length));
    // Sampling failed after a kept guess: that guess is the last token then, fed again like any other.
    const last = out.at(-1)!;
    if (last.speculation?.accepted) last.speculation = { drafted: last.speculation.drafted, accepted: false };
    track.guesser?.checked(draft.length, out.filter((t) => t.speculation?.accepted).length);
    return out;
  }

  /**
   * After a verification, inside the lock: the sequence keeps its positions before `end` (the token and the
   * guesses kept) and the rest of the guesses come out, as node-llama-cpp's own erase of a sequence's tail
   * does (the cells, its token record, its next position). False where llama.cpp could not remove them.
   */
  private keepVerified(binding: Binding, track: Track, end: number): boolean {
    const sequence = track.sequence;
    const next = sequence._nextTokenIndex;
    if (end >= next) return true;
    if (!binding.removeTokenCellsFromSequence(sequence._sequenceId, end, next)) return false;
    sequence._contextTokens.splice(end - (next - sequence._contextTokens.length));
    sequence._nextTokenIndex = end;
    return true;
  }

  private wakeAskWaiter(): void {
    const wake = this.askArrived;
    this.askArrived = null;
    wake?.();
  }

  /**
   * Queues the decode of a just-sampled token for its sequence, unless the generation cannot go on with it;
   * with speculation, with the tokens guessed to follow it. `handed`: tokens sampled before this one that the
   * generation has yet to take (a verification's), which its budget (`more`) does not count yet.
   */
  private decodeAhead(track: Track, token: Token, handed = 0): void {
    const more = track.more() - handed;
    if (track.closed || this.model.isEogToken(token) || more <= 0) return;
    const room = this.context.contextSize - 2 - (track.sequence._nextTokenIndex + 1);
    if (room < 0) return;
    // A token and its guesses fit one batch, whatever its size (64 guesses from prompt lookup alone).
    const guessed = track.guesser?.guess(track.sequence._contextTokens, token, Math.min(more - 1, room, this.context.batchSize - 1), this.live) ?? [];
    const draft = Array.isArray(guessed) ? guessed : [];
    // A lone generation with nothing to check goes on in a solo run (evaluate: no token decoded ahead).
    if (Array.isArray(guessed) && draft.length === 0 && track.guesser?.settled !== false && track.fixed && this.paths.solo && this.live === 1 && track.accepted.length === 0) return;
    const ahead = this.queueAhead(track, token, draft);
    track.ahead = ahead;
    if (!Array.isArray(guessed))
      ahead.drafting = guessed.then(
        (tokens) => {
          ahead.draft = tokens;
          ahead.drafting = null;
        },
        () => {
          // A draft model that failed guesses nothing this step.
          ahead.drafting = null;
        },
      );
  }

  /** Queues a token (and its guesses) for the next batch, to be decoded before its generation asks for it. */
  private queueAhead(track: Track, token: Token, draft: Token[]): Ahead {
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const ahead: Ahead = {
      track,
      token,
      draft,
      drafting: null,
      stale: false,
      sampled: false,
      dropped: false,
      position: -1,
      presampled: undefined,
      ask: null,
      settled,
      settle,
      error: null,
    };
    this.pendingAhead.push(ahead);
    return ahead;
  }
}
