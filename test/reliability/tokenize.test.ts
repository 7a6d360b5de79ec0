// Reading prompts into tokens with the cost bounded (server/engine/prompt-tokens.ts), on the real tokenizer
// of the generated model, whose cost for a run of one character is quadratic (the defect: 256 KB of "x"
// held the event loop for 6 s). The pieces give the same tokens as one call for ordinary text, the event
// loop keeps turning while a pathological input is read, and reading stops at the context size, at the
// deadline, or when the client leaves. Also the engine's and the pipeline's answers to such prompts.
import { getLlama, LlamaLogLevel, resolveChatWrapper, type ChatWrapper, type LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { InferenceRequest } from "../../server/core/inference.js";
import { EngineHost } from "../../server/engine/engine-host.js";
import { LlamaEngine } from "../../server/engine/llama-engine.js";
import { renderPromptText, toChatHistory } from "../../server/engine/prompt.js";
import { longestTokenChars, pieceEnd, PromptTooLongError, TokenizeDeadlineError, tokenizeWithin } from "../../server/engine/prompt-tokens.js";
import type { EngineRequest } from "../../server/engine/types.js";
import { InferencePipeline } from "../../server/pipeline/pipeline.js";
import { engineRequest } from "../support/engine-request.js";

let model: LlamaModel;
let wrapper: ChatWrapper;
let engine: LlamaEngine;

beforeAll(async () => {
  const llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
  model = await llama.loadModel({ modelPath: inject("tinyModelPath") });
  wrapper = resolveChatWrapper(model)!;
  engine = await LlamaEngine.load({ modelPath: inject("tinyModelPath"), threads: 1, sequences: 1, contextSize: 4096, gpu: "cpu", tokenizeTimeoutMs: 2000 });
});
afterAll(async () => {
  await engine?.close();
  await model?.dispose();
});

const user = (text: string): EngineRequest["messages"] => [{ role: "user", content: [{ type: "text", text }] }];
const far = () => performance.now() + 60_000;

function prose(chars: number): string {
  const words = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog,", "and\n", "then", "rests."];
  let out = "";
  for (let i = 0; out.length < chars; i++) out += (i ? " " : "") + words[(i * 7) % words.length];
  return out;
}

describe("pieceEnd", () => {
  it("ends a piece just before a space that follows a non-space, never inside a surrogate pair", () => {
    expect(pieceEnd("aaaa bbbb cccc", 0, 10)).toBe(9);
    expect(pieceEnd("short", 0, 8)).toBe(5);
    // No boundary in the second half of the window: a hard cut.
    expect(pieceEnd("x".repeat(20), 0, 8)).toBe(8);
    // Runs of spaces are not split inside.
    expect(pieceEnd("abcdef    ghij", 0, 9)).toBe(6);
    const emoji = "x".repeat(7) + "😀" + "x".repeat(10);
    expect(pieceEnd(emoji, 0, 8)).toBe(7);
  });
});

describe("tokenizeWithin", () => {
  it("gives the same tokens as one call for ordinary prompts, short and long", async () => {
    for (const text of ["Hello", prose(20_000)]) {
      const rendered = renderPromptText(wrapper, [{ role: "system", content: [{ type: "text", text: "Be brief." }] }, ...user(text)], []);
      const whole = rendered.tokenize(model.tokenizer);
      expect(await tokenizeWithin(rendered, model.tokenizer, { maxTokens: 1e9, deadline: far() })).toEqual(whole);
    }
    expect(toChatHistory(user("x"), []).length).toBeGreaterThan(0);
  });

  it("keeps the event loop turning while 256 KB of one character is read (it held it 6 s in one call)", async () => {
    const rendered = renderPromptText(wrapper, user("x".repeat(256 * 1024)), []);
    // The most processor time spent between two turns of the event loop (a timer every 5 ms): one call over the
    // whole text would show as one long stretch. Processor time, not the loop's delay, which also counts the
    // time two loaded cores give this process nothing (CI read such delays of 110 to 137 ms elsewhere).
    let longestMs = 0;
    let last = process.cpuUsage();
    const sample = () => {
      const used = process.cpuUsage(last);
      longestMs = Math.max(longestMs, (used.user + used.system) / 1000);
      last = process.cpuUsage();
    };
    const ticks = setInterval(sample, 5);
    const started = performance.now();
    const tokens = await tokenizeWithin(rendered, model.tokenizer, { maxTokens: 1e9, deadline: far() });
    const took = performance.now() - started;
    clearInterval(ticks);
    sample();
    expect(tokens.length).toBeGreaterThan(256 * 1024 / 16);
    // Pieces of 4 KB cost about 2 ms each on this tokenizer; allow a loaded CI machine 20x that.
    expect(longestMs).toBeLessThan(100);
    expect(took).toBeLessThan(10_000);
  });

  it("stops as soon as the prompt has more tokens than the context holds", async () => {
    const rendered = renderPromptText(wrapper, user("x".repeat(1024 * 1024)), []);
    const started = performance.now();
    const err = await tokenizeWithin(rendered, model.tokenizer, { maxTokens: 4096, deadline: far() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PromptTooLongError);
    expect((err as PromptTooLongError).atLeastTokens).toBeGreaterThan(4096);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it("gives up at the deadline, and stops when the signal aborts", async () => {
    const rendered = renderPromptText(wrapper, user("x".repeat(512 * 1024)), []);
    const started = performance.now();
    const late = await tokenizeWithin(rendered, model.tokenizer, { maxTokens: 1e9, deadline: performance.now() + 50 }).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(TokenizeDeadlineError);
    expect(performance.now() - started).toBeLessThan(1000);

    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("client left")), 30);
    const left = await tokenizeWithin(rendered, model.tokenizer, { maxTokens: 1e9, deadline: far(), signal: controller.signal }).catch((e: unknown) => e);
    expect((left as Error).message).toBe("client left");
  });

  it("knows the most characters one token stands for", () => {
    expect(longestTokenChars(["a", "\u2581hello", "<0x0A>", "<|im_end|>"])).toBe(10);
    expect(longestTokenChars(undefined)).toBe(1024);
    expect(engine.status().model?.maxTokenChars).toBeGreaterThanOrEqual(4);
  });
});

describe("the prompt of a deeply nested tool call", () => {
  it("renders: arguments nested past 256 levels are shown to the template as their text", () => {
    const args = "[".repeat(20_000) + "1" + "]".repeat(20_000);
    const rendered = renderPromptText(
      wrapper,
      [
        ...user("hi"),
        { role: "assistant", content: [], toolCalls: [{ id: "c1", name: "f", arguments: args }] },
        { role: "tool", toolCallId: "c1", content: [{ type: "text", text: "ok" }] },
      ],
      [{ name: "f", parameters: { type: "object" } }],
    );
    expect(rendered.toString()).toContain(args);
  });
});

describe("the engine and the pipeline", () => {
  const request = (text: string): EngineRequest => engineRequest({ messages: user(text), maxTokens: 4 });

  it("the engine answers 400 context_length_exceeded for a prompt over the context, after reading only the context's worth", async () => {
    const started = performance.now();
    const err = await engine.generate(request("x".repeat(60_000)), new AbortController().signal).next().catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, code: "context_length_exceeded" });
    expect((err as Error).message).toContain("more than");
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it("the pipeline refuses a prompt that cannot fit by its length alone, before the engine sees it", async () => {
    const host = EngineHost.of(engine);
    const pipeline = new InferencePipeline(host);
    const inference: InferenceRequest = {
      surface: "chat",
      messages: user("x".repeat(1024 * 1024)),
      tools: [],
      toolChoice: { type: "auto" },
      output: { type: "text" },
      reasoning: { mode: "fast", effort: "none", budgetTokens: 0 },
      stopSequences: [],
      sampling: {},
    };
    const started = performance.now();
    const err = await pipeline.open(inference, { signal: new AbortController().signal, accountId: "a" }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, code: "context_length_exceeded" });
    expect((err as Error).message).toMatch(/1048576 characters/);
    expect(performance.now() - started).toBeLessThan(200);
  });
});
