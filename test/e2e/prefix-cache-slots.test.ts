// The real engine with two sequences: a short unrelated request does not evict a long warm prefix cache; the
// next request that continues it finds it whole (issue 18's measured eviction).
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import type { InferenceRequest } from "../../server/core/inference.js";
import { EngineHost } from "../../server/engine/engine-host.js";
import { LlamaEngine } from "../../server/engine/llama-engine.js";
import { InferencePipeline } from "../../server/pipeline/pipeline.js";

let engine: LlamaEngine;
let pipeline: InferencePipeline;

beforeAll(async () => {
  engine = await LlamaEngine.load({ modelPath: inject("tinyModelPath"), threads: 1, sequences: 2, contextSize: 4096, gpu: "cpu" });
  pipeline = new InferencePipeline(EngineHost.of(engine));
});
afterAll(async () => engine.close());

const request = (system: string, text: string): InferenceRequest => ({
  surface: "messages",
  messages: [
    { role: "system", content: [{ type: "text", text: system }] },
    { role: "user", content: [{ type: "text", text }] },
  ],
  tools: [],
  toolChoice: { type: "auto" },
  output: { type: "text" },
  reasoning: { mode: "fast", budgetTokens: 0, effort: "none" },
  maxTokens: 8,
  stopSequences: [],
  sampling: { temperature: 0 },
});

async function cachedTokens(r: InferenceRequest): Promise<{ prompt: number; cached: number }> {
  const result = await pipeline.complete(r, { signal: new AbortController().signal, accountId: "a" });
  return { prompt: result.usage.promptTokens, cached: result.usage.cachedTokens };
}

it("keeps a long warm prefix when a short unrelated request comes in between", async () => {
  const longSystem = Array.from({ length: 50 }, (_, i) => `Rule ${i}: answer politely and briefly.`).join(" ");
  const first = await cachedTokens(request(longSystem, "First question?"));
  expect(first.prompt).toBeGreaterThan(1500);
  // Shares only the chat template's opening tokens with the long prompt.
  await cachedTokens(request("Be terse.", "Unrelated."));
  const again = await cachedTokens(request(longSystem, "Second question?"));
  // All of the system prompt comes from the cache (only the differing question is read again).
  expect(again.cached).toBeGreaterThan(first.prompt * 0.9);
});
