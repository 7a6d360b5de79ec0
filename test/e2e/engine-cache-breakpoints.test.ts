// Cache breakpoints on the real engine and the tiny model's chat template: where a breakpoint ends in the
// rendered prompt, and how that splits a prompt into cache reads and cache writes.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { CanonicalMessage, ToolDefinition } from "../../server/core/inference.js";
import { LlamaEngine } from "../../server/engine/llama-engine.js";
import type { CacheBreakpoint, EngineEvent, EngineRequest } from "../../server/engine/types.js";
import { engineRequest } from "../support/engine-request.js";

let engine: LlamaEngine;

beforeAll(async () => {
  engine = await LlamaEngine.load({ modelPath: inject("tinyModelPath"), threads: 1, sequences: 1, contextSize: 4096, gpu: "cpu" });
});
afterAll(async () => engine.close());

const text = (t: string, cacheBreakpoint = false) => ({ type: "text" as const, text: t, ...(cacheBreakpoint ? { cacheBreakpoint } : {}) });

function request(messages: CanonicalMessage[], cacheBreakpoints: CacheBreakpoint[], tools: ToolDefinition[] = []): EngineRequest {
  return engineRequest({ messages, tools, toolChoice: { type: "none" }, maxTokens: 3, cacheBreakpoints });
}

async function run(r: EngineRequest) {
  const events: EngineEvent[] = [];
  for await (const e of engine.generate(r, new AbortController().signal)) events.push(e);
  const start = events[0]!;
  const done = events.at(-1)!;
  if (start.type !== "start" || done.type !== "done") throw new Error("no complete run");
  expect(done.outcome.usage.cacheWriteTokens).toBe(start.cacheWriteTokens);
  return { ...start, cacheWriteTokens: start.cacheWriteTokens ?? 0 };
}

const GENERATION_PROMPT_TOKENS = 13;

/** A system prompt no earlier request shared, so nothing of it is cached yet. */
const freshSystem = () => `${randomUUID()} You are a careful assistant. `.repeat(8);

/** Where the breakpoint ends, measured on a cold prefix: everything up to it is written now. */
async function breakpointEnd(r: EngineRequest): Promise<number> {
  const start = await run(r);
  expect(start.cachedTokens).toBeLessThan(start.cacheWriteTokens);
  return start.cachedTokens + start.cacheWriteTokens;
}

describe("cache breakpoints", () => {
  it("a system breakpoint: the first request writes the system prefix, the next one reads it and writes nothing", async () => {
    const system = freshSystem();
    const first = await run(request([{ role: "system", content: [text(system, true)] }, { role: "user", content: [text("First?")] }], [{ kind: "content", message: 0, part: 0 }]));
    const end = first.cachedTokens + first.cacheWriteTokens;
    expect(first.cacheWriteTokens).toBeGreaterThan(system.length / 2);
    expect(end).toBeLessThan(first.promptTokens);

    const second = await run(request([{ role: "system", content: [text(system, true)] }, { role: "user", content: [text("Second, longer?")] }], [{ kind: "content", message: 0, part: 0 }]));
    expect(second.cacheWriteTokens).toBe(0);
    // What is reused is the system prefix plus the turn markup both prompts share, no more than a few tokens.
    expect(second.cachedTokens).toBeGreaterThanOrEqual(end);
    expect(second.cachedTokens).toBeLessThanOrEqual(end + 8);
  });

  it("without breakpoints nothing counts as a cache write", async () => {
    const start = await run({ ...request([{ role: "user", content: [text(freshSystem())] }], []), cacheBreakpoints: undefined });
    expect(start.cacheWriteTokens).toBe(0);
  });

  it("a later block ends later: system < first user block < second user block < the whole prompt", async () => {
    const system = freshSystem();
    const messages: CanonicalMessage[] = [
      { role: "system", content: [text(system)] },
      { role: "user", content: [text("Part one of the question."), text("Part two, which is longer than part one.")] },
    ];
    const bySystem = await breakpointEnd(request(messages, [{ kind: "content", message: 0, part: 0 }]));
    const other = freshSystem();
    const withOther = messages.map((m, i) => (i === 0 ? { role: "system" as const, content: [text(other)] } : m));
    const byPart0 = await breakpointEnd(request(withOther, [{ kind: "content", message: 1, part: 0 }]));
    const third = freshSystem();
    const withThird = messages.map((m, i) => (i === 0 ? { role: "system" as const, content: [text(third)] } : m));
    const byPart1 = await run(request(withThird, [{ kind: "content", message: 1, part: 1 }]));
    const part1End = byPart1.cachedTokens + byPart1.cacheWriteTokens;
    // Same-length system prompts, so the offsets are comparable.
    expect(byPart0 - bySystem).toBeGreaterThan("Part one of the question.".length / 4);
    expect(part1End - byPart0).toBeGreaterThan("Part two, which is longer than part one.".length / 4);
    expect(part1End).toBeLessThan(byPart1.promptTokens);
    // Only the turn's end and the generation prompt come after the last block: "<|im_end|>", "\n",
    // "<|im_start|>" and "assistant\n" (10 byte tokens in the tiny vocabulary).
    expect(byPart1.promptTokens - part1End).toBe(GENERATION_PROMPT_TOKENS);
  });

  it("only the last of several breakpoints decides the write", async () => {
    const messages: CanonicalMessage[] = [
      { role: "system", content: [text(freshSystem())] },
      { role: "user", content: [text("Part one."), text("Part two.")] },
    ];
    const both = await run(request(messages, [{ kind: "content", message: 0, part: 0 }, { kind: "content", message: 1, part: 1 }]));
    expect(both.promptTokens - (both.cachedTokens + both.cacheWriteTokens)).toBe(GENERATION_PROMPT_TOKENS);
  });

  it("tool breakpoints end after that tool's definition; later tools end later", async () => {
    const tool = (name: string): ToolDefinition => ({ name, description: `The ${name} tool, described at some length.`, parameters: { type: "object", properties: { q: { type: "string" } } } });
    const tools = [tool("alpha"), tool("bravo")];
    const messages = (): CanonicalMessage[] => [
      { role: "system", content: [text(freshSystem())] },
      { role: "user", content: [text("Hi")] },
    ];
    const afterAlpha = await breakpointEnd(request(messages(), [{ kind: "tool", tool: 0 }], tools));
    const afterBravo = await breakpointEnd(request(messages(), [{ kind: "tool", tool: 1 }], tools));
    const afterSystem = await breakpointEnd(request(messages(), [{ kind: "content", message: 0, part: 0 }], tools));
    // This template renders the system prompt, then the tool definitions.
    expect(afterAlpha).toBeGreaterThan(afterSystem);
    expect(afterBravo - afterAlpha).toBeGreaterThan(JSON.stringify(tools[1]).length / 2);
    // A breakpoint on the user message ends after all of them.
    const afterUser = await breakpointEnd(request(messages(), [{ kind: "tool", tool: 1 }, { kind: "content", message: 1, part: 0 }], tools));
    expect(afterUser).toBeGreaterThan(afterBravo);
  });

  it("a breakpoint on an earlier tool call ends between the call and its result", async () => {
    const history = (): CanonicalMessage[] => [
      { role: "system", content: [text(freshSystem())] },
      { role: "user", content: [text("Weather?")] },
      { role: "assistant", content: [text("Checking.")], toolCalls: [{ id: "t1", name: "get_weather", arguments: '{"city":"Oslo"}' }] },
      { role: "tool", toolCallId: "t1", content: [text("sunny and warm all day long")] },
      { role: "user", content: [text("Thanks!")] },
    ];
    const tools: ToolDefinition[] = [{ name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }];
    const byText = await breakpointEnd(request(history(), [{ kind: "content", message: 2, part: 0 }], tools));
    const byCall = await breakpointEnd(request(history(), [{ kind: "tool_call", message: 2, call: 0 }], tools));
    const byResult = await breakpointEnd(request(history(), [{ kind: "content", message: 3, part: 0 }], tools));
    expect(byCall - byText).toBeGreaterThan('{"city":"Oslo"}'.length / 2);
    expect(byResult - byCall).toBeGreaterThan("sunny and warm all day long".length / 2);
  });
});
