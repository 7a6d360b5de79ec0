// The step loop against node-llama-cpp's own evaluate on the same model: the same greedy tokens, and the
// sequence left in the same state (position and token record, which the prefix cache reads).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, type LlamaContext, type LlamaContextSequence, type LlamaModel, type Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensurePeerModel } from "../../bench/peer-model.js";
import { StepLoop } from "../../server/engine/step-loop.js";
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
