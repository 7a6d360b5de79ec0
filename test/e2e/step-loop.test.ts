// The step loop against node-llama-cpp's own evaluate on the same model: the same greedy tokens, and the
// sequence left in the same state (position and token record, which the prefix cache reads).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, type LlamaContext, type LlamaContextSequence, type LlamaModel, type SequenceEvaluateOptions, type Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensurePeerModel } from "../../bench/peer-model.js";
import { AHEAD_WAIT_MS, StepLoop } from "../../server/engine/step-loop.js";
import { spyOnBinding } from "../support/binding-spy.js";

let dir: string;
let model: LlamaModel;
let context: LlamaContext;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-steps-"));
  const modelPath = ensurePeerModel(join(dir, "random.gguf"), { nEmbd: 64, nLayers: 1, nHead: 2, nFf: 64, contextLength: 4096, seed: 20 });
  const llama = await getLlama({ build: "never", gpu: false });
  model = await llama.loadModel({ modelPath });
  context = await model.createContext({ contextSize: 1024, sequences: 3, threads: 1 });
});
afterAll(async () => {
  await context?.dispose();
  await model?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const prompt = (text: string) => model.tokenize(`<|im_start|>user\n${text}<|im_end|>\n<|im_start|>assistant\n`, true);

async function take(tokens: AsyncIterable<{ token: Token }>, n: number): Promise<Token[]> {
  const out: Token[] = [];
  for await (const { token } of tokens) {
    out.push(token);
    if (out.length === n) break;
  }
  return out;
}

const state = (s: LlamaContextSequence) => ({ next: s.nextTokenIndex, tokens: s.contextTokens });

describe("StepLoop", () => {
  it("generates what sequence.evaluate generates, and leaves the sequence as evaluate does", async () => {
    const loop = new StepLoop(context, model, (dispatch) => dispatch());
    expect(loop.available).toBe(true);
    const ours = context.getSequence();
    const theirs = context.getSequence();
    const options = { temperature: 0, yieldEogToken: true };
    expect(loop.qualifies(ours, {}, options)).toBe(true);
    const p = prompt("tell me about herons");
    const a = await take(loop.evaluate(ours, p, options), 60);
    const b = await take(theirs.evaluateWithMetadata(p, {}, options), 60);
    expect(a).toEqual(b);
    expect(state(ours)).toEqual(state(theirs));
    // The last sampled token is not decoded yet, in both: the record is the prompt and the tokens before it.
    expect(ours.contextTokens).toEqual([...p, ...a.slice(0, -1)]);

    // Continuing from there (a forced feed of a few tokens, then steps) stays in step too.
    const feed = [a.at(-1)!, ...model.tokenize(" and", false)];
    expect(await take(loop.evaluate(ours, feed, options), 20)).toEqual(await take(theirs.evaluateWithMetadata(feed, {}, options), 20));
    expect(state(ours)).toEqual(state(theirs));
    ours.dispose();
    theirs.dispose();
  });

  it("decodes the steps of several sequences in one batch, in sequence order, with the answers each gets alone", async () => {
    const options = { temperature: 0, yieldEogToken: true };
    const alone: Token[][] = [];
    for (const text of ["one", "two", "three"]) {
      const s = context.getSequence();
      alone.push(await take(new StepLoop(context, model, (d) => d()).evaluate(s, prompt(text), options), 30));
      s.dispose();
    }
    const loop = new StepLoop(context, model, (dispatch) => process.nextTick(dispatch));
    const batches: Array<Array<{ id: number; tokens: number }>> = [];
    const undo = spyOnBinding(context, (method, args) => {
      if (method === "initBatch") batches.push([]);
      if (method === "addToBatch") batches.at(-1)!.push({ id: args[0] as number, tokens: (args[2] as Uint32Array).length });
    });
    const seqs = [context.getSequence(), context.getSequence(), context.getSequence()];
    try {
      const together = await Promise.all(["one", "two", "three"].map((text, i) => take(loop.evaluate(seqs[i]!, prompt(text), options), 30)));
      expect(together).toEqual(alone);
    } finally {
      undo();
      for (const s of seqs) s.dispose();
    }
    // The prompts went through node-llama-cpp (this bare context keeps its order); the steps are ours.
    const steps = batches.filter((b) => b.length > 1 && b.every((item) => item.tokens === 1)).map((b) => b.map((item) => item.id));
    expect(steps.length).toBeGreaterThan(10);
    for (const b of steps) expect(b).toEqual([...b].sort((x, y) => x - y));
  });

  it("decodes each sampled token ahead, before its generation asks, and takes it back out when the generation stops", async () => {
    const loop = new StepLoop(context, model, (d) => d());
    const s = context.getSequence();
    const decodes: number[] = [];
    const undo = spyOnBinding(context, (method, args) => {
      if (method === "addToBatch") decodes.push(args[1] as number);
    });
    const p = prompt("decode ahead");
    const seen: Array<{ token: Token; decodedBeforeAsk: boolean }> = [];
    try {
      for await (const { token } of loop.evaluate(s, p, { temperature: 0, yieldEogToken: true })) {
        // The token's own position is on its way to llama.cpp before the generation asks for the next one.
        seen.push({ token, decodedBeforeAsk: decodes.includes(p.length + seen.length) });
        if (seen.length === 20) break;
      }
    } finally {
      undo();
    }
    expect(seen.every((x) => x.decodedBeforeAsk)).toBe(true);
    // The 20th token was decoded ahead too, and taken out again: the record ends where evaluate's would.
    expect(decodes.at(-1)).toBe(p.length + 19);
    expect(state(s)).toEqual({ next: p.length + 19, tokens: [...p, ...seen.slice(0, -1).map((x) => x.token)] });
    s.dispose();
  });

  it("does not decode ahead the token a generation's budget ends with", async () => {
    const loop = new StepLoop(context, model, (d) => d());
    const s = context.getSequence();
    let decodes = 0;
    const undo = spyOnBinding(context, (method) => {
      if (method === "addToBatch") decodes++;
    });
    const p = prompt("a budget of ten");
    let taken = 0;
    try {
      // As generation.ts says it: the tokens it can take after this one, 10 in all.
      for await (const _ of loop.evaluate(s, p, { temperature: 0, yieldEogToken: true }, () => 10 - (taken + 1))) if (++taken === 10) break;
    } finally {
      undo();
    }
    // The prompt (node-llama-cpp's batch, then its last token here) and tokens 1 to 9 decoded ahead; not the 10th.
    expect(decodes).toBe(2 + 9);
    expect(s.nextTokenIndex).toBe(p.length + 9);
    s.dispose();
  });

  it("a generation slower than the batch waits for decodes its token again, with the same answer and state", async () => {
    const loop = new StepLoop(context, model, (d) => d());
    const ours = context.getSequence();
    const theirs = context.getSequence();
    const options = { temperature: 0, yieldEogToken: true };
    const p = prompt("slow reader");
    let decodes = 0;
    const undo = spyOnBinding(context, (method) => {
      if (method === "addToBatch") decodes++;
    });
    const a: Token[] = [];
    try {
      for await (const { token } of loop.evaluate(ours, p, options)) {
        a.push(token);
        // Every third token, longer than a batch waits for the ask: that token's logits are let go.
        if (a.length % 3 === 0) await new Promise((r) => setTimeout(r, AHEAD_WAIT_MS * 4));
        if (a.length === 15) break;
      }
    } finally {
      undo();
    }
    // The prompt (node-llama-cpp's batch, then its last token here), 15 tokens decoded ahead (the 15th taken
    // back out), and once again the tokens of the 4 slow turns the generation went on from.
    expect(decodes).toBe(2 + 15 + 4);
    expect(a).toEqual(await take(theirs.evaluateWithMetadata(p, {}, options), 15));
    expect(state(ours)).toEqual(state(theirs));
    ours.dispose();
    theirs.dispose();
  });

  it("samples after the generation asks: repeat penalties and a seed give evaluate's tokens", async () => {
    const loop = new StepLoop(context, model, (d) => d());
    const run = async (evaluate: (options: SequenceEvaluateOptions) => AsyncIterable<{ token: Token }>) => {
      const punish: Token[] = [];
      const options: SequenceEvaluateOptions = {
        temperature: 1.5,
        seed: 7,
        yieldEogToken: true,
        repeatPenalty: { punishTokens: () => punish.slice(-64), penalty: 1.3, frequencyPenalty: 0.8, presencePenalty: 0.6 },
      };
      const out: Token[] = [];
      for await (const { token } of evaluate(options)) {
        out.push(token);
        punish.push(token);
        if (out.length === 40) break;
      }
      return out;
    };
    const p = prompt("penalties");
    const ours = context.getSequence();
    const theirs = context.getSequence();
    const a = await run((o) => loop.evaluate(ours, p, o));
    const b = await run((o) => theirs.evaluateWithMetadata(p, {}, o));
    expect(new Set(a).size).toBeGreaterThan(5);
    expect(a).toEqual(b);
    ours.dispose();
    theirs.dispose();
  });

  it("leaves grammars and token probabilities to node-llama-cpp", async () => {
    const loop = new StepLoop(context, model, (d) => d());
    const s = context.getSequence();
    const grammar = await model.llama.createGrammarForJsonSchema({ type: "object", properties: {} });
    const { LlamaGrammarEvaluationState } = await import("node-llama-cpp");
    expect(loop.qualifies(s, {}, { grammarEvaluationState: new LlamaGrammarEvaluationState({ model, grammar }) })).toBe(false);
    expect(loop.qualifies(s, { probabilities: true }, {})).toBe(false);
    expect(loop.qualifies(s, {}, {})).toBe(true);
    s.dispose();
  });
});
