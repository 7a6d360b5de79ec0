// The slot loop sets each decode's threads (thread-policy.ts's DecodeThreads) on the real binding, just before
// the decode: all threads for a prompt and for a step of several sequences, the single count for a lone
// sequence's step. Watched at the binding (the calls node-llama-cpp's addon receives), on the tiny test model.
import { getLlama, type LlamaContext, type LlamaModel, type Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { SlotLoop } from "../../server/engine/slot-loop.js";
import { DecodeThreads } from "../../server/engine/thread-policy.js";
import { busyContention } from "../support/busy-machine.js";
import { spyOnBinding } from "../support/binding-spy.js";
import { take } from "../support/take-tokens.js";

let model: LlamaModel;
let context: LlamaContext;

beforeAll(async () => {
  const llama = await getLlama({ build: "never", gpu: false });
  model = await llama.loadModel({ modelPath: inject("tinyModelPath") });
  context = await model.createContext({ contextSize: 1024, sequences: 2, threads: 2 });
});
afterAll(async () => {
  await context?.dispose();
  await model?.dispose();
});

/** What the binding was asked, in order: each decode as "decode:TOKENS@THREADS" (the threads last set before it). */
async function watch(work: () => Promise<unknown>): Promise<string[]> {
  const calls: string[] = [];
  let threads = -1;
  let tokens = 0;
  const undo = spyOnBinding(context, (method, args) => {
    if (method === "setThreads") threads = args[0] as number;
    else if (method === "initBatch") tokens = 0;
    else if (method === "addToBatch") tokens += (args[2] as Uint32Array).length;
    else if (method === "decodeBatch") calls.push(`decode:${tokens}@${threads}`);
  });
  try {
    await work();
  } finally {
    undo();
  }
  return calls;
}

describe("the slot loop's threads per decode", () => {
  it("a prompt and a step of two sequences with all threads, a lone sequence's steps with one", async () => {
    const loop = new SlotLoop(context, model, { solo: false, stepSampling: false, speculation: false, queuedSamplings: false }, null, undefined, DecodeThreads.for({ batch: 2, single: 1 }));
    const prompt = model.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", true);
    const alone = context.getSequence();
    const lone = await watch(() => take(loop.evaluate(alone, prompt, {}, { temperature: 0 }), 4));
    alone.dispose();
    // The prompt in one decode with 2 threads, then one token a step with 1.
    expect(lone[0]).toBe(`decode:${prompt.length}@2`);
    expect(lone.slice(1).length).toBeGreaterThanOrEqual(3);
    for (const step of lone.slice(1)) expect(step).toBe("decode:1@1");

    const [a, b] = [context.getSequence(), context.getSequence()];
    const both = await watch(() => Promise.all([a, b].map((s) => take(loop.evaluate(s, prompt, {}, { temperature: 0 }), 6))));
    a.dispose();
    b.dispose();
    // Steps that decode both sequences' tokens together take 2 threads.
    expect(both).toContain("decode:2@2");
    for (const call of both) {
      const [tokens, threads] = call.slice("decode:".length).split("@").map(Number) as [number, number];
      expect(threads).toBe(tokens > 1 ? 2 : 1);
    }
  });

  it("a model the loop cannot drive (node-llama-cpp's own evaluation) decodes with the cores another process leaves, through node-llama-cpp's thread maximum", async () => {
    const llama = model.llama;
    const before = llama.maxThreads;
    // A binding without the loop's shapes: the loop hands the evaluation to node-llama-cpp.
    const foreign = new Proxy(context, { get: (target, key) => (key === "_ctx" ? {} : Reflect.get(target, key, target)) });
    const policy = (busy: number) => DecodeThreads.for({ batch: 2, single: 2 }, { contention: busyContention(busy), cores: 2 });
    const prompt = model.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", true);
    const answer = async (loop: SlotLoop) => {
      const sequence = context.getSequence();
      try {
        let tokens: Token[] = [];
        const calls = await watch(async () => (tokens = await take(loop.evaluate(sequence, prompt, {}, { temperature: 0 }), 6)));
        return { tokens, calls };
      } finally {
        sequence.dispose();
      }
    };
    try {
      const driven = await answer(new SlotLoop(context, model, { solo: false, stepSampling: false, speculation: false, queuedSamplings: false }, null));
      const quietLoop = new SlotLoop(foreign, model, { solo: false, stepSampling: false, speculation: false, queuedSamplings: false }, null, undefined, policy(0));
      expect(quietLoop.describe()).toBe("node-llama-cpp's evaluate for every token (its binding lacks the slot loop's shapes)");
      const quiet = await answer(quietLoop);
      expect(quiet.tokens).toEqual(driven.tokens);
      expect(quiet.calls.length).toBeGreaterThanOrEqual(5);
      for (const call of quiet.calls) expect(call).toMatch(/@2$/);
      // Busy: the policy's first reading starts its window (all threads for the prompt), then 1 thread.
      const busy = await answer(new SlotLoop(foreign, model, { solo: false, stepSampling: false, speculation: false, queuedSamplings: false }, null, undefined, policy(1)));
      expect(busy.tokens).toEqual(driven.tokens);
      expect(busy.calls[0]).toBe(`decode:${prompt.length}@2`);
      for (const call of busy.calls.slice(1)) expect(call).toBe("decode:1@1");
    } finally {
      llama.maxThreads = before;
    }
  });

  it("without a policy the loop leaves the context's own count alone", async () => {
    const loop = new SlotLoop(context, model, { solo: false, stepSampling: false, speculation: false, queuedSamplings: false }, null);
    const sequence = context.getSequence();
    const calls: string[] = [];
    const undo = spyOnBinding(context, (method) => calls.push(method));
    try {
      await take(loop.evaluate(sequence, model.tokenize("hello", false) as Token[], {}, { temperature: 0 }), 3);
    } finally {
      undo();
      sequence.dispose();
    }
    expect(calls).toContain("decodeBatch");
    expect(calls).not.toContain("setThreads");
  });
});
