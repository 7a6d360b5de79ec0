// The slot loop's step pricing (server/engine/step-costs.ts): llama.cpp's split of a batch into passes over
// the weights, the costs measured by pass size, and how many guesses a step keeps. The costs in these tests
// are the ones measured on the 0.8B Q4_K_M model at 1 thread (docs/performance.md section 31).
import { describe, expect, it } from "vitest";
import { keptGuesses, microBatches, STEP_COST_EXPLORE_EVERY, STEP_COST_WINDOW, StepCosts, type StepPart } from "../../server/engine/step-costs.js";

const parts = (...shape: Array<[tokens: number, guesses: number, keepRate: number]>): StepPart[] =>
  shape.map(([tokens, guesses, keepRate], sequence) => ({ sequence, tokens, guesses, keepRate }));

/** The model's measured passes: 1 token 100 ms, 2 to 4 tokens 170, 8 tokens 200. */
function measured(): StepCosts {
  const costs = new StepCosts();
  for (const [size, ms] of [[1, 100], [2, 170], [4, 170], [8, 200]] as const) costs.record(size, ms);
  return costs;
}

describe("microBatches", () => {
  it("takes the same count from each of a run of consecutive sequences (one KV cache per sequence)", () => {
    const seqs = (...tokens: number[]) => tokens.map((t, sequence) => ({ sequence, tokens: t }));
    expect(microBatches(seqs(1, 1, 1, 1), false, 512)).toEqual([4]);
    expect(microBatches(seqs(2, 2, 2, 2), false, 512)).toEqual([8]);
    // One sequence with a guess among three without: a second pass for it alone.
    expect(microBatches(seqs(2, 1, 1, 1), false, 512)).toEqual([4, 1]);
    // Two with a guess, not next to each other: a pass for each.
    expect(microBatches(seqs(1, 2, 1, 2), false, 512)).toEqual([4, 1, 1]);
    expect(microBatches(seqs(1, 2, 2, 1), false, 512)).toEqual([4, 2]);
    // A prompt beside three steps: one token of it in the steps' pass, the rest after.
    expect(microBatches(seqs(1, 190, 1, 1), false, 512)).toEqual([4, 189]);
  });

  it("starts a new pass where the sequence ids are not consecutive", () => {
    expect(microBatches([{ sequence: 0, tokens: 1 }, { sequence: 2, tokens: 1 }, { sequence: 3, tokens: 1 }], false, 512)).toEqual([1, 2]);
  });

  it("keeps each pass within the micro-batch size", () => {
    expect(microBatches([{ sequence: 0, tokens: 600 }], false, 512)).toEqual([512, 88]);
    expect(microBatches([{ sequence: 0, tokens: 300 }, { sequence: 1, tokens: 300 }], false, 512)).toEqual([512, 88]);
  });

  it("cuts a unified cache's batch by size alone", () => {
    expect(microBatches([{ sequence: 0, tokens: 2 }, { sequence: 1, tokens: 1 }, { sequence: 3, tokens: 1 }], true, 512)).toEqual([4]);
    expect(microBatches([{ sequence: 0, tokens: 600 }], true, 512)).toEqual([512, 88]);
  });
});

describe("StepCosts", () => {
  it("prices nothing before a measurement", () => {
    expect(new StepCosts().pass(4)).toBeNull();
    expect(new StepCosts().estimate([4])).toBeNull();
  });

  it("prices an unmeasured size on the line between the measured sizes around it, on the line drawn on above them all, and as the smallest below them", () => {
    const costs = new StepCosts();
    costs.record(4, 170);
    expect(costs.pass(16)).toBe(170); // one size measured: hopeful, so that a larger one gets tried
    costs.record(8, 200);
    expect(costs.pass(6)).toBe(185);
    expect(costs.pass(5)).toBe(177.5);
    expect(costs.pass(16)).toBe(260);
    expect(costs.pass(1)).toBe(170);
    expect(costs.estimate([4, 1])).toBe(340);
  });

  it("does not walk a lone stream's steps down one size at a time (each size under a measured one priced as the one far below)", () => {
    // An echo stream on a CPU (F32, 2 threads): a step of n tokens costs about 5 + 0.95 n ms. Measured: a
    // short step at the end of an answer, a re-fed step of 16, and the usual 17 (16 guesses).
    const costs = new StepCosts();
    costs.record(8, 12.4);
    costs.record(16, 18.3);
    costs.record(17, 20);
    const step = parts([1, 16, 0.97]);
    // Sizes 9 to 15 are on the line from 8 to 16: none is cheaper a token than 16 itself.
    expect(keptGuesses(step, costs, false, 512)).toEqual([15]);
    // Priced as a larger size's neighbour below (the rule before), 15 cost 12.4 ms and looked best.
    const truth = (n: number) => 5 + 0.95 * n;
    let kept = 15;
    for (let i = 0; i < 12; i++) {
      const k = keptGuesses(step, costs, false, 512)[0]!;
      costs.record(1 + k, truth(1 + k));
      kept = Math.min(kept, k);
    }
    expect(kept).toBeGreaterThanOrEqual(15);
  });

  it("takes the lower quartile of a size's last measurements: slow decodes do not make it dear", () => {
    const costs = new StepCosts();
    costs.record(4, 400); // a first decode slowed by page faults
    expect(costs.pass(4)).toBe(400);
    costs.record(4, 170);
    expect(costs.pass(4)).toBe(170);
    costs.record(4, 180);
    costs.record(4, 900); // a busy core
    costs.record(4, 185);
    expect(costs.pass(4)).toBe(180); // the second fastest of the last 5
    // The machine slows down for good: priced so once four of the last STEP_COST_WINDOW are slower.
    for (let i = 0; i < 2; i++) costs.record(4, 300);
    expect(costs.pass(4)).toBe(185);
    costs.record(4, 300);
    expect(costs.pass(4)).toBe(300);
    for (let i = 0; i < STEP_COST_WINDOW; i++) costs.record(4, 310);
    expect(costs.pass(4)).toBe(310);
  });

  it("keeps a lone stream's usual step after three slow decodes of it in a row (a busy moment, not a dearer size)", () => {
    // An echo stream (F32, 2 threads, about 5 + 0.95 n ms a step of n tokens): steps of 17 tokens, a few of 11
    // and 8 at the ends of runs, then three 17-token decodes of 29 to 32 ms (docs/performance.md section 34's trace).
    const truth = (n: number) => 5 + 0.95 * n;
    const costs = new StepCosts();
    costs.record(8, truth(8));
    costs.record(11, truth(11));
    for (const ms of [truth(17), truth(17) + 0.5, 29, 31, 32]) costs.record(17, ms);
    const step = parts([1, 16, 0.99]);
    expect(keptGuesses(step, costs, false, 512)).toEqual([16]);
    // Priced at 29 ms (the lower median of those five), the usual step looked dearer a token than one of 11.
    const median = new StepCosts();
    median.record(8, truth(8));
    median.record(11, truth(11));
    median.record(17, 29);
    expect(keptGuesses(step, median, false, 512)[0]).toBeLessThan(16);
  });

  it("prices many guesses on a CPU where a token costs nearly a pass as dear as they are, not as the largest size measured", () => {
    // docs/performance.md section 38: the 0.8B Q4_K_M model without AMX, a lone answer at a 460-token context.
    const costs = new StepCosts();
    for (const [size, ms] of [[1, 41], [2, 70], [4, 123]] as const) costs.record(size, ms);
    expect(costs.pass(27)).toBeGreaterThan(500); // it took 570 ms; priced as 4 tokens (123) before
    expect(keptGuesses(parts([1, 26, 0.9]), costs, false, 512)[0]).toBeLessThan(10);
  });

  it("explores the most guesses within half the best rate, once the decodes since the last took STEP_COST_EXPLORE_EVERY times its price", () => {
    const costs = measured();
    // Three sequences without a guess and one with: its guess makes the step two passes (270 ms for 4.9
    // tokens expected, against 170 for 4): best dropped, but within half the best rate, so explored now and then.
    const dear = parts([1, 1, 0.9], [1, 0, 0.9], [1, 0, 0.9], [1, 0, 0.9]);
    const explored: number[] = [];
    let since = 640; // measured()'s own decodes
    for (let step = 0; step < 60; step++) {
      if (keptGuesses(dear, costs, false, 512)[0] === 1) {
        expect(since).toBeGreaterThanOrEqual(STEP_COST_EXPLORE_EVERY * 270);
        explored.push(step);
        since = 0;
        continue; // two passes: not recorded
      }
      costs.record(4, 170);
      since += 170;
    }
    expect(explored).toHaveLength(2);
    // A step far below half the best rate is never explored: 26 guesses for a sequence that keeps 1 in 10.
    const lone = new StepCosts();
    for (const [size, ms] of [[1, 41], [2, 70], [4, 123], [27, 570]] as const) lone.record(size, ms);
    for (let i = 0; i < 100; i++) lone.record(1, 41);
    const kept = Array.from({ length: 50 }, () => keptGuesses(parts([1, 26, 0.1]), lone, false, 512)[0]);
    expect(kept.every((k) => k! <= 1)).toBe(true);
  });

  it("leaves out each size's first decode when warming up (a new graph's allocation), so a cold price does not stick", () => {
    // The 17 MB Q4_K_M echo model: a first 65-token step took 56 ms, 25 ms once warm (section 38).
    const costs = new StepCosts({ warmUp: true });
    costs.record(17, 30);
    expect(costs.pass(17)).toBeNull();
    costs.record(17, 12);
    expect(costs.pass(17)).toBe(12);
    costs.record(65, 56);
    expect(costs.pass(65)).toBe(12); // still priced hopefully: tried again
    costs.record(65, 25);
    expect(costs.pass(65)).toBe(25);
  });

  it("ignores measurements that are not durations", () => {
    const costs = new StepCosts();
    costs.record(4, Number.NaN);
    costs.record(0, 10);
    costs.record(4, -1);
    expect(costs.pass(4)).toBeNull();
  });
});

describe("keptGuesses", () => {
  it("keeps every guess before anything is measured (the step measures)", () => {
    expect(keptGuesses(parts([1, 3, 0.9], [1, 0, 0.9]), new StepCosts(), false, 512)).toEqual([3, 0]);
  });

  it("drops one sequence's guess that would cost a second pass for the other three", () => {
    // 4 tokens in 170 ms against 4.9 in 270.
    expect(keptGuesses(parts([1, 1, 0.9], [1, 0, 0.9], [1, 0, 0.9], [1, 0, 0.9]), measured(), false, 512)).toEqual([0, 0, 0, 0]);
  });

  it("keeps guesses all four sequences bring, in one pass", () => {
    // 4 + 4 x 0.9 tokens in 200 ms against 4 in 170.
    expect(keptGuesses(parts([1, 1, 0.9], [1, 1, 0.9], [1, 1, 0.9], [1, 1, 0.9]), measured(), false, 512)).toEqual([1, 1, 1, 1]);
  });

  it("trims every sequence to the guesses they share", () => {
    // 2 each: one pass of 12 (priced as 8's 200 ms) for 4 + 4 x 1.71; 3 for the first would add a pass.
    expect(keptGuesses(parts([1, 3, 0.9], [1, 2, 0.9], [1, 2, 0.9], [1, 2, 0.9]), measured(), false, 512)).toEqual([2, 2, 2, 2]);
  });

  it("with a unified cache, keeps an uneven guess the passes do not grow for", () => {
    expect(keptGuesses(parts([1, 1, 0.9], [1, 0, 0.9], [1, 0, 0.9], [1, 0, 0.9]), measured(), true, 512)).toEqual([1, 0, 0, 0]);
  });

  it("lets a lone sequence guess as far as its keep rate pays for the larger pass", () => {
    // 100 ms for 1 token; 170 ms for 2 to 4.
    expect(keptGuesses(parts([1, 3, 0.95]), measured(), false, 512)).toEqual([3]);
    expect(keptGuesses(parts([1, 3, 0.3]), measured(), false, 512)).toEqual([0]);
  });

  it("guesses freely where a larger pass costs what one token does (a model whose weights are the cost)", () => {
    const flat = new StepCosts();
    for (const size of [1, 2, 4, 8]) flat.record(size, 10);
    expect(keptGuesses(parts([1, 4, 0.5]), flat, false, 512)).toEqual([4]);
  });

  it("keeps every guess a request asked for (a prediction), and prices the others around them", () => {
    const asked = parts([1, 3, 0.3], [1, 1, 0.9], [1, 0, 0.9], [1, 0, 0.9]);
    asked[0]!.asked = true;
    // The prediction's 3 are kept though seldom right; the other's guess would split the step further.
    expect(keptGuesses(asked, measured(), false, 512)).toEqual([3, 0, 0, 0]);
    expect(keptGuesses([{ ...asked[0]! }], measured(), false, 512)).toEqual([3]);
    // The others' guesses fill the pass the prediction's guess makes: one pass of 8 instead of 4 + 1.
    const filled = parts([1, 1, 0.3], [1, 1, 0.9], [1, 1, 0.9], [1, 1, 0.9]);
    filled[0]!.asked = true;
    expect(keptGuesses(filled, measured(), false, 512)).toEqual([1, 1, 1, 1]);
  });

  it("keeps no guess where none is offered", () => {
    expect(keptGuesses(parts([1, 0, 0.9], [1, 0, 0.9]), measured(), false, 512)).toEqual([0, 0]);
  });
});
