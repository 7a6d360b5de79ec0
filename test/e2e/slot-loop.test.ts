// The slot loop against node-llama-cpp's own evaluate on the same model: the same greedy tokens, and the
// sequence left in the same state (position and token record, which the prefix cache reads).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, type LlamaContext, type LlamaContextSequence, type LlamaModel, type SequenceEvaluateOptions, type Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensurePeerModel } from "../../bench/peer-model.js";
import { AHEAD_WAIT_MS, SlotLoop, tokenPathsFromEnvironment } from "../../server/engine/slot-loop.js";
import { spyOnBinding } from "../support/binding-spy.js";
import { take } from "../support/take-tokens.js";

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

// The tests that count batches and decodes describe one token a step: speculation's steps (several tokens
// each, test/e2e/speculation.test.ts) are off there. The others run with it, as the server does, and still
// give evaluate's tokens.
const withoutGuesses = { ...tokenPathsFromEnvironment(), speculation: false };

const idOf = (s: LlamaContextSequence) => (s as unknown as { _sequenceId: number })._sequenceId;
const state = (s: LlamaContextSequence) => ({ next: s.nextTokenIndex, tokens: s.contextTokens });

describe("SlotLoop", () => {
  it("generates what sequence.evaluate generates, and leaves the sequence as evaluate does", async () => {
    const loop = new SlotLoop(context, model);
    expect(loop.available).toBe(true);
    const ours = context.getSequence();
    const theirs = context.getSequence();
    const options = { temperature: 0, yieldEogToken: true };
    const p = prompt("tell me about herons");
    const a = await take(loop.evaluate(ours, p, {}, options), 60);
    const b = await take(theirs.evaluateWithMetadata(p, {}, options), 60);
    expect(a).toEqual(b);
    expect(state(ours)).toEqual(state(theirs));
    // The last sampled token is not decoded yet, in both: the record is the prompt and the tokens before it.
    expect(ours.contextTokens).toEqual([...p, ...a.slice(0, -1)]);

    // Continuing from there (a forced feed of a few tokens, then steps) stays in step too.
    const feed = [a.at(-1)!, ...model.tokenize(" and", false)];
    expect(await take(loop.evaluate(ours, feed, {}, options), 20)).toEqual(await take(theirs.evaluateWithMetadata(feed, {}, options), 20));
    expect(state(ours)).toEqual(state(theirs));
    ours.dispose();
    theirs.dispose();
  });

  it("decodes the steps of several sequences in one batch, in sequence order, with the answers each gets alone", async () => {
    const options = { temperature: 0, yieldEogToken: true };
    const alone: Token[][] = [];
    for (const text of ["one", "two", "three"]) {
      const s = context.getSequence();
      alone.push(await take(new SlotLoop(context, model).evaluate(s, prompt(text), {}, options), 30));
      s.dispose();
    }
    const loop = new SlotLoop(context, model, withoutGuesses);
    const batches: Array<Array<{ id: number; tokens: number }>> = [];
    const undo = spyOnBinding(context, (method, args) => {
      if (method === "initBatch") batches.push([]);
      if (method === "addToBatch") batches.at(-1)!.push({ id: args[0] as number, tokens: (args[2] as Uint32Array).length });
    });
    const seqs = [context.getSequence(), context.getSequence(), context.getSequence()];
    try {
      const together = await Promise.all(["one", "two", "three"].map((text, i) => take(loop.evaluate(seqs[i]!, prompt(text), {}, options), 30)));
      expect(together).toEqual(alone);
    } finally {
      undo();
      for (const s of seqs) s.dispose();
    }
    // The three prompts were read in one batch, in sequence order, and every step after them is one batch too.
    expect(batches[0]!.map((item) => item.id)).toEqual(seqs.map((s) => idOf(s)).sort((x, y) => x - y));
    expect(batches[0]!.every((item) => item.tokens > 1)).toBe(true);
    const steps = batches.filter((b) => b.length > 1 && b.every((item) => item.tokens === 1)).map((b) => b.map((item) => item.id));
    expect(steps.length).toBeGreaterThan(10);
    for (const b of steps) expect(b).toEqual([...b].sort((x, y) => x - y));
  });

  it("decodes each sampled token ahead, before its generation asks, and takes it back out when the generation stops", async () => {
    const loop = new SlotLoop(context, model, withoutGuesses);
    const s = context.getSequence();
    const decodes: number[] = [];
    const undo = spyOnBinding(context, (method, args) => {
      if (method === "addToBatch") decodes.push(args[1] as number);
    });
    const p = prompt("decode ahead");
    const seen: Array<{ token: Token; decodedBeforeAsk: boolean }> = [];
    try {
      for await (const { token } of loop.evaluate(s, p, {}, { temperature: 0, yieldEogToken: true })) {
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
    const loop = new SlotLoop(context, model, withoutGuesses);
    const s = context.getSequence();
    let decodes = 0;
    const undo = spyOnBinding(context, (method) => {
      if (method === "addToBatch") decodes++;
    });
    const p = prompt("a budget of ten");
    let taken = 0;
    try {
      // As generation.ts says it: the tokens it can take after this one, 10 in all.
      for await (const _ of loop.evaluate(s, p, {}, { temperature: 0, yieldEogToken: true }, () => 10 - (taken + 1))) if (++taken === 10) break;
    } finally {
      undo();
    }
    // The prompt (one batch, its last token's logits sampled) and tokens 1 to 9 decoded ahead; not the 10th.
    expect(decodes).toBe(1 + 9);
    expect(s.nextTokenIndex).toBe(p.length + 9);
    s.dispose();
  });

  it("a generation slower than the batch waits for decodes its token again, with the same answer and state", async () => {
    const loop = new SlotLoop(context, model, withoutGuesses);
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
      for await (const { token } of loop.evaluate(ours, p, {}, options)) {
        a.push(token);
        // Every third token, longer than a batch waits for the ask: that token's logits are let go.
        if (a.length % 3 === 0) await new Promise((r) => setTimeout(r, AHEAD_WAIT_MS * 4));
        if (a.length === 15) break;
      }
    } finally {
      undo();
    }
    // The prompt (one batch), 15 tokens decoded ahead (the 15th taken back out), and once again the tokens of
    // the 4 slow turns the generation went on from.
    expect(decodes).toBe(1 + 15 + 4);
    expect(a).toEqual(await take(theirs.evaluateWithMetadata(p, {}, options), 15));
    expect(state(ours)).toEqual(state(theirs));
    ours.dispose();
    theirs.dispose();
  });

  it("samples after the generation asks: repeat penalties and a seed give evaluate's tokens", async () => {
    const loop = new SlotLoop(context, model);
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
    const a = await run((o) => loop.evaluate(ours, p, {}, o));
    const b = await run((o) => theirs.evaluateWithMetadata(p, {}, o));
    expect(new Set(a).size).toBeGreaterThan(5);
    expect(a).toEqual(b);
    ours.dispose();
    theirs.dispose();
  });

  it("samples grammars and token probabilities as evaluate does", async () => {
    const loop = new SlotLoop(context, model);
    const grammar = await model.llama.createGrammarForJsonSchema({ type: "object", properties: { name: { type: "string" }, n: { type: "integer" } }, required: ["name", "n"] });
    const { LlamaGrammarEvaluationState } = await import("node-llama-cpp");
    const p = prompt("json please");
    const run = async (evaluate: (options: SequenceEvaluateOptions) => AsyncIterable<{ token: Token; probabilities?: Map<Token, number>; confidence?: number }>) => {
      const out: Array<{ token: Token; top: Array<[Token, number]>; confidence?: number }> = [];
      const options: SequenceEvaluateOptions = { temperature: 0, yieldEogToken: true, grammarEvaluationState: new LlamaGrammarEvaluationState({ model, grammar }) };
      for await (const t of evaluate(options)) {
        out.push({ token: t.token, top: [...(t.probabilities ?? new Map<Token, number>())].slice(0, 3), confidence: t.confidence });
        if (model.isEogToken(t.token) || out.length === 40) break;
      }
      return out;
    };
    const ours = context.getSequence();
    const theirs = context.getSequence();
    const metadata = { probabilities: true, confidence: true };
    const a = await run((o) => loop.evaluate(ours, p, metadata, o));
    const b = await run((o) => theirs.evaluateWithMetadata(p, metadata, o));
    expect(a.length).toBeGreaterThan(3);
    expect(a).toEqual(b);
    expect(a[0]!.top.length).toBeGreaterThan(0);
    expect(a[0]!.confidence).toBeGreaterThan(0);
    // The grammar held: what was sampled parses as the schema's object.
    const text = model.detokenize(a.filter((t) => !model.isEogToken(t.token)).map((t) => t.token));
    if (a.some((t) => model.isEogToken(t.token))) expect(Object.keys(JSON.parse(text) as object).sort()).toEqual(["n", "name"]);
    else expect(text.trimStart().startsWith("{")).toBe(true);
    expect(state(ours)).toEqual(state(theirs));
    ours.dispose();
    theirs.dispose();
  });

  it("reads a prompt longer than a batch in chunks, beside the steps of a generating sequence", async () => {
    const small = await model.createContext({ contextSize: 1024, sequences: 3, threads: 1, batchSize: 64 });
    try {
      const loop = new SlotLoop(small, model, withoutGuesses);
      const batches: Array<Array<{ id: number; tokens: number; logits: number }>> = [];
      const undo = spyOnBinding(small, (method, args) => {
        if (method === "initBatch") batches.push([]);
        if (method === "addToBatch") batches.at(-1)!.push({ id: args[0] as number, tokens: (args[2] as Uint32Array).length, logits: (args[3] as Uint32Array).length });
      });
      const options = { temperature: 0, yieldEogToken: true };
      const [s1, s2] = [small.getSequence(), small.getSequence()];
      const longPrompt = prompt(Array.from({ length: 60 }, (_, i) => `word${i}`).join(" "));
      expect(longPrompt.length).toBeGreaterThan(200);
      let long: Promise<Token[]> | undefined;
      let firstLong: Token[] = [];
      try {
        await take(loop.evaluate(s1, prompt("keep going"), {}, options), 40, (n) => {
          if (n === 5) long = take(loop.evaluate(s2, longPrompt, {}, options), 10);
        });
        firstLong = await long!;
      } finally {
        undo();
      }
      // Alone, the long prompt gives the same answer.
      const alone = small.getSequence();
      const theirs = await take(alone.evaluateWithMetadata(longPrompt, {}, options), 10);
      expect(firstLong).toEqual(theirs);
      // Its chunks never filled a batch past its size, only its last chunk asked for logits, and every batch
      // that carried a chunk of it also carried the other sequence's step while that one was generating.
      const chunks = batches.filter((b) => b.some((item) => item.id === idOf(s2) && item.tokens > 8));
      expect(chunks.length).toBeGreaterThanOrEqual(Math.ceil(longPrompt.length / 64));
      for (const b of batches) expect(b.reduce((n, item) => n + item.tokens, 0)).toBeLessThanOrEqual(64);
      expect(chunks.filter((b) => b.some((item) => item.id === idOf(s2) && item.logits > 0)).length).toBe(1);
      expect(chunks.filter((b) => b.some((item) => item.id === idOf(s1))).length).toBeGreaterThanOrEqual(chunks.length - 1);
      alone.dispose();
      s1.dispose();
      s2.dispose();
    } finally {
      await small.dispose();
    }
  });

  it("ends an evaluation whose request is aborted within a batch, even in the middle of its prompt", async () => {
    const small = await model.createContext({ contextSize: 1024, sequences: 1, threads: 1, batchSize: 32 });
    try {
      const loop = new SlotLoop(small, model, withoutGuesses);
      const s = small.getSequence();
      const longPrompt = prompt(Array.from({ length: 60 }, (_, i) => `word${i}`).join(" "));
      const controller = new AbortController();
      let batches = 0;
      const undo = spyOnBinding(small, (method) => {
        if (method === "initBatch" && ++batches === 2) controller.abort();
      });
      let yielded = 0;
      try {
        for await (const _ of loop.evaluate(s, longPrompt, {}, { temperature: 0, yieldEogToken: true }, undefined, controller.signal)) yielded++;
      } finally {
        undo();
      }
      // Aborted while its second chunk decoded: that chunk finished, nothing after it was decoded or sampled.
      expect(yielded).toBe(0);
      expect(batches).toBe(2);
      expect(s.nextTokenIndex).toBe(64);
      expect(s.contextTokens).toEqual(longPrompt.slice(0, 64));
      s.dispose();
    } finally {
      await small.dispose();
    }
  });
});
