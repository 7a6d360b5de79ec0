// The Vercel AI SDK's OpenAI provider against the real server: `openai(modelId)` speaks the Responses API.
import { createOpenAI } from "@ai-sdk/openai";
import { APICallError, generateText, jsonSchema, Output, streamText } from "ai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import { validateJsonAgainstSchema } from "../../server/engine/json-schema-grammar.js";
import { forcedWeatherCall } from "../support/ai-sdk-weather.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let openai: ReturnType<typeof createOpenAI>;
/** The same provider with a key whose reasoning-trace flag is on. */
let tracing: ReturnType<typeof createOpenAI>;
/** Every request the provider sent: its URL and JSON body. */
const sent: Array<{ url: string; body: any }> = [];
const greedy = greedyTexts();

beforeAll(async () => {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  const traceKey = createKey(dataDir, "--reasoning-trace");
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
  openai = createOpenAI({
    baseURL: `${server.url}/v1`,
    apiKey: key,
    fetch: async (url, init) => {
      sent.push({ url: String(url), body: typeof init?.body === "string" ? JSON.parse(init.body) : undefined });
      return fetch(url, init);
    },
  });
  tracing = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: traceKey });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

describe("Vercel AI SDK, OpenAI provider (Responses API)", () => {
  it("generateText: the answer, finish reason, usage with reasoning tokens, the response id", async () => {
    const result = await generateText({ model: openai("svc"), prompt: "Hello", temperature: 0, maxRetries: 0 });
    expect(sent.at(-1)!.url).toBe(`${server.url}/v1/responses`);
    expect(sent.at(-1)!.body.input).toEqual([{ role: "user", content: [{ type: "input_text", text: "Hello" }] }]);
    expect(result.text).toBe(greedy.answer.trim());
    expect(result.finishReason).toBe("stop");
    expect(result.response.id).toMatch(/^resp_/);
    expect(result.response.modelId).toBe("svc-thinking");
    expect(result.usage.outputTokenDetails.reasoningTokens).toBe(5);
    expect(result.usage.totalTokens).toBe(result.usage.inputTokens! + result.usage.outputTokens!);
  });

  it("streamText: text deltas, finish reason and usage", async () => {
    const result = streamText({ model: openai("svc"), prompt: "Hello", temperature: 0, maxRetries: 0 });
    const chunks: string[] = [];
    for await (const chunk of result.textStream) chunks.push(chunk);
    expect(sent.at(-1)!.body.stream).toBe(true);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.join("")).toBe(greedy.answer.trim());
    expect(await result.finishReason).toBe("stop");
    expect((await result.usage).outputTokenDetails.reasoningTokens).toBe(5);
  });

  it("a key with the reasoning trace flag: the thought arrives as reasoning, generated and streamed", async () => {
    const result = await generateText({ model: tracing("svc"), prompt: "Hello", temperature: 0, maxRetries: 0 });
    expect(result.reasoningText).toBe(greedy.thought.trim());
    expect(result.text).toBe(greedy.answer.trim());
    const streamed = streamText({ model: tracing("svc"), prompt: "Hello", temperature: 0, maxRetries: 0 });
    const order: string[] = [];
    let reasoning = "";
    for await (const part of streamed.fullStream) {
      if (part.type === "reasoning-delta") {
        order.push("reasoning");
        reasoning += part.text;
      } else if (part.type === "text-delta") order.push("text");
      else if (part.type === "error") throw part.error;
    }
    expect(reasoning).toBe(greedy.thought.trim());
    expect(order.lastIndexOf("reasoning")).toBeLessThan(order.indexOf("text"));
    expect(await streamed.text).toBe(greedy.answer.trim());
  });

  it("a tool call, its result sent back as function_call_output, then the answer", async () => {
    const calls: unknown[] = [];
    const result = await generateText({
      model: openai("svc"),
      ...forcedWeatherCall(calls),
      temperature: 0,
      maxRetries: 0,
    });
    expect(result.steps).toHaveLength(2);
    expect(result.steps[0]!.finishReason).toBe("tool-calls");
    expect(result.steps[0]!.toolCalls.map((c) => c.toolName)).toEqual(["get_weather"]);
    expect(calls).toHaveLength(1);
    expect(validateJsonAgainstSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }, calls[0])).toEqual({ valid: true });
    const second = sent.at(-1)!.body.input as Array<{ type?: string; call_id?: string }>;
    const call = second.find((i) => i.type === "function_call")!;
    expect(second.find((i) => i.type === "function_call_output")).toMatchObject({ call_id: call.call_id });
    expect(result.text).toBe(greedy.answer.trim());
    expect(result.finishReason).toBe("stop");
  });

  it("structured output with Output.object: text.format json_schema, and the object satisfies it", async () => {
    const schema = { type: "object", properties: { city: { type: "string" }, unit: { enum: ["c", "f"] } }, required: ["city", "unit"], additionalProperties: false } as const;
    const result = await generateText({
      model: openai("svc"),
      prompt: "City?",
      output: Output.object({ schema: jsonSchema<{ city: string; unit: "c" | "f" }>(schema) }),
      temperature: 0,
      maxRetries: 0,
    });
    expect(sent.at(-1)!.body.text.format).toMatchObject({ type: "json_schema", schema });
    expect(validateJsonAgainstSchema(schema, result.output)).toEqual({ valid: true });
  });

  it("multi-turn: with store false the earlier answer is sent back whole; by default it is an item_reference, refused", async () => {
    const first = await generateText({ model: openai("svc"), prompt: "Hi", temperature: 0, maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "Hi" }, ...first.response.messages, { role: "user" as const, content: "More" }];
    const next = await generateText({ model: openai("svc"), messages, temperature: 0, maxRetries: 0, providerOptions: { openai: { store: false } } });
    expect(sent.at(-1)!.body.input[1]).toMatchObject({ role: "assistant", content: [{ type: "output_text", text: greedy.answer.trim() }] });
    expect(next.text).toBe(greedy.answer.trim());

    const err = await generateText({ model: openai("svc"), messages, temperature: 0, maxRetries: 0 }).catch((e: unknown) => e);
    expect(sent.at(-1)!.body.input[1]).toMatchObject({ type: "item_reference" });
    expect(APICallError.isInstance(err)).toBe(true);
    expect((err as APICallError).statusCode).toBe(400);
    expect((err as APICallError).message).toContain("store to false");
  });
});
