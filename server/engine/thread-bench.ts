// Measures how fast a model generates on the CPU with different thread counts, so a user can check the
// automatic choice on their machine (`svc models bench-threads`). A JSON-array grammar makes any model
// produce exactly the requested number of tokens, so every run measures the same amount of work.
import { availableParallelism } from "node:os";
import { LlamaEngine } from "./llama-engine.js";
import { threadCandidates } from "./resource-plan.js";
import type { EngineRequest } from "./types.js";

export interface ThreadBenchResult {
  threads: number;
  tokensPerSecond: number;
  promptTokensPerSecond: number;
}

function request(tokens: number, round: number): EngineRequest {
  return {
    // A different prompt each round, so no run reuses another's cached prompt.
    messages: [{ role: "user", content: [{ type: "text", text: `Round ${round}. List numbers. ${"Count upwards from one. ".repeat(40)}` }] }],
    tools: [],
    toolChoice: { type: "auto" },
    parallelToolCalls: false,
    output: {
      type: "json_schema",
      // Every item takes at least one token, so the array cannot end before maxTokens; a larger minItems only
      // makes the grammar slower to build.
      schema: { type: "object", properties: { xs: { type: "array", items: { type: "integer" }, minItems: tokens } }, required: ["xs"] },
    },
    mode: "fast",
    reasoningBudget: 0,
    maxTokens: tokens,
    stopSequences: [],
    sampling: { temperature: 0 },
  };
}

export async function benchmarkThreads(options: { modelPath: string; threads?: number[]; tokens?: number; rounds?: number }): Promise<ThreadBenchResult[]> {
  const tokens = options.tokens ?? 128;
  const rounds = options.rounds ?? 2;
  const results: ThreadBenchResult[] = [];
  let round = 0;
  for (const threads of options.threads ?? threadCandidates(availableParallelism())) {
    const engine = await LlamaEngine.load({ modelPath: options.modelPath, threads, sequences: 1, contextSize: 2048, gpu: "cpu" });
    try {
      let best: ThreadBenchResult | null = null;
      for (let r = 0; r < rounds; r++) {
        const t0 = performance.now();
        let started = t0;
        let generated = 0;
        let prompt = 0;
        for await (const event of engine.generate(request(tokens, round++), new AbortController().signal)) {
          if (event.type === "start") {
            started = performance.now();
            prompt = event.promptTokens - event.cachedTokens;
          } else if (event.type === "done") generated = event.outcome.usage.completionTokens;
        }
        const ended = performance.now();
        const result = {
          threads,
          tokensPerSecond: generated / Math.max(1e-3, (ended - started) / 1000),
          promptTokensPerSecond: prompt / Math.max(1e-3, (started - t0) / 1000),
        };
        if (!best || result.tokensPerSecond > best.tokensPerSecond) best = result;
      }
      results.push(best!);
    } finally {
      await engine.close();
    }
  }
  return results;
}
