// What a step of the slot loop costs, measured as it runs, and how many of speculation's guesses are worth
// their place in it (issue 37's four streams, issue 44's guesses). Pure: the loop (slot-loop.ts) hands in the
// shape of each batch and how long its decode took, and asks, before a step with guesses, how many to keep.
//
// Two facts behind it, measured on a 0.8B Q4_K_M model at 1 thread (docs/performance.md section 31):
// - llama.cpp splits a batch into micro-batches, and each is a pass over every weight. With one KV cache per
//   sequence (node-llama-cpp 3.22 always makes one per sequence) the split is llama.cpp's "equal, sequential"
//   one: a micro-batch takes the same number of tokens from each of a run of consecutive sequence ids. A step
//   where one sequence brings a guess and three do not is two passes: 282 ms against 175 for the four tokens
//   alone and 201 for two tokens from each of the four.
// - What a pass costs by its size depends on the weights and the CPU: on that model 100 ms for one token, 170
//   for two to four (AMX tiles), 200 for eight; on an F32 model two tokens cost about what one does.
// So a guess is kept where the tokens it is expected to add are worth what the step then costs, priced with
// the costs this loop has measured on this model and machine, not with a constant tuned on another.

/** One sequence's part of a step: its id, the tokens it decodes without guesses, and its guesses. */
export interface StepPart {
  sequence: number;
  /** Tokens decoded whatever is guessed (a sampled token, or a short feed). */
  tokens: number;
  /** Guesses offered to follow them. */
  guesses: number;
  /** How often this sequence's guessed positions have been kept (Guesser.keepRate); 0 where it has none. */
  keepRate: number;
  /** Guesses the request asked for (Chat's `prediction`): kept whatever they cost, as OpenAI's are. */
  asked?: boolean;
}

/**
 * The micro-batches llama.cpp makes of a batch, by size, in order. `parts` in the batch's order (ascending
 * sequence ids, as the loop sends them). One KV cache for all sequences (`unified`): runs of `nUbatch`
 * tokens. One per sequence: llama.cpp's `split_equal(n_ubatch, sequential = true)`: the first sequence with
 * tokens left and each next one whose id is one more than the last taken, the same count from each (the
 * least any of them has left, within `nUbatch`).
 */
export function microBatches(parts: ReadonlyArray<{ sequence: number; tokens: number }>, unified: boolean, nUbatch: number): number[] {
  const total = parts.reduce((n, p) => n + p.tokens, 0);
  if (unified) {
    const sizes: number[] = [];
    for (let left = total; left > 0; left -= nUbatch) sizes.push(Math.min(left, nUbatch));
    return sizes;
  }
  const left = parts.map((p) => ({ sequence: p.sequence, tokens: p.tokens }));
  const sizes: number[] = [];
  for (;;) {
    const set: typeof left = [];
    for (const p of left) {
      if (p.tokens <= 0) continue;
      if (set.length === 0 || p.sequence === set.at(-1)!.sequence + 1) set.push(p);
    }
    if (set.length === 0) return sizes;
    const each = Math.max(1, Math.min(Math.min(...set.map((p) => p.tokens)), Math.floor(nUbatch / set.length)));
    for (const p of set) p.tokens -= each;
    sizes.push(each * set.length);
  }
}

/**
 * A size's cost is the lower quartile of its last few measurements (the second fastest of 5): single decodes
 * are noisy (a page fault, a busy core, the first decode of a size allocating, a client's burst of work), and
 * a few slow ones in a row must not make the usual size look dear (with the lower median, three slow 17-token
 * decodes made a lone echo stream take steps of 10 for six steps, docs/performance.md section 34); machines
 * drift, so the window moves, and a size that has really become dearer is priced so after four measurements.
 */
export const STEP_COST_WINDOW = 5;

/**
 * Exploring: now and then a step keeps more or fewer guesses than the prices say pays, so that a size priced
 * too dear once (a slow decode) is measured again instead of avoided for good. Such a step is one whose
 * expected tokens a millisecond are at least STEP_COST_EXPLORE_FLOOR of the best step's, and it is taken only
 * once the decodes since the last one took STEP_COST_EXPLORE_EVERY times its price: exploring then costs at
 * most about 1/17 of the time at half the speed, about 3%. Before, every 16th step kept every guess: on a CPU
 * where a token costs nearly a whole pass (no AMX) one such step of 26 guesses took 570 ms, the time of 14
 * plain steps, and a lone answer ran a fifth slower with speculation on than off (docs/performance.md section 38).
 */
export const STEP_COST_EXPLORE_EVERY = 16;
export const STEP_COST_EXPLORE_FLOOR = 0.5;

export interface StepCostsOptions {
  /**
   * Leaves out each size's first decode: a size new to the context is a new graph for llama.cpp (built and
   * allocated on that decode) and its first decode can take twice what it takes warm (a 17 MB Q4_K_M model:
   * 56 ms for a first 65-token step, 25 ms after), a price that would then keep it from being tried again.
   */
  warmUp?: boolean;
}

/** The cost of a pass over the weights by its size, as measured on this loop's decodes. */
export class StepCosts {
  private readonly ms = new Map<number, number[]>();
  /** Sizes decoded once (options.warmUp): the next decode of each is measured. */
  private readonly seen = new Set<number>();
  /** Milliseconds decoded since the last exploring step. */
  private spent = 0;

  constructor(private readonly options: StepCostsOptions = {}) {}

  /** A decode of one micro-batch of `size` tokens took `ms`. (Decodes of several passes are not recorded.) */
  record(size: number, ms: number): void {
    if (!(size > 0) || !(ms >= 0) || !Number.isFinite(ms)) return;
    this.spent += ms;
    if (this.options.warmUp && !this.seen.has(size)) {
      this.seen.add(size);
      return;
    }
    const last = this.ms.get(size) ?? [];
    last.push(ms);
    if (last.length > STEP_COST_WINDOW) last.shift();
    this.ms.set(size, last);
  }

  /** Whether a step that explores, priced `ms`, may be taken now (and if so, counts it taken). */
  mayExplore(ms: number): boolean {
    if (this.spent < STEP_COST_EXPLORE_EVERY * ms) return false;
    this.spent = 0;
    return true;
  }

  private cost(size: number): number | undefined {
    const last = this.ms.get(size);
    if (!last) return undefined;
    const sorted = [...last].sort((a, b) => a - b);
    return sorted[Math.floor((sorted.length - 1) / 4)];
  }

  /**
   * What a pass of `size` tokens costs: its own measurement; else, between two measured sizes, the line
   * between their costs; else, larger than any measured, the line through the smallest and the largest
   * measured, drawn on (at least the largest's cost; with one size measured, its cost: hopeful, so that a
   * larger size gets tried and measured); else, smaller than any measured, the smallest's (a pass of fewer
   * tokens costs no more); null before any measurement. Not the cost of the next smaller size alone: priced
   * that way, a size just under a measured one looked as cheap as the much smaller size below it, so each
   * step tried the next size down (an echo stream's steps of 17 tokens went 16, 15, 14, ... 8 while each was
   * measured once; docs/performance.md section 34). Nor, above the largest, the largest's cost alone: on a
   * CPU where a token costs nearly a pass, 26 guesses were priced as 4 tokens and took 570 ms (section 38).
   */
  pass(size: number): number | null {
    const own = this.cost(size);
    if (own !== undefined) return own;
    let belowSize = 0;
    let aboveSize = Number.POSITIVE_INFINITY;
    let smallest = Number.POSITIVE_INFINITY;
    for (const s of this.ms.keys()) {
      if (s < size && s > belowSize) belowSize = s;
      if (s > size && s < aboveSize) aboveSize = s;
      if (s < smallest) smallest = s;
    }
    const below = this.cost(belowSize);
    const above = this.cost(aboveSize);
    if (below !== undefined && above !== undefined) return below + ((above - below) * (size - belowSize)) / (aboveSize - belowSize);
    if (below !== undefined && smallest < belowSize) {
      const low = this.cost(smallest)!;
      return Math.max(below, below + ((below - low) * (size - belowSize)) / (belowSize - smallest));
    }
    return below ?? above ?? null;
  }

  /** What a batch that llama.cpp splits into these passes costs; null where a pass cannot be priced. */
  estimate(sizes: readonly number[]): number | null {
    let sum = 0;
    for (const size of sizes) {
      const ms = this.pass(size);
      if (ms === null) return null;
      sum += ms;
    }
    return sum;
  }
}

/**
 * Prices that never price: every guess is kept, as before steps priced them. For tests that count guesses
 * (the engine's SVC_ENGINE_TEST_KEEP_GUESSES, test/support/step-costs.ts), so that the count does not depend
 * on how fast the machine decoded the last steps.
 */
export class UnpricedStepCosts extends StepCosts {
  override record(): void {}
  override mayExplore(): boolean {
    return false;
  }
  override pass(): number | null {
    return null;
  }
}

/** Tokens a part is expected to yield with `kept` guesses: its token, and the i-th guess with keepRate^i. */
function expectedTokens(part: StepPart, kept: number): number {
  let sum = 1;
  let reach = 1;
  for (let i = 0; i < kept; i++) sum += reach *= part.keepRate;
  return sum;
}

/**
 * How many of each part's guesses a step keeps: every part keeps at most the same number k (more than a part
 * has, it keeps all of its own), with k chosen for the most tokens expected per millisecond of the step's
 * passes (`costs`); all of them while nothing is measured yet (the step then measures; once one size is,
 * `StepCosts.pass` prices every size).
 * Now and then (`StepCosts.mayExplore`) the step takes instead the most guesses, other than the best count,
 * whose rate is at least STEP_COST_EXPLORE_FLOOR of the best's, to measure that size again. Guesses a
 * request asked for (`asked`) are all kept, and the others priced around them. Parts whose `tokens` are not
 * one sampled token (a feed) are decoded as they are; their tokens count as one, the one they sample.
 */
export function keptGuesses(parts: readonly StepPart[], costs: StepCosts, unified: boolean, nUbatch: number): number[] {
  const most = Math.max(0, ...parts.map((p) => (p.asked ? 0 : p.guesses)));
  if (most === 0) return parts.map((p) => p.guesses);
  const keep = (p: StepPart, k: number) => (p.asked ? p.guesses : Math.min(p.guesses, k));
  const rates: number[] = [];
  const prices: number[] = [];
  let bestK = most;
  let bestRate = -1;
  for (let k = 0; k <= most; k++) {
    const kept = parts.map((p) => keep(p, k));
    const ms = costs.estimate(microBatches(parts.map((p, i) => ({ sequence: p.sequence, tokens: p.tokens + kept[i]! })), unified, nUbatch));
    if (ms === null) return parts.map((p) => p.guesses);
    prices.push(ms);
    rates.push(parts.reduce((n, p, i) => n + expectedTokens(p, kept[i]!), 0) / Math.max(ms, 1e-3));
    // Ties go to fewer guesses: a guess must pay for its place.
    if (rates[k]! > bestRate * (1 + 1e-9)) [bestK, bestRate] = [k, rates[k]!];
  }
  for (let k = most; k >= 0; k--) {
    if (k === bestK || rates[k]! < STEP_COST_EXPLORE_FLOOR * bestRate) continue;
    if (costs.mayExplore(prices[k]!)) return parts.map((p) => keep(p, k));
    break;
  }
  return parts.map((p) => keep(p, bestK));
}
