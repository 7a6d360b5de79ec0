// The real engine with several sequences generating at once (they share llama.cpp batches, filled by
// the slot loop): same answers as alone, no stream held up by another that stalls or is cancelled.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensurePeerModel } from "../../bench/peer-model.js";
import { LlamaEngine } from "../../server/engine/llama-engine.js";
import type { EngineRequest } from "../../server/engine/types.js";
import { spyOnBinding } from "../support/binding-spy.js";
import { engineRequest, userMessage } from "../support/engine-request.js";

let engine: LlamaEngine;
/**
 * The same model with the engine build's paths off (chosen at load): every step on node-llama-cpp's
 * token-by-token binding calls (decodeBatch, then sampleToken), for the tests that watch that path at the
 * binding on a machine that has `svc engine build`'s binaries (no solo runs, no samplings in the decode's job).
 */
let tokenByToken: LlamaEngine;
let dir: string;

// A small model with random weights that never ends its turn: every answer runs to max_tokens.
const SHAPE = { nEmbd: 64, nLayers: 1, nHead: 2, nFf: 64, contextLength: 4096, seed: 20 };

const ask = (text: string, maxTokens: number): EngineRequest => engineRequest({ messages: userMessage(text), maxTokens });

async function answer(request: EngineRequest, signal = new AbortController().signal, on: LlamaEngine = engine): Promise<{ text: string; tokens: number }> {
  let text = "";
  let tokens = 0;
  for await (const e of on.generate(request, signal)) {
    if (e.type === "text.delta") text += e.text;
    if (e.type === "done") tokens = e.outcome.usage.completionTokens;
  }
  return { text, tokens };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "svc-parallel-"));
  const modelPath = ensurePeerModel(join(dir, "random.gguf"), SHAPE);
  engine = await LlamaEngine.load({ modelPath, threads: 1, sequences: 4, contextSize: 1024, gpu: "cpu" });
  tokenByToken = await LlamaEngine.load({ modelPath, threads: 1, sequences: 1, contextSize: 1024, gpu: "cpu", tokenPaths: { solo: false, stepSampling: false, speculation: false, queuedSamplings: false } });
});
afterAll(async () => {
  await engine?.close();
  await tokenByToken?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("LlamaEngine with 4 sequences", () => {
  const prompts = ["first stream", "second stream", "third one", "and a fourth"];

  it("gives each of 4 concurrent greedy requests the answer it gets alone", async () => {
    const alone: string[] = [];
    for (const p of prompts) alone.push((await answer(ask(p, 48))).text);
    const together = await Promise.all(prompts.map((p) => answer(ask(p, 48))));
    expect(together.map((r) => r.tokens)).toEqual([48, 48, 48, 48]);
    expect(together.map((r) => r.text)).toEqual(alone);
  });

  it("decodes the streams of a round in one batch, in ascending sequence order (llama.cpp splits any other order)", async () => {
    // llama.cpp decodes a batch for per-sequence KV caches in micro-batches of consecutive ascending sequence
    // ids: 2, 0, 3, 1 would take three or four decodes. Record each batch's sequences at the binding.
    const batches: number[][] = [];
    const undo = spyOnBinding((engine as unknown as { context: object }).context, (method, args) => {
      if (method === "initBatch") batches.push([]);
      if (method === "addToBatch") batches.at(-1)!.push(args[0] as number);
    });
    try {
      const together = await Promise.all(prompts.map((p) => answer(ask(p, 48))));
      expect(together.map((r) => r.tokens)).toEqual([48, 48, 48, 48]);
    } finally {
      undo();
    }
    // How many steps hold all four is the slot loop's business (and the machine's load); here, that shared
    // batches happened at all, and their order.
    const shared = batches.filter((b) => b.length > 1);
    expect(shared.length).toBeGreaterThanOrEqual(20);
    expect(shared.some((b) => b.length === 4)).toBe(true);
    for (const b of shared) expect(b).toEqual([...b].sort((x, y) => x - y));
  });

  // These watch the token-by-token path at the binding: with `svc engine build`'s binaries present, a lone
  // answer's steps would run solo, and steps sample in their decode's job (both tested in test/engine-build),
  // so they run on the engine loaded with those paths off.
  it("produces every token on the slot loop, whose node-llama-cpp shapes are all there", async () => {
    // Without them the loop turns itself off and every token goes through sequence.evaluate: slower, and
    // silently so; this test says so when a node-llama-cpp update moves them.
    const loop = (engine as unknown as { loop: { available: boolean } }).loop;
    expect(loop.available).toBe(true);
    expect((tokenByToken as unknown as { loop: { paths: object } }).loop.paths).toEqual({ solo: false, stepSampling: false, speculation: false, queuedSamplings: false });
    let samples = 0;
    const undo = spyOnBinding((tokenByToken as unknown as { context: object }).context, (method) => {
      if (method === "sampleToken") samples++;
    });
    try {
      expect((await answer(ask("count the steps", 32), undefined, tokenByToken)).tokens).toBe(32);
    } finally {
      undo();
    }
    // Every token sampled once, all by the loop, the first one after the prompt in the prompt's own batch.
    expect(samples).toBe(32);
  });

  it("decodes nothing past an answer that ends at max_tokens (no token decoded ahead to take back)", async () => {
    const adds: Array<{ position: number; length: number }> = [];
    const undo = spyOnBinding((tokenByToken as unknown as { context: object }).context, (method, args) => {
      if (method === "addToBatch") adds.push({ position: args[1] as number, length: (args[2] as Uint32Array).length });
    });
    try {
      expect((await answer(ask("a budget", 12), undefined, tokenByToken)).tokens).toBe(12);
    } finally {
      undo();
    }
    // The prompt (what the cache did not hold of it) in one feed, then tokens 1 to 11 at the positions after
    // it, one each; the 12th ends the answer.
    const promptEnd = adds[0]!.position + adds[0]!.length;
    expect(adds.slice(1)).toEqual(Array.from({ length: 11 }, (_, i) => ({ position: promptEnd + i, length: 1 })));
  });

  it("keeps the other streams generating while one stalls (its reader stops pulling events)", async () => {
    const stalled = engine.generate(ask(prompts[0]!, 400), new AbortController().signal);
    const first = await stalled.next();
    expect(first.value).toMatchObject({ type: "start" });
    await stalled.next();
    // The stalled generation holds a token and asks for no more; the others must still finish.
    const started = performance.now();
    const others = await Promise.all(prompts.slice(1).map((p) => answer(ask(p, 64))));
    expect(others.map((r) => r.tokens)).toEqual([64, 64, 64]);
    expect(performance.now() - started).toBeLessThan(30_000);
    await stalled.return(undefined);
  });

  it("lets the others finish when one is cancelled in the middle", async () => {
    const controller = new AbortController();
    const cancelled = (async () => {
      let n = 0;
      for await (const e of engine.generate(ask(prompts[0]!, 400), controller.signal)) {
        if (e.type === "text.delta" && ++n === 10) controller.abort();
      }
      return n;
    })();
    const others = await Promise.all(prompts.slice(1).map((p) => answer(ask(p, 64))));
    expect(others.map((r) => r.tokens)).toEqual([64, 64, 64]);
    expect(await cancelled).toBeLessThan(400);
    // The sequences are free again: a new request runs.
    expect((await answer(ask("after", 8))).tokens).toBe(8);
  });
});
