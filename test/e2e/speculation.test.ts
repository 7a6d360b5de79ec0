// Speculation in the slot loop (issue 44): prompt lookup's guesses are decoded with the sampled token and
// checked position by position, and a guess is kept exactly when the model would have written it. So the
// tokens are the same with speculation on and off (greedy, and sampled with a seed: the draws come in the
// same order), the sequence is left as the token-by-token path leaves it wherever the generation stops, and
// on an answer that repeats its prompt most steps confirm several tokens at once.
//
// The tiny test model is a first-order Markov chain (its next token depends on the current one only), so a
// prompt holding its own greedy answer makes every guess right: acceptance is high by construction.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, type LlamaContext, type LlamaContextSequence, type LlamaModel, type SequenceEvaluateOptions, type Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ensurePeerModel } from "../../bench/peer-model.js";
import { PROMPT_LOOKUP_DEFAULTS } from "../../server/engine/prompt-lookup.js";
import { AHEAD_WAIT_MS, SlotLoop } from "../../server/engine/slot-loop.js";
import { SPECULATION_BATCH_GUESSES } from "../../server/engine/speculation.js";
import { libuvPoolThreads } from "../../server/engine/thread-policy.js";
import { FixedStepCosts, keepAllGuesses } from "../support/step-costs.js";
import type { SampledToken } from "../../server/engine/token-probabilities.js";
import { spyOnBinding } from "../support/binding-spy.js";
import { takeSampled as take } from "../support/take-tokens.js";

let dir: string;
let tiny: { model: LlamaModel; context: LlamaContext };
let random: { model: LlamaModel; context: LlamaContext };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-spec-"));
  const llama = await getLlama({ build: "never", gpu: false });
  const tinyModel = await llama.loadModel({ modelPath: inject("tinyModelPath") });
  tiny = { model: tinyModel, context: await tinyModel.createContext({ contextSize: 2048, sequences: 2, threads: 1 }) };
  const randomPath = ensurePeerModel(join(dir, "random.gguf"), { nEmbd: 64, nLayers: 1, nHead: 2, nFf: 64, contextLength: 4096, seed: 20 });
  const randomModel = await llama.loadModel({ modelPath: randomPath });
  random = { model: randomModel, context: await randomModel.createContext({ contextSize: 2048, sequences: 2, threads: 1 }) };
});
afterAll(async () => {
  for (const m of [tiny, random]) {
    await m?.context.dispose();
    await m?.model.dispose();
  }
  rmSync(dir, { recursive: true, force: true });
});

const paths = (speculation: boolean) => ({ solo: false, stepSampling: false, speculation, queuedSamplings: true });
const state = (s: LlamaContextSequence) => ({ next: s.nextTokenIndex, tokens: s.contextTokens });

/** Runs one evaluation on a fresh sequence, counting the decodes; the sequence's state after it. */
async function run(
  on: { model: LlamaModel; context: LlamaContext },
  speculation: boolean,
  prompt: Token[],
  options: SequenceEvaluateOptions,
  n: number,
): Promise<{ tokens: Token[]; sampled: SampledToken[]; decodes: number; samplings: number; mostAtOnce: number; state: ReturnType<typeof state> }> {
  const loop = new SlotLoop(on.context, on.model, paths(speculation), null, keepAllGuesses());
  expect(loop.paths.speculation).toBe(speculation);
  // The test workers' libuv pool has one thread (vitest.config.ts, unless UV_THREADPOOL_SIZE says otherwise),
  // as the server's: verifications queue their samplings.
  expect(loop.paths.queuedSamplings, `UV_THREADPOOL_SIZE=${process.env.UV_THREADPOOL_SIZE}`).toBe(libuvPoolThreads() === 1);
  const sequence = on.context.getSequence();
  let decodes = 0;
  /** The samplings asked for, and the most that were under way at once (queued together). */
  let samplings = 0;
  let underWay = 0;
  let mostAtOnce = 0;
  const undo = spyOnBinding(on.context, (method) => {
    if (method === "decodeBatch") decodes++;
    if (method !== "sampleToken") return;
    samplings++;
    mostAtOnce = Math.max(mostAtOnce, ++underWay);
    return () => underWay--;
  });
  try {
    const sampled = await take(loop.evaluate(sequence, prompt, {}, { ...options, yieldEogToken: true }), n, on.model);
    // The erase after a stop runs in the evaluation's finally, before take() returns.
    return { tokens: sampled.map((t) => t.token), sampled, decodes, samplings, mostAtOnce, state: state(sequence) };
  } finally {
    undo();
    sequence.dispose();
  }
}

describe("speculation (prompt lookup) in the slot loop", () => {
  it("on an answer that repeats its prompt: the same greedy tokens in far fewer decodes, every guess kept", async () => {
    const { model } = tiny;
    const head = model.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", true);
    const first = await run(tiny, false, head, { temperature: 0 }, 40);
    expect(first.tokens.length).toBeGreaterThan(8);
    expect(model.isEogToken(first.tokens.at(-1)!)).toBe(true);
    // The same turn again, after a conversation that holds it once: the answer is the chain seen before.
    const echo = [...head, ...first.tokens, ...head];
    const off = await run(tiny, false, echo, { temperature: 0 }, 40);
    const on = await run(tiny, true, echo, { temperature: 0 }, 40);
    expect(off.tokens).toEqual(first.tokens);
    expect(on.tokens).toEqual(off.tokens);
    expect(on.state).toEqual(off.state);
    const drafted = on.sampled.reduce((n, t) => n + (t.speculation?.drafted ?? 0), 0);
    const accepted = on.sampled.filter((t) => t.speculation?.accepted).length;
    expect(accepted).toBeGreaterThan(on.tokens.length / 2);
    // Every guess was right but those past the end of the turn (the chain ends there; what followed it in the
    // prompt is not the model's).
    expect(drafted - accepted).toBeLessThanOrEqual(8);
    expect(off.decodes).toBe(on.tokens.length);
    expect(on.decodes).toBeLessThanOrEqual(Math.ceil(off.decodes / 3));
    expect(off.sampled.every((t) => t.speculation === undefined)).toBe(true);
    // A step's positions are sampled several at a time (greedy: none depends on another), in batches that
    // double; those past a refused guess (the end of the turn) are no more than the tokens kept before it, plus one.
    expect(off.mostAtOnce).toBe(1);
    expect(on.mostAtOnce).toBeGreaterThanOrEqual(libuvPoolThreads() === 1 ? 4 : 1);
    expect(on.samplings).toBeLessThanOrEqual(2 * on.tokens.length + on.decodes);
  });

  it("keeps a token and its guesses within a small batch", async () => {
    const { model } = tiny;
    const head = model.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", true);
    const first = await run(tiny, false, head, { temperature: 0 }, 40);
    const echo = [...head, ...first.tokens, ...head];
    const small = { model, context: await model.createContext({ contextSize: 2048, sequences: 1, threads: 1, batchSize: 8 }) };
    const sizes: number[] = [];
    const undo = spyOnBinding(small.context, (method, args) => {
      if (method === "addToBatch") sizes.push((args[2] as Uint32Array).length);
    });
    try {
      const on = await run(small, true, echo, { temperature: 0 }, 40);
      expect(on.tokens).toEqual(first.tokens);
      expect(on.sampled.filter((t) => t.speculation?.accepted).length).toBeGreaterThan(on.tokens.length / 2);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(8);
    } finally {
      undo();
      await small.context.dispose();
    }
  });

  it("a reader slower than a batch waits for its ask: the token is decoded again with the same guesses, which are checked", async () => {
    const { model, context } = tiny;
    const head = model.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", true);
    const first = await run(tiny, false, head, { temperature: 0 }, 40);
    const echo = [...head, ...first.tokens, ...head];
    const off = await run(tiny, false, echo, { temperature: 0 }, 40);
    const loop = new SlotLoop(context, model, paths(true), null, keepAllGuesses());
    const sequence = context.getSequence();
    const sampled: SampledToken[] = [];
    let decodes = 0;
    const undo = spyOnBinding(context, (method) => {
      if (method === "decodeBatch") decodes++;
    });
    try {
      for await (const t of loop.evaluate(sequence, echo, {}, { temperature: 0, yieldEogToken: true })) {
        sampled.push(t);
        if (sampled.length === 40 || model.isEogToken(t.token)) break;
        // Each ask comes well after the batch that decoded the token ahead (with its guesses) let it go.
        await new Promise((r) => setTimeout(r, AHEAD_WAIT_MS * 4));
      }
      expect(sampled.map((t) => t.token)).toEqual(off.tokens);
      expect(state(sequence)).toEqual(off.state);
    } finally {
      undo();
      sequence.dispose();
    }
    // The guesses were checked all the same (they used to be decoded, let go and never checked), in fewer
    // decodes than tokens even with every decode ahead made twice.
    expect(sampled.filter((t) => t.speculation?.accepted).length).toBeGreaterThan(off.tokens.length / 2);
    expect(decodes).toBeLessThan(off.decodes);
  });

  it("a generation that stops among verified tokens leaves the sequence as the token-by-token path does", async () => {
    const { model } = tiny;
    const head = model.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", true);
    const first = await run(tiny, false, head, { temperature: 0 }, 40);
    const echo = [...head, ...first.tokens, ...head];
    for (const n of [1, 2, 3, 5, 8]) {
      const off = await run(tiny, false, echo, { temperature: 0 }, n);
      const on = await run(tiny, true, echo, { temperature: 0 }, n);
      expect(on.tokens).toEqual(off.tokens);
      expect(on.state, `stopped after ${n}`).toEqual(off.state);
      expect(on.state).toEqual({ next: echo.length + n - 1, tokens: [...echo, ...off.tokens.slice(0, -1)] });
    }
  });

  it("sampled with a seed: the same tokens with speculation on and off (a guess is kept only when drawn)", async () => {
    for (const on of [tiny, random]) {
      const { model } = on;
      const head = model.tokenize("<|im_start|>user\nwrite something<|im_end|>\n<|im_start|>assistant\n", true);
      const greedy = await run(on, false, head, { temperature: 0 }, 60);
      const prompt = [...head, ...greedy.tokens, ...greedy.tokens, ...head];
      for (const seed of [1, 2, 3]) {
        const options = { temperature: 0.8, topK: 40, topP: 0.95, seed };
        const off = await run(on, false, prompt, options, 80);
        const spec = await run(on, true, prompt, options, 80);
        expect(spec.tokens, `seed ${seed}`).toEqual(off.tokens);
        expect(spec.state).toEqual(off.state);
        // Drawn: one position at a time, each draw only where the one before was kept (the generator's order).
        expect(spec.mostAtOnce).toBe(1);
      }
    }
  });

  it("greedy on a random model: the same tokens and state; guesses that fail make the sequence wait before guessing again", async () => {
    const { model } = random;
    const prompt = model.tokenize("<|im_start|>user\nthe quick brown fox jumps over the lazy dog, the quick brown fox<|im_end|>\n<|im_start|>assistant\n", true);
    const off = await run(random, false, prompt, { temperature: 0 }, 200);
    const on = await run(random, true, prompt, { temperature: 0 }, 200);
    expect(on.tokens).toEqual(off.tokens);
    expect(on.state).toEqual(off.state);
    const drafted = on.sampled.reduce((n, t) => n + (t.speculation?.drafted ?? 0), 0);
    const accepted = on.sampled.filter((t) => t.speculation?.accepted).length;
    // Never more decodes than tokens (a verification step is a step), and the guesses checked stay bounded.
    expect(on.decodes).toBeLessThanOrEqual(off.decodes);
    expect(drafted).toBeLessThanOrEqual(PROMPT_LOOKUP_DEFAULTS.maxDraft * on.decodes);
    expect(accepted).toBeLessThanOrEqual(drafted);
  });

  it("several sequences at once: each gets the tokens it gets alone, guesses in the same batches as the others' steps", async () => {
    const { model, context } = tiny;
    const head = model.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", true);
    const first = await run(tiny, false, head, { temperature: 0 }, 40);
    const prompts = [[...head, ...first.tokens, ...head], model.tokenize("<|im_start|>user\nsomething else<|im_end|>\n<|im_start|>assistant\n", true)];
    const alone = [];
    for (const p of prompts) alone.push((await run(tiny, false, p, { temperature: 0 }, 40)).tokens);
    const loop = new SlotLoop(context, model, paths(true), null, keepAllGuesses());
    const seqs = prompts.map(() => context.getSequence());
    /** Each batch's entries: tokens, and logits asked for (a token with its guesses asks at every position). */
    const batches: Array<Array<{ tokens: number; logits: number }>> = [];
    const undo = spyOnBinding(context, (method, args) => {
      if (method === "initBatch") batches.push([]);
      if (method === "addToBatch") batches.at(-1)!.push({ tokens: (args[2] as Uint32Array).length, logits: (args[3] as Uint32Array).length });
    });
    try {
      const together = await Promise.all(prompts.map(async (p, i) => (await take(loop.evaluate(seqs[i]!, p, {}, { temperature: 0, yieldEogToken: true }), 40, model)).map((t) => t.token)));
      expect(together).toEqual(alone);
    } finally {
      undo();
      for (const s of seqs) s.dispose();
    }
    const guessed = (e: { tokens: number; logits: number }) => e.tokens > 1 && e.logits === e.tokens;
    // Some batch carried a sequence's guesses beside the other's step.
    expect(batches.some((b) => b.length === 2 && b.some(guessed) && b.some((e) => e.tokens === 1))).toBe(true);
    // At most two's share of SPECULATION_BATCH_GUESSES with a token (32, under PROMPT_LOOKUP_DEFAULTS.maxDraft).
    const share = Math.min(PROMPT_LOOKUP_DEFAULTS.maxDraft, SPECULATION_BATCH_GUESSES / 2);
    expect(batches.flat().filter(guessed).every((e) => e.tokens <= share + 1)).toBe(true);
  });

  it("several sequences at once, guesses priced: a guess that would split a step goes in only where the extra pass pays", async () => {
    const { model, context } = tiny;
    const head = model.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", true);
    const first = await run(tiny, false, head, { temperature: 0 }, 40);
    const prompts = [[...head, ...first.tokens, ...head], model.tokenize("<|im_start|>user\nsomething else<|im_end|>\n<|im_start|>assistant\n", true)];
    const alone: Token[][] = [];
    for (const p of prompts) alone.push((await run(tiny, false, p, { temperature: 0 }, 40)).tokens);
    const seqs = prompts.map(() => context.getSequence());
    /** The batches of both generated together under these prices: each batch's token counts by sequence. */
    async function together(price: (size: number) => number): Promise<number[][]> {
      const loop = new SlotLoop(context, model, paths(true), null, new FixedStepCosts(price));
      for (const s of seqs) await s.clearHistory();
      // Each batch's parts: the sequence's index, the position of the part's first token, its token count.
      const batches: { sequence: number; from: number; tokens: number }[][] = [];
      const undo = spyOnBinding(context, (method, args) => {
        if (method === "initBatch") batches.push([]);
        if (method === "addToBatch")
          batches.at(-1)!.push({ sequence: seqs.findIndex((s) => (s as unknown as { _sequenceId: number })._sequenceId === args[0]), from: args[1] as number, tokens: (args[2] as Uint32Array).length });
      });
      try {
        const tokens = await Promise.all(prompts.map(async (p, i) => (await take(loop.evaluate(seqs[i]!, p, {}, { temperature: 0, yieldEogToken: true }), 40, model)).map((t) => t.token)));
        expect(tokens).toEqual(alone);
      } finally {
        undo();
      }
      // Both sequences' steps (neither part a prompt's tokens).
      return batches.filter((b) => b.length === 2 && b.every((part) => part.from >= prompts[part.sequence]!.length)).map((b) => b.map((part) => part.tokens));
    }
    const uneven = (steps: number[][]) => steps.filter((b) => b[0] !== b[1]).length;
    // A pass of one token nearly free beside a pass of two (10): the echo's guesses pay for their own pass.
    const cheapSplit = await together((size) => (size === 1 ? 1 : 10));
    expect(uneven(cheapSplit)).toBeGreaterThan(0);
    // A pass costs the same whatever its size: a guess is worth a place in a pass, never a pass of its own.
    const flat = await together(() => 10).finally(() => seqs.forEach((s) => s.dispose()));
    expect(flat.length).toBeGreaterThan(5);
    expect(uneven(flat)).toBe(0);
  });

  it("makes no guesses where the sampling changes from token to token (repeat penalties) or reports with each token", async () => {
    const { model } = tiny;
    const head = model.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", true);
    const first = await run(tiny, false, head, { temperature: 0 }, 40);
    const echo = [...head, ...first.tokens, ...head];
    const penalized: SequenceEvaluateOptions = { temperature: 0, repeatPenalty: { punishTokens: () => [], penalty: 1.1 } };
    const off = await run(tiny, false, echo, penalized, 40);
    const on = await run(tiny, true, echo, penalized, 40);
    expect(on.tokens).toEqual(off.tokens);
    expect(on.decodes).toBe(off.decodes);
    expect(on.sampled.every((t) => t.speculation === undefined)).toBe(true);
  });
});
