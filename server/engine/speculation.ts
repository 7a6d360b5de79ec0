// Speculation's guesses for one evaluation on the slot loop (issue 44): what prompt lookup proposes to follow a
// sampled token, how far a step guesses, and how guessing backs off. The loop (slot-loop.ts) decodes the
// guesses with the token, checks them (`verify`) and reports back here what it kept (`checked`); everything
// about whether a guess is worth a position of the batch lives in this file, nothing about the batch.
import type { SequenceEvaluateOptions, Token, TokenBias } from "node-llama-cpp";
import type { DraftSource } from "./draft-model.js";
import { joinTokens, PROMPT_LOOKUP_DEFAULTS, PromptLookupIndex, type TokenRun } from "./prompt-lookup.js";
import type { TokenMetadata } from "./token-probabilities.js";

/**
 * Speculation backs off when the context is busy: the guessed tokens of one batch, at most this many, are
 * shared among the evaluations on the loop (16 each for four; a lone one may take STEP_GUESSES_MAX), so
 * that the steps of several streams do not grow into a prompt's batch. The step then keeps what its measured
 * costs say is worth it (step-costs.ts). On a CPU larger steps cost less a token up to 20 to 30 tokens and
 * about the same beyond: with guesses 16 at most and 64 a batch instead of 8 and 32, bench:spec's echo
 * answer was 1.11 times as fast alone and 1.18 with four streams (an A/B of the two, docs/performance.md
 * section 33); 32 a batch against 16 had given four streams 1.11.
 */
export const SPECULATION_BATCH_GUESSES = 64;
/**
 * One sequence's guesses in a step, at most: with its token, fewer than the 64 queries of a sequence from
 * which llama.cpp's flash attention takes its tiled kernel, whose sums differ from a lone token's. Below that,
 * `svc engine build`'s kernel gives a token the same logits in a step of any shape, so a kept guess is the token
 * the model writes alone (docs/performance.md section 47).
 */
export const STEP_GUESSES_MAX = 62;
/**
 * And by how often its guesses are kept. Each guessed position costs a token of the batch, and the i-th guess
 * of a step is kept with about keepRate^i (every guess before it must be right): a step guesses only as far
 * as that stays at least SPECULATION_KEEP_ALONE (a lone sequence: its decode reads the weights for one token
 * and a few more cost little) or SPECULATION_KEEP_BUSY (several: their steps already fill the batch, and on
 * a CPU each guess costs nearly a token's time, so only guesses that are nearly always kept pay: bench:spec's
 * peer model, whose loops keep 83%, ran four streams at 0.73 to 0.94 of their speed without guesses at 0.5).
 * keepRate starts at the loop's recent rate (KeepRateHistory; SPECULATION_FIRST_KEEP_RATE at least) and
 * follows each verification's share of kept positions (docs/performance.md section 27). Tuned on a 2-core CPU;
 * a GPU, whose decode of a few more tokens costs little even when busy, would take more (not measured: no GPU
 * was lent). These bound what is offered; the step then keeps what its measured costs say is worth it
 * (step-costs.ts, section 31).
 */
export const SPECULATION_KEEP_ALONE = 0.15;
export const SPECULATION_KEEP_BUSY = 0.85;
export const SPECULATION_FIRST_KEEP_RATE = 0.9;

/**
 * And when its guesses fail: after a verification that accepted none, a sequence makes no guess for the next
 * 2, 4, 8, ... tokens (at most this many), until one is accepted again.
 */
export const SPECULATION_MAX_WAIT = 64;

/**
 * And a lone evaluation's solo runs (the engine build's, slot-loop.ts `solo`): its tokens come from one only
 * after this many in a row had nothing to guess. A run that a guess ends soon after it starts costs a handover
 * of the context each way; an answer that repeats its prompt finds its first guess within a token or two of
 * its start, and its next within a token or two of a refused one (an edit, a repeated bigram of its own): every
 * such answer used to start with a run that the first guess ended after 1 to 3 tokens (docs/performance.md,
 * section 42). Stretches with nothing to repeat still go solo.
 */
export const SPECULATION_SOLO_AFTER = 4;

/**
 * How many guesses a step may check for a track that keeps a guessed position with probability `keepRate`:
 * as far as the chance of reaching that position stays at the threshold for the evaluations on the loop.
 */
export function guessLength(keepRate: number, live: number): number {
  const threshold = live <= 1 ? SPECULATION_KEEP_ALONE : SPECULATION_KEEP_BUSY;
  if (keepRate >= 1) return Number.MAX_SAFE_INTEGER;
  if (keepRate <= threshold) return 0;
  return Math.floor(Math.log(threshold) / Math.log(keepRate));
}

/**
 * A token bias read per token (node-llama-cpp calls it before each sampling) that can also say what it will
 * be once tokens the generation has not taken yet are taken (`after`): a grammar phase's UTF-8 guard
 * (generation-sampling.ts), whose bans follow the bytes written so far. With it, a guessed position is
 * sampled with the bias the token-by-token path would have then, so grammar phases can take guesses.
 */
export type LookaheadBias = (() => TokenBias) & { after(pending: readonly Token[]): TokenBias };

export function isLookaheadBias(bias: SequenceEvaluateOptions["tokenBias"]): bias is LookaheadBias {
  return typeof bias === "function" && typeof (bias as Partial<LookaheadBias>).after === "function";
}

/**
 * Whether a guessed position is sampled exactly as the token-by-token path would sample it, so that the
 * evaluation may take guesses: nothing reported with a token (probabilities), no repeat penalties (they read
 * the tokens the generation has taken in, which a verification runs ahead of), and a bias function only
 * where it can be read for the guesses before the position (a LookaheadBias). A grammar's state needs
 * nothing: the binding's sampling takes each sampled token into it, and a verification samples each position
 * in order up to the first guess refused, as the token-by-token path would.
 */
export function takesGuesses(options: SequenceEvaluateOptions, metadata: Pick<TokenMetadata, "probabilities" | "confidence">): boolean {
  return (
    !options.repeatPenalty &&
    !options.dryRepeatPenalty &&
    (typeof options.tokenBias !== "function" || isLookaheadBias(options.tokenBias)) &&
    !metadata.probabilities &&
    !metadata.confidence
  );
}

/** What prompt lookup reads besides the sequence's own tokens, for one evaluation. */
export interface SpeculationLookup {
  /** Tokens the answer is expected to repeat (Chat's `prediction`): guesses from them are asked for. */
  prediction?: readonly Token[];
  /**
   * The request's texts as a JSON string quotes them (jsonQuotedText, tokenized), made at the first guess:
   * for an answer that may write JSON (tools, structured output).
   */
  quoted?: () => readonly Token[];
}

/**
 * What prompt lookup reads before the sequence for a prediction: the prompt's last tokens (the assistant turn's
 * opening, which the answer follows), then the prediction, so that the answer's first tokens find it too.
 * `held`: the sequence's tokens; `feed`: the evaluation's first feed.
 */
export function predictionPrefix(held: readonly Token[], feed: readonly Token[], prediction: readonly Token[] | undefined): Token[] {
  if (!prediction || prediction.length === 0) return [];
  const tail = feed.length >= PREDICTION_ANCHOR ? feed.slice(-PREDICTION_ANCHOR) : [...held.slice(-(PREDICTION_ANCHOR - feed.length)), ...feed];
  return [...tail, ...prediction];
}
const PREDICTION_ANCHOR = 3;

/** A draft model's guesses for one step, at most (llama-server's --draft-max default). */
export const DRAFT_MODEL_MAX_GUESSES = 16;

/**
 * What a new evaluation on the loop expects of its guesses before its first verification: how often the
 * loop's recent verifications kept theirs (each one's share of kept positions, weighted 0.1 against what came
 * before), never less than SPECULATION_FIRST_KEEP_RATE. A client sends the same kind of request again (an
 * agent's edits, a batch of rewrites), and an evaluation that starts at 0.9 guesses little at first: with
 * several on the loop (the SPECULATION_KEEP_BUSY threshold) one guess, then 2, 3, 4, 6, 9, 13 as its
 * verifications keep them, most of a 128-token answer (docs/performance.md section 34). Starting where the
 * loop's last evaluations ended, it guesses as far at once; one refused step brings its own rate down.
 */
export class KeepRateHistory {
  private rate = SPECULATION_FIRST_KEEP_RATE;

  /** The keep rate a new evaluation starts with. */
  get first(): number {
    return Math.max(SPECULATION_FIRST_KEEP_RATE, this.rate);
  }

  /** A verification kept this share of the positions it checked. */
  record(share: number): void {
    this.rate = 0.9 * this.rate + 0.1 * share;
  }
}

/**
 * One evaluation's guessing: where its guesses come from (prompt lookup's index of its sequence's bigrams, made
 * at the first guess, or a draft model), how often its guessed positions were kept (keepRate), and its
 * back-off after verifications that kept none.
 */
export class Guesser {
  private rate: number;
  /** Verifications in a row that kept no guess. */
  private misses = 0;
  /** Tokens to go before the next guess. */
  private wait = 0;
  /** Tokens in a row with no guess (none found, or the back-off waiting), since the evaluation started. */
  private unguessed = 0;
  /** Steps in a row whose price dropped every guess of a draft model's (see droppedByPrice). */
  private dropped = 0;
  private lookup: PromptLookupIndex | null = null;

  /**
   * `draftModel`: guesses from it (for the served sequence `sequenceId`) instead of prompt lookup.
   * `lookupPrefix`: tokens prompt lookup also reads, as if they came before the sequence (Chat's `prediction`).
   * `history`: the loop's, which its keep rate starts from and its verifications add to.
   * `quoted`: more tokens prompt lookup reads before the sequence (and before `lookupPrefix`), asked for at the
   * first guess: the request's texts as a JSON string quotes them (jsonQuotedText).
   */
  constructor(
    private readonly draftModel: DraftSource | null = null,
    private readonly sequenceId = 0,
    private readonly lookupPrefix: readonly number[] = [],
    private readonly history: KeepRateHistory | null = null,
    private readonly quoted: (() => readonly number[]) | null = null,
  ) {
    this.rate = history?.first ?? SPECULATION_FIRST_KEEP_RATE;
  }

  /**
   * The tokens prompt lookup guesses to follow `token` after `context` (the sequence's tokens), at most
   * `limit` and this evaluation's share of SPECULATION_BATCH_GUESSES among the `live` evaluations on the loop;
   * none while the back-off waits or guesses are kept too seldom to be worth a position. Each call is a
   * token: the back-off counts it. A draft model's guesses come later (a promise): it writes them first.
   */
  guess(context: readonly number[], token: Token, limit: number, live: number): Token[] | Promise<Token[]> {
    const guessed = this.proposal(context, token, limit, live);
    if (Array.isArray(guessed) && guessed.length === 0) this.unguessed++;
    else this.unguessed = 0;
    return guessed;
  }

  private proposal(context: readonly number[], token: Token, limit: number, live: number): Token[] | Promise<Token[]> {
    if (this.wait > 0) {
      this.wait--;
      return [];
    }
    const length = guessLength(this.rate, live);
    if (length === 0) {
      // Too few kept to be worth a position: no guess, and the estimate drifts back up by each token, so that
      // a later stretch the conversation repeats is tried again.
      this.declined();
      return [];
    }
    const most = this.draftModel ? DRAFT_MODEL_MAX_GUESSES : PROMPT_LOOKUP_DEFAULTS.maxDraft;
    const maxDraft = Math.min(most, STEP_GUESSES_MAX, Math.floor(SPECULATION_BATCH_GUESSES / Math.max(1, live)), limit, length);
    if (maxDraft <= 0) return [];
    // A copy: the draft model reads it later, when the sequence may have changed.
    if (this.draftModel) return this.draftModel.draft(this.sequenceId, [...(context as readonly Token[]), token], maxDraft);
    return this.index().draft(context, token, maxDraft) as Token[];
  }

  /** How often this evaluation's guessed positions have been kept, as the step pricing them reads it (step-costs.ts). */
  get keepRate(): number {
    return this.rate;
  }

  /** Whether its guesses come from what the request said the answer would be (Chat's `prediction`). */
  get predicted(): boolean {
    return this.lookupPrefix.length > 0;
  }

  /**
   * Its guesses were not checked (too seldom kept to be worth their place, or the step's price dropped them):
   * with no verification to learn from, an estimate under where evaluations start drifts back up by each
   * token, so that a later stretch that repeats is tried again; one above it stays (it used to drift down as
   * well: four tool-call streams out of step, whose guesses the price of a second pass dropped, went from
   * 0.93 to 0.90 and guessed one token where they had guessed two).
   */
  declined(): void {
    const start = this.history?.first ?? SPECULATION_FIRST_KEEP_RATE;
    if (this.rate < start) this.rate += 0.05 * (start - this.rate);
  }

  /**
   * A step's price dropped every guess it offered (step-costs.ts: the step was cheaper a token without them).
   * Declined, and where the evaluation was `alone` in the step, a draft model, whose guesses cost its own
   * decodes before the step may start, is not asked again for the next 2, 4, 8, ... tokens (at most
   * SPECULATION_MAX_WAIT), until a step checks its guesses again: where the machine's prices keep refusing
   * them (a CPU whose passes cost nearly a token each, a busy one) it was asked at every token and each answer
   * paid its drafts for nothing. Not with other sequences in the step: their waits would fall out of step, and
   * a step whose sequences bring unequal tokens is more passes (step-costs.ts), which the price then refuses
   * for the others' guesses too. Prompt lookup's guesses cost a look in an index: it keeps offering them.
   */
  droppedByPrice(alone: boolean): void {
    this.declined();
    if (!this.draftModel || !alone) return;
    this.dropped++;
    this.wait = Math.min(SPECULATION_MAX_WAIT, 2 ** this.dropped);
  }

  private index(): PromptLookupIndex {
    return (this.lookup ??= new PromptLookupIndex(PROMPT_LOOKUP_DEFAULTS, this.quoted ? [...this.quoted(), ...this.lookupPrefix] : this.lookupPrefix));
  }

  /** Whether a lone evaluation would guess after `token` now (a solo run gives way to a step with guesses). */
  wouldGuess(context: TokenRun, token: Token): boolean {
    // A draft model's guesses are not known before it writes them: a step asks it.
    if (this.draftModel) return this.wait === 0 && guessLength(this.rate, 1) > 0;
    return this.wait === 0 && guessLength(this.rate, 1) > 0 && this.index().draft(context, token, 1).length > 0;
  }

  /**
   * Whether it would guess after the last token a solo run sampled: the sequence's tokens (`held`), the run's
   * feed and the tokens sampled before that one are the context, read where they are (asked at each delivery of
   * the run: a copy would be a coding agent's whole context each time). (The run then gives way to steps with guesses.)
   */
  wouldGuessAfterRun(held: readonly Token[], feed: readonly Token[], sampled: readonly Token[]): boolean {
    if (sampled.length === 0) return false;
    return this.wouldGuess(joinTokens(held, feed, sampled.slice(0, -1)), sampled.at(-1)!);
  }

  /** A token made without a step of the loop's (a solo run's): the back-off counts it. */
  passed(): void {
    if (this.wait > 0) this.wait--;
    this.unguessed++;
  }

  /** Whether a lone evaluation's next tokens may come from a solo run: SPECULATION_SOLO_AFTER tokens in a row had no guess. */
  get settled(): boolean {
    return this.unguessed >= SPECULATION_SOLO_AFTER;
  }

  /** A verification checked `drafted` guesses and kept the first `kept` of them. */
  checked(drafted: number, kept: number): void {
    // The positions checked: those kept, and the one that refused its guess (none when all were kept).
    const share = kept / Math.min(drafted, kept + 1);
    this.rate = 0.7 * this.rate + 0.3 * share;
    this.history?.record(share);
    this.dropped = 0;
    if (kept > 0) this.misses = 0;
    else {
      this.misses++;
      this.wait = Math.min(SPECULATION_MAX_WAIT, 2 ** this.misses);
    }
  }
}
