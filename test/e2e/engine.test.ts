// The real engine on the tiny model, without HTTP: cancellation, the prefix cache and the generation state
// machine; and the pipeline's scheduler in front of it (queueing, classes, cancellation while waiting).
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import type { InferenceRequest } from "../../server/core/inference.js";
import { EngineHost } from "../../server/engine/engine-host.js";
import { LlamaEngine } from "../../server/engine/llama-engine.js";
import { InferencePipeline } from "../../server/pipeline/pipeline.js";
import type { WorkClass } from "../../server/pipeline/scheduler.js";
import type { EngineEvent, EngineRequest } from "../../server/engine/types.js";
import { engineRequest } from "../support/engine-request.js";

let engine: LlamaEngine;
const greedy = greedyTexts();

const base: EngineRequest = engineRequest({ mode: "thinking", reasoningBudget: 1000, maxTokens: undefined });
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
    // The freed sequence serves the next request.
    expect((await collect(base)).at(-1)!.type).toBe("done");
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

describe("the scheduler in front of the engine (one sequence)", () => {
  const request = (text: string, maxTokens?: number): InferenceRequest => ({
    surface: "chat",
    messages: [{ role: "user", content: [{ type: "text", text }] }],
    tools: [],
    toolChoice: { type: "auto" },
    output: maxTokens ? longJson.output : { type: "text" },
    reasoning: { mode: "fast", budgetTokens: 0, effort: "none" },
    ...(maxTokens ? { maxTokens } : {}),
    stopSequences: [],
    sampling: { temperature: 0 },
  });
  let pipeline: InferencePipeline;
  beforeAll(() => {
    pipeline = new InferencePipeline(EngineHost.of(engine));
  });

  it("queues a second request while the only sequence is busy, then serves it", async () => {
    const first = pipeline.complete(request("Hello", 300), { signal: new AbortController().signal, accountId: "a" });
    await until(() => pipeline.scheduler.stats().running === 1);
    const second = pipeline.complete(request("Hello"), { signal: new AbortController().signal, accountId: "b" });
    await until(() => pipeline.scheduler.stats().waiting === 1);
    expect(pipeline.scheduler.stats()).toMatchObject({ running: 1, waiting: 1 });
    const [a, b] = await Promise.all([first, second]);
    expect(a.stopReason).toBe("max_tokens");
    expect(b.stopReason).toBe("end_turn");
    expect(pipeline.scheduler.stats()).toMatchObject({ running: 0, waiting: 0 });
  });

  it("a waiting request that is cancelled leaves the queue at once", async () => {
    const first = pipeline.complete(request("Hello", 200), { signal: new AbortController().signal, accountId: "a" });
    await until(() => pipeline.scheduler.stats().running === 1);
    const controller = new AbortController();
    const waiting = pipeline.complete(request("Hello"), { signal: controller.signal, accountId: "a" }).catch((e: unknown) => e);
    await until(() => pipeline.scheduler.stats().waiting === 1);
    controller.abort(new Error("gone"));
    expect(await waiting).toMatchObject({ message: "gone" });
    expect(pipeline.scheduler.stats().waiting).toBe(0);
    await first;
  });

  it("with one sequence, an interactive request sent during a flood of batch work starts next", async () => {
    const order: string[] = [];
    const run = (name: string, workClass: WorkClass) =>
      pipeline.open(request(name, workClass === "batch" ? 200 : undefined), { signal: new AbortController().signal, accountId: "a", workClass }).then(async (stream) => {
        order.push(name);
        for await (const _ of stream) void _;
      });
    const batch = Array.from({ length: 6 }, (_, i) => run(`batch ${i}`, "batch"));
    await until(() => order.length === 1);
    const chat = run("chat", "interactive");
    await Promise.all([...batch, chat]);
    expect(order.slice(0, 2)).toEqual(["batch 0", "chat"]);
    expect(order).toHaveLength(7);
  });
});

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !condition(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!condition()) throw new Error("timed out");
}
