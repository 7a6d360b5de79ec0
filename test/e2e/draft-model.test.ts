// Speculation with a draft model (issue 44, --draft-model): a second, smaller model of the same vocabulary
// writes a few tokens ahead, and the slot loop checks them against the served model in the step that decodes
// the sampled token, exactly as it checks prompt lookup's guesses. So the tokens are the same with and without
// a draft model, whatever it guesses (greedy, and sampled with a seed), and the sequence is left as the
// token-by-token path leaves it; where the draft writes what the model would, most steps confirm several tokens.
//
// The drafts here: the tiny model for itself (every guess right: the same weights), and a model of random
// weights with the same vocabulary (bench/peer-model.ts: its guesses are nearly always wrong).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { getLlama, type Llama, type LlamaContext, type LlamaContextSequence, type LlamaModel, type SequenceEvaluateOptions, type Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ensurePeerModel } from "../../bench/peer-model.js";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { DRAFT_CATCH_UP_TOKENS, DRAFT_MIN_CONFIDENCE, DraftModel, type DraftSource } from "../../server/engine/draft-model.js";
import { SlotLoop } from "../../server/engine/slot-loop.js";
import type { StepCosts } from "../../server/engine/step-costs.js";
import { busyContention } from "../support/busy-machine.js";
import { FixedStepCosts, keepAllGuesses } from "../support/step-costs.js";
import type { SampledToken } from "../../server/engine/token-probabilities.js";
import { spyOnBinding } from "../support/binding-spy.js";
import { takeSampled } from "../support/take-tokens.js";

let dir: string;
let llama: Llama;
let target: { model: LlamaModel; context: LlamaContext };
let randomPath: string;
const drafts: DraftModel[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-draft-"));
  llama = await getLlama({ build: "never", gpu: false });
  const model = await llama.loadModel({ modelPath: inject("tinyModelPath") });
  target = { model, context: await model.createContext({ contextSize: 2048, sequences: 2, threads: 1 }) };
  randomPath = ensurePeerModel(join(dir, "random.gguf"), { nEmbd: 64, nLayers: 1, nHead: 2, nFf: 64, contextLength: 4096, seed: 20 });
});
afterAll(async () => {
  for (const d of drafts) await d.close();
  await target?.context.dispose();
  await target?.model.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * The tiny model gives its greedy token a probability of about 0.5, under the default cutoff (0.6, where a
 * draft stops): the tests that want long drafts take a lower one.
 */
async function draftOf(modelPath: string, minConfidence = 0.3, queuedSamplings = false): Promise<DraftModel> {
  const draft = await DraftModel.load({ llama, modelPath, target, threads: 1, minConfidence, queuedSamplings });
  drafts.push(draft);
  return draft;
}

/** Runs the garbage collector until a finalizer has run (at most 20 times). */
async function collectGarbage(): Promise<void> {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  let finalized = false;
  const registry = new FinalizationRegistry(() => (finalized = true));
  registry.register({}, 0);
  for (let i = 0; i < 20 && !finalized; i++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(finalized).toBe(true);
}

/** The draft model's context (private): the tests watch what reaches its binding. */
const draftContext = (draft: DraftModel) => (draft as unknown as { context: object }).context;

const state = (s: LlamaContextSequence) => ({ next: s.nextTokenIndex, tokens: s.contextTokens });

/**
 * One evaluation on a fresh sequence of the target, with the draft model's guesses or none; counts the target's
 * decodes. `costs`: the steps' prices (every guess kept unless given).
 */
async function run(draft: DraftSource | null, prompt: Token[], options: SequenceEvaluateOptions, n: number, costs: StepCosts = keepAllGuesses()) {
  const loop = new SlotLoop(target.context, target.model, { solo: false, stepSampling: false, speculation: draft !== null, queuedSamplings: true }, draft, costs);
  expect(loop.describe()).toContain(draft ? "draft-model speculation" : "the slot loop");
  const sequence = target.context.getSequence();
  let decodes = 0;
  const undo = spyOnBinding(target.context, (method) => {
    if (method === "decodeBatch") decodes++;
  });
  try {
    const sampled: SampledToken[] = await takeSampled(loop.evaluate(sequence, prompt, {}, { ...options, yieldEogToken: true }), n, target.model);
    return { tokens: sampled.map((t) => t.token), sampled, decodes, state: state(sequence) };
  } finally {
    undo();
    sequence.dispose();
  }
}

const counts = (sampled: SampledToken[]) => ({
  drafted: sampled.reduce((n, t) => n + (t.speculation?.drafted ?? 0), 0),
  accepted: sampled.filter((t) => t.speculation?.accepted).length,
});

describe("speculation with a draft model (--draft-model)", () => {
  it("the model as its own draft: the same greedy tokens in far fewer decodes of the served model, the guesses kept", async () => {
    const draft = await draftOf(inject("tinyModelPath"));
    const prompt = target.model.tokenize("<|im_start|>user\nwrite a long story<|im_end|>\n<|im_start|>assistant\n", true);
    const off = await run(null, prompt, { temperature: 0 }, 60);
    const on = await run(draft, prompt, { temperature: 0 }, 60);
    expect(off.tokens.length).toBeGreaterThan(8);
    expect(on.tokens).toEqual(off.tokens);
    expect(on.state).toEqual(off.state);
    const { drafted, accepted } = counts(on.sampled);
    expect(accepted).toBeGreaterThan(on.tokens.length / 2);
    // Only guesses past the end of the turn can fail (the draft stops at its end of generation).
    expect(drafted - accepted).toBeLessThanOrEqual(2);
    expect(off.decodes).toBe(off.tokens.length);
    expect(on.decodes).toBeLessThanOrEqual(Math.ceil(off.decodes / 3));
  });

  it("with libuv's one pool thread, each round's samplings are queued behind its decode: the same guesses, the same answer", async () => {
    const prompt = target.model.tokenize("<|im_start|>user\nwrite a long story<|im_end|>\n<|im_start|>assistant\n", true);
    const answers = [];
    for (const queued of [false, true]) {
      const draft = await draftOf(inject("tinyModelPath"), 0.3, queued);
      /** For each sampling of the draft context: whether a decode was still under way when it was asked for. */
      const behindDecode: boolean[] = [];
      let decoding = false;
      const undo = spyOnBinding(draftContext(draft), (method) => {
        if (method === "sampleToken") behindDecode.push(decoding);
        if (method !== "decodeBatch") return;
        decoding = true;
        return () => (decoding = false);
      });
      try {
        answers.push(await run(draft, prompt, { temperature: 0 }, 60));
      } finally {
        undo();
      }
      expect(behindDecode.length).toBeGreaterThan(10);
      expect(behindDecode.every((b) => b === queued)).toBe(true);
    }
    expect(answers[1]!.tokens).toEqual(answers[0]!.tokens);
    expect(counts(answers[1]!.sampled)).toEqual(counts(answers[0]!.sampled));
    expect(answers[1]!.decodes).toBe(answers[0]!.decodes);
  });

  it("guesses the steps' prices keep dropping: the draft model waits 2, 4, 8 tokens before it is asked again, not asked at every token; the same tokens", async () => {
    const draft = await draftOf(inject("tinyModelPath"));
    let asked = 0;
    const counting: DraftSource = {
      draft: (sequenceId, tokens, max) => {
        asked++;
        return draft.draft(sequenceId, tokens, max);
      },
    };
    const prompt = target.model.tokenize("<|im_start|>user\nwrite a long story<|im_end|>\n<|im_start|>assistant\n", true);
    const off = await run(null, prompt, { temperature: 0 }, 60);
    // With every guess kept, it is asked at each step but the first (checked in the first test).
    const kept = await run(counting, prompt, { temperature: 0 }, 60);
    expect(kept.tokens).toEqual(off.tokens);
    expect(asked).toBe(kept.decodes - 1);
    // A pass of more than one token costs 50 times one: no guess is ever worth its place. Asked at the first
    // token, then after waiting 2 and 4: 3 times in this answer of 14 (it was asked at each token but the last).
    asked = 0;
    const dropped = await run(counting, prompt, { temperature: 0 }, 60, new FixedStepCosts((size) => (size === 1 ? 1 : 50)));
    expect(dropped.tokens).toEqual(off.tokens);
    expect(dropped.state).toEqual(off.state);
    expect(counts(dropped.sampled).drafted).toBe(0);
    expect(off.tokens.length).toBe(14);
    expect(asked).toBe(3);
  });

  it("a generation that stops among verified tokens leaves the sequence as the token-by-token path does; the draft follows the next one", async () => {
    const draft = await draftOf(inject("tinyModelPath"));
    const prompt = target.model.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", true);
    for (const n of [1, 2, 3, 5, 8, 13]) {
      const off = await run(null, prompt, { temperature: 0 }, n);
      const on = await run(draft, prompt, { temperature: 0 }, n);
      expect(on.tokens, `stopped after ${n}`).toEqual(off.tokens);
      expect(on.state, `stopped after ${n}`).toEqual(off.state);
    }
  });

  it("a draft that guesses wrong changes nothing: the same tokens and state, greedy and sampled with a seed", async () => {
    const draft = await draftOf(randomPath);
    const prompt = target.model.tokenize("<|im_start|>user\nwrite something<|im_end|>\n<|im_start|>assistant\n", true);
    const greedyOff = await run(null, prompt, { temperature: 0 }, 60);
    const greedyOn = await run(draft, prompt, { temperature: 0 }, 60);
    expect(greedyOn.tokens).toEqual(greedyOff.tokens);
    expect(greedyOn.state).toEqual(greedyOff.state);
    for (const seed of [1, 2, 3]) {
      const options = { temperature: 0.8, topK: 40, topP: 0.95, seed };
      const off = await run(null, prompt, options, 80);
      const on = await run(draft, prompt, options, 80);
      expect(on.tokens, `seed ${seed}`).toEqual(off.tokens);
      expect(on.state, `seed ${seed}`).toEqual(off.state);
    }
  });

  it("a draft stops at the first token the draft model is unsure of (the default cutoff); the next one reads only what is new", async () => {
    const draft = await draftOf(inject("tinyModelPath"), DRAFT_MIN_CONFIDENCE);
    const prompt = target.model.tokenize("<|im_start|>user\nwrite a long story<|im_end|>\n<|im_start|>assistant\n", true);
    const greedy = (await run(null, prompt, { temperature: 0 }, 8)).tokens;
    // The answer's first token is sure (0.94), the second is not (0.58).
    expect(await draft.draft(0, prompt, 8)).toEqual(greedy.slice(0, 1));
    const sure = await draftOf(inject("tinyModelPath"));
    expect(await sure.draft(0, prompt, 8)).toEqual(greedy);
    // After the served model kept three of them and wrote the fourth itself: the draft goes on from there.
    expect(await sure.draft(0, [...prompt, ...greedy.slice(0, 4)], 4)).toEqual(greedy.slice(4, 8));
    // And from a turn it refused: the draft takes back what no longer matches.
    expect(await sure.draft(0, [...prompt, greedy[0]!], 3)).toEqual(greedy.slice(1, 4));
  });

  it("a long prompt is read by the draft model in the background: no guess at once, guesses once it has read it; the answer is the same", async () => {
    const draft = await draftOf(inject("tinyModelPath"));
    const long = target.model.tokenize(`<|im_start|>user\n${"tell me a story about the sea ".repeat(40)}<|im_end|>\n<|im_start|>assistant\n`, true);
    expect(long.length).toBeGreaterThan(DRAFT_CATCH_UP_TOKENS);
    const off = await run(null, long, { temperature: 0 }, 30);
    // The first ask does not wait for the draft model to read 1,200 tokens.
    expect(await draft.draft(1, long, 4)).toEqual([]);
    await expect.poll(() => draft.draft(1, long, 4), { timeout: 20_000 }).toEqual(off.tokens.slice(0, 4));
    // Through the slot loop: the answer's first tokens come without guesses (this short answer ends before the
    // draft model has read the prompt), and the same request again takes guesses; the same answer both times.
    const loopDraft = await draftOf(inject("tinyModelPath"));
    const first = await run(loopDraft, long, { temperature: 0 }, 30);
    expect(first.tokens).toEqual(off.tokens);
    expect(first.state).toEqual(off.state);
    expect(first.sampled.slice(0, 2).map((t) => t.speculation)).toEqual([undefined, undefined]);
    await expect
      .poll(
        async () => {
          const again = await run(loopDraft, long, { temperature: 0 }, 30);
          expect(again.tokens).toEqual(off.tokens);
          return again.sampled.some((t) => t.speculation?.accepted);
        },
        { timeout: 20_000 },
      )
      .toBe(true);
  });

  it("drafts asked for together are written in rounds: one decode of the draft context a position for all of them, the same guesses as each alone", async () => {
    const prompts = ["write a long story", "tell me about the sea"].map((text) => target.model.tokenize(`<|im_start|>user\n${text}<|im_end|>\n<|im_start|>assistant\n`, true));
    const alone = await Promise.all(prompts.map(async (prompt) => (await run(null, prompt, { temperature: 0 }, 8)).tokens));
    const draft = await draftOf(inject("tinyModelPath"));
    const sizes: number[] = [];
    const undo = spyOnBinding(draftContext(draft), (method, args) => {
      if (method === "initBatch") sizes.push(args[0] as number);
    });
    try {
      expect(await Promise.all(prompts.map((prompt, i) => draft.draft(i, prompt, 8)))).toEqual(alone);
    } finally {
      undo();
    }
    // The prompts in one decode, then a guess of each in each of the next seven (the eighth guess is not read).
    expect(sizes).toEqual([prompts[0]!.length + prompts[1]!.length, ...Array(7).fill(2)]);
  });

  it("a draft the model is unsure of goes on while one written beside it is sure (its guesses fill the step's pass), and ends with it", async () => {
    // The tiny model's greedy tokens come with these probabilities, whatever the prompt: 0.94 0.58 0.47 0.47
    // 0.47 0.47 0.77 0.51 0.51 ...; sure from 0.55.
    const prompt = target.model.tokenize("<|im_start|>user\nwrite a long story<|im_end|>\n<|im_start|>assistant\n", true);
    const greedy = (await run(null, prompt, { temperature: 0 }, 10)).tokens;
    const later = [...prompt, ...greedy.slice(0, 6)];
    const alone = await draftOf(inject("tinyModelPath"), 0.55);
    expect(await alone.draft(0, prompt, 8)).toEqual(greedy.slice(0, 2));
    expect(await alone.draft(1, later, 8)).toEqual(greedy.slice(6, 7));
    // Together: the second draft's unsure token (0.51) is written while the first's (0.58) is sure; the next
    // round neither is sure, and both end.
    const together = await draftOf(inject("tinyModelPath"), 0.55);
    expect(await Promise.all([together.draft(0, prompt, 8), together.draft(1, later, 8)])).toEqual([greedy.slice(0, 2), greedy.slice(6, 8)]);
  });

  it("one draft after another, each asked for as the last one is handed over: each is written (none waits for rounds that have ended)", async () => {
    const draft = await draftOf(inject("tinyModelPath"), DRAFT_MIN_CONFIDENCE);
    const prompt = target.model.tokenize("<|im_start|>user\nwrite a long story<|im_end|>\n<|im_start|>assistant\n", true);
    const greedy = (await run(null, prompt, { temperature: 0 }, 8)).tokens;
    // Ended by an unsure token (the answer's second), in the round's turn; the next is asked for in the same turn.
    const drafts = await Promise.race([
      (async () => [await draft.draft(0, prompt, 8), await draft.draft(1, prompt, 8), await draft.draft(0, [...prompt, greedy[0]!], 8)])(),
      new Promise<string>((resolve) => setTimeout(() => resolve("a draft never came"), 5000)),
    ]);
    expect(drafts).toEqual([greedy.slice(0, 1), greedy.slice(0, 1), []]);
  });

  it("what a sequence has read stays read across garbage collections (node-llama-cpp empties a sequence whose object is collected)", async () => {
    const draft = await draftOf(inject("tinyModelPath"));
    const prompt = target.model.tokenize("<|im_start|>user\nwrite a long story<|im_end|>\n<|im_start|>assistant\n", true);
    const greedy = (await run(null, prompt, { temperature: 0 }, 12)).tokens;
    expect(await draft.draft(0, prompt, 4)).toEqual(greedy.slice(0, 4));
    await collectGarbage();
    // Its sequence is still its own (node-llama-cpp gives a collected one's id back, emptied).
    expect((draftContext(draft) as LlamaContext).sequencesLeft).toBe(target.context.totalSequences - 1);
    const sizes: number[] = [];
    const undo = spyOnBinding(draftContext(draft), (method, args) => {
      if (method === "initBatch") sizes.push(args[0] as number);
    });
    try {
      // It reads only the tokens kept since (the sequence's cells still hold the prompt), and guesses right.
      expect(await draft.draft(0, [...prompt, ...greedy.slice(0, 5)], 4)).toEqual(greedy.slice(5, 9));
    } finally {
      undo();
    }
    expect(sizes[0]).toBe(2);
  });

  it("its decodes' threads follow the served model's policy: set before each decode, capped at the cores another process leaves", async () => {
    const prompt = target.model.tokenize("<|im_start|>user\nwrite a long story<|im_end|>\n<|im_start|>assistant\n", true);
    const greedy = (await run(null, prompt, { temperature: 0 }, 12)).tokens;
    const threadsOf = async (busy: number) => {
      const draft = await DraftModel.load({ llama, modelPath: inject("tinyModelPath"), target, threads: 2, minConfidence: 0.3, contention: busyContention(busy), cores: 2 });
      drafts.push(draft);
      const set: number[] = [];
      let decodes = 0;
      const undo = spyOnBinding(draftContext(draft), (method, args) => {
        if (method === "setThreads") set.push(args[0] as number);
        if (method === "decodeBatch") decodes++;
      });
      try {
        for (let i = 0; i < 3; i++) expect(await draft.draft(0, i === 0 ? prompt : [...prompt, ...greedy.slice(0, i)], 8)).toEqual(greedy.slice(i, i + 8));
      } finally {
        undo();
      }
      expect(set).toHaveLength(decodes);
      return set;
    };
    // Quiet: the prompt with both threads; a lone draft's one-token decodes try both counts (LoneDecodeThreads).
    const quiet = await threadsOf(0);
    expect(quiet[0]).toBe(2);
    expect(new Set(quiet)).toEqual(new Set([1, 2]));
    // One of the two cores busy elsewhere: after the first reading of the machine (which starts its window),
    // every decode with one thread.
    const busy = await threadsOf(1);
    expect(busy.length).toBeGreaterThan(8);
    expect(new Set(busy.slice(1))).toEqual(new Set([1]));
  });

  it("a model of another vocabulary is refused at load, saying why", async () => {
    const other = join(dir, "other-vocabulary.gguf");
    writeFileSync(other, buildTinyModel({ scriptedString: "an extra token" }));
    await expect(DraftModel.load({ llama, modelPath: other, target, threads: 1 })).rejects.toMatchObject({
      code: "draft_model_incompatible",
      message: expect.stringMatching(/cannot guess for this model: its vocabulary has \d+ tokens, this model's \d+/),
    });
  });
});
