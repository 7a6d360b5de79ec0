// The Vercel AI SDK's OpenAI-compatible provider (@ai-sdk/openai-compatible) against the real server: it
// speaks Chat Completions and checks every response against its own zod schemas.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, jsonSchema, Output, streamText } from "ai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import { validateJsonAgainstSchema } from "../../server/engine/json-schema-grammar.js";
import { CITY_SCHEMA, forcedWeatherCall } from "../support/ai-sdk-weather.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let svc: ReturnType<typeof createOpenAICompatible>;
/** Every request the provider sent: its URL and JSON body. */
const sent: Array<{ url: string; body: any }> = [];
const greedy = greedyTexts();
const thought = greedy.thought.trim();
const answer = greedy.answer.trim();

beforeAll(async () => {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
  svc = createOpenAICompatible({
    name: "svc",
    baseURL: `${server.url}/v1`,
    apiKey: key,
    includeUsage: true,
    // Without it the provider sends Output.object as json_object, without the schema.
    supportsStructuredOutputs: true,
    fetch: async (url, init) => {
      sent.push({ url: String(url), body: typeof init?.body === "string" ? JSON.parse(init.body) : undefined });
      return fetch(url, init);
    },
  });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

describe("Vercel AI SDK, OpenAI-compatible provider (Chat Completions)", () => {
  it("generateText: reasoning_content as reasoning, the answer, finish reason, usage with reasoning tokens", async () => {
    const result = await generateText({ model: svc("svc"), prompt: "Hello", temperature: 0, maxRetries: 0 });
    expect(sent.at(-1)!.url).toBe(`${server.url}/v1/chat/completions`);
    expect(sent.at(-1)!.body.messages).toEqual([{ role: "user", content: "Hello" }]);
    expect(result.text).toBe(answer);
    expect(result.reasoningText).toBe(thought);
    expect(result.finishReason).toBe("stop");
    expect(result.response.id).toMatch(/^chatcmpl-/);
    expect(result.response.modelId).toBe("svc-thinking");
    expect(result.usage.outputTokenDetails.reasoningTokens).toBe(5);
    expect(result.usage.totalTokens).toBe(result.usage.inputTokens! + result.usage.outputTokens!);
  });

  it("streamText: reasoning then text deltas, finish reason and usage", async () => {
    const result = streamText({ model: svc("svc"), prompt: "Hello", temperature: 0, maxRetries: 0 });
    const order: string[] = [];
    let reasoning = "";
    const texts: string[] = [];
    for await (const part of result.fullStream) {
      if (part.type === "reasoning-delta") {
        order.push("reasoning");
        reasoning += part.text;
      } else if (part.type === "text-delta") {
        order.push("text");
        texts.push(part.text);
      } else if (part.type === "error") throw part.error;
    }
    expect(sent.at(-1)!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(texts.length).toBeGreaterThan(1);
    expect(texts.join("")).toBe(answer);
    expect(reasoning).toBe(thought);
    expect(order.lastIndexOf("reasoning")).toBeLessThan(order.indexOf("text"));
    expect(await result.finishReason).toBe("stop");
    expect((await result.usage).outputTokenDetails.reasoningTokens).toBe(5);
  });

  it("a forced tool call, its result sent back as a tool message, then the answer", async () => {
    const calls: unknown[] = [];
    const result = await generateText({
      model: svc("svc"),
      ...forcedWeatherCall(calls),
      temperature: 0,
      maxRetries: 0,
    });
    expect(result.steps).toHaveLength(2);
    expect(sent.at(-2)!.body.tool_choice).toEqual({ type: "function", function: { name: "get_weather" } });
    expect(result.steps[0]!.finishReason).toBe("tool-calls");
    expect(result.steps[0]!.toolCalls.map((c) => c.toolName)).toEqual(["get_weather"]);
    expect(calls).toHaveLength(1);
    expect(validateJsonAgainstSchema(CITY_SCHEMA, calls[0])).toEqual({ valid: true });
    // The second request carries the call as the server returned it and its result, paired by id.
    const messages = sent.at(-1)!.body.messages as Array<Record<string, any>>;
    const call = messages[1]!.tool_calls[0];
    expect(call.id).toBe(result.steps[0]!.toolCalls[0]!.toolCallId);
    expect(JSON.parse(call.function.arguments)).toEqual(calls[0]);
    expect(messages[2]).toMatchObject({ role: "tool", tool_call_id: call.id });
    expect(JSON.parse(messages[2]!.content)).toEqual({ temp: 21, sky: "clear" });
    expect(result.steps[1]!.finishReason).toBe("stop");
    expect(result.text).toBe(answer);
  });

  it("structured output with Output.object: response_format json_schema, and the object satisfies it", async () => {
    const schema = {
      type: "object",
      properties: { city: { type: "string" }, unit: { enum: ["c", "f"] }, days: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3 } },
      required: ["city", "unit", "days"],
      additionalProperties: false,
    } as const;
    const result = await generateText({
      model: svc("svc"),
      prompt: "Forecast?",
      output: Output.object({ schema: jsonSchema<{ city: string; unit: "c" | "f"; days: number[] }>(schema) }),
      temperature: 0,
      maxRetries: 0,
    });
    expect(sent.at(-1)!.body.response_format).toMatchObject({ type: "json_schema", json_schema: { schema } });
    expect(validateJsonAgainstSchema(schema, result.output)).toEqual({ valid: true });
  });
});
