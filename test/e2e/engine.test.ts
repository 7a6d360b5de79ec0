// The real engine on the tiny model, without HTTP: scheduling, cancellation and the generation state machine.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import { LlamaEngine } from "../../server/engine/llama-engine.js";
import type { EngineEvent, EngineRequest } from "../../server/engine/types.js";

let engine: LlamaEngine;
const greedy = greedyTexts();

const base: EngineRequest = {
  messages: [{ role: "user", content: [{ type: "text", text: "Hello" }] }],
  tools: [],
  toolChoice: { type: "auto" },
  parallelToolCalls: true,
  output: { type: "text" },
  mode: "thinking",
  reasoningBudget: 1000,
  stopSequences: [],
  sampling: { temperature: 0 },
};
const longJson: EngineRequest = {
  ...base,
  mode: "fast",
  reasoningBudget: 0,
  output: {
    type: "json_schema",
    schema: { type: "object", properties: { xs: { type: "array", items: { type: "integer" }, minItems: 1000 } }, required: ["xs"] },
  },
};

async function collect(request: EngineRequest, signal = new AbortController().signal): Promise<EngineEvent[]> {
  const out: EngineEvent[] = [];
  for await (const e of engine.generate(request, signal)) out.push(e);
  return out;
}

beforeAll(async () => {
  engine = await LlamaEngine.load({ modelPath: inject("tinyModelPath"), threads: 1, sequences: 1, contextSize: 4096, gpu: "cpu" });
});
afterAll(async () => engine.close());

describe("LlamaEngine", () => {
  it("emits start, reasoning deltas, text deltas and done, in that order", async () => {
    const events = await collect(base);
    expect(events[0]).toMatchObject({ type: "start", mode: "thinking" });
    const kinds = events.map((e) => e.type);
    expect(kinds.lastIndexOf("reasoning.delta")).toBeLessThan(kinds.indexOf("text.delta"));
    const done = events.at(-1)!;
    expect(done.type).toBe("done");
    if (done.type !== "done") return;
    expect(done.outcome.reasoning).toBe(greedy.thought.trim());
    expect(done.outcome.text).toBe(greedy.answer.trim());
    const streamed = events.filter((e) => e.type === "text.delta").map((e) => (e as { text: string }).text).join("");
    expect(streamed).toBe(done.outcome.text);
  });

  it("an abort ends the generation without a result and frees the sequence", async () => {
    const controller = new AbortController();
    const seen: EngineEvent[] = [];
    const started = Date.now();
    for await (const e of engine.generate(longJson, controller.signal)) {
      seen.push(e);
      if (seen.length === 5) controller.abort();
    }
    expect(seen.some((e) => e.type === "done")).toBe(false);
    expect(seen.length).toBeLessThan(10);
    expect(Date.now() - started).toBeLessThan(1500);
    expect(engine.status()).toMatchObject({ active: 0, queued: 0 });
    // The freed sequence serves the next request.
    expect((await collect(base)).at(-1)!.type).toBe("done");
  });

  it("queues a second request while the only sequence is busy, then serves it", async () => {
    const first = collect({ ...longJson, maxTokens: 300 });
    await new Promise((r) => setTimeout(r, 20));
    const second = collect(base);
    await new Promise((r) => setTimeout(r, 20));
    expect(engine.status()).toMatchObject({ active: 1, queued: 1 });
    const [a, b] = await Promise.all([first, second]);
    expect(a.at(-1)).toMatchObject({ type: "done", outcome: { stopReason: "max_tokens" } });
    expect(b.at(-1)).toMatchObject({ type: "done", outcome: { stopReason: "end_turn" } });
    expect(engine.status()).toMatchObject({ active: 0, queued: 0 });
  });

  it("a waiting request that is cancelled leaves the queue", async () => {
    const first = collect({ ...longJson, maxTokens: 200 });
    await new Promise((r) => setTimeout(r, 20));
    const controller = new AbortController();
    const waiting = collect(base, controller.signal).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 10));
    expect(engine.status().queued).toBe(1);
    controller.abort(new Error("gone"));
    expect(await waiting).toBeInstanceOf(Error);
    expect(engine.status().queued).toBe(0);
    await first;
  });

  it("reuses the cached prefix of an identical prompt, all but the last token", async () => {
    const a = await collect(base);
    const b = await collect(base);
    const start = b[0]!;
    expect(start.type).toBe("start");
    if (start.type !== "start") return;
    expect(start.cachedTokens).toBe(start.promptTokens - 1);
    expect(a[0]).toMatchObject({ promptTokens: start.promptTokens });
  });

  it("refuses a prompt longer than the context with a 400, before generating", async () => {
    const long = { ...base, messages: [{ role: "user" as const, content: [{ type: "text" as const, text: "x".repeat(5000) }] }] };
    await expect(collect(long)).rejects.toMatchObject({ kind: "invalid_request", code: "context_length_exceeded" });
  });

  it("counts reasoning tokens exactly against the budget and closes the thought", async () => {
    const done = (await collect({ ...base, reasoningBudget: 3 })).at(-1)!;
    if (done.type !== "done") throw new Error("no result");
    expect(done.outcome.usage.reasoningTokens).toBe(3);
    expect(done.outcome.reasoning.split(" ")).toHaveLength(3);
    expect(done.outcome.text).toBe(greedy.answer.trim());
  });

  it("stops at max_tokens with the reasoning budget spent: empty answer, stop reason max_tokens", async () => {
    const done = (await collect({ ...base, maxTokens: 4 })).at(-1)!;
    if (done.type !== "done") throw new Error("no result");
    expect(done.outcome).toMatchObject({ text: "", stopReason: "max_tokens" });
    expect(done.outcome.usage.completionTokens).toBeLessThanOrEqual(4);
  });
});
