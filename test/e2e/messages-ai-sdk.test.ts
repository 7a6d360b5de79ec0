// The Vercel AI SDK's Anthropic provider (@ai-sdk/anthropic) against the real server: it speaks the Messages
// API and checks every response against its own zod schemas, so a field shaped unlike Anthropic's (such as
// `citations: null`) fails the call here.
import { createAnthropic } from "@ai-sdk/anthropic";
import { APICallError, generateText, jsonSchema, Output, streamText } from "ai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import { validateJsonAgainstSchema } from "../../server/engine/json-schema-grammar.js";
import { CITY_SCHEMA, forcedWeatherCall } from "../support/ai-sdk-weather.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let anthropic: ReturnType<typeof createAnthropic>;
/** Every request the provider sent: its URL and JSON body. */
const sent: Array<{ url: string; body: any }> = [];
const greedy = greedyTexts();
const thought = greedy.thought.trim();
const answer = greedy.answer.trim();
/** A Claude id: the name picks thinking mode, and the provider knows the model takes output_config.format. */
const MODEL = "claude-sonnet-4-5";

beforeAll(async () => {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
  anthropic = createAnthropic({
    baseURL: `${server.url}/v1`,
    apiKey: key,
    fetch: async (url, init) => {
      sent.push({ url: String(url), body: typeof init?.body === "string" ? JSON.parse(init.body) : undefined });
      return fetch(url, init);
    },
  });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

// Keywords Anthropic's structured outputs do not take (minItems, maxItems, ...) the provider moves into the
// description before sending, so this schema keeps to those it sends as they are.
const forecast = {
  type: "object",
  properties: { city: { type: "string" }, unit: { enum: ["c", "f"] }, days: { type: "integer" }, rain: { type: "boolean" } },
  required: ["city", "unit", "days", "rain"],
  additionalProperties: false,
} as const;
type Forecast = { city: string; unit: "c" | "f"; days: number; rain: boolean };

describe("Vercel AI SDK, Anthropic provider (Messages API)", () => {
  it("generateText: the thought as reasoning, the answer, finish reason, usage, the message id", async () => {
    const result = await generateText({ model: anthropic(MODEL), prompt: "Hello", temperature: 0, maxOutputTokens: 200, maxRetries: 0 });
    expect(sent.at(-1)!.url).toBe(`${server.url}/v1/messages`);
    expect(sent.at(-1)!.body.stream).toBeUndefined();
    expect(result.text).toBe(answer);
    expect(result.reasoningText).toBe(thought);
    expect(result.finishReason).toBe("stop");
    expect(result.response.id).toMatch(/^msg_/);
    expect(result.response.modelId).toBe(MODEL);
    expect(result.usage.inputTokens).toBeGreaterThan(0);
    expect(result.usage.outputTokens).toBeGreaterThan(answer.split(" ").length);
  });

  it("streamText: reasoning then text deltas, finish reason and usage", async () => {
    const result = streamText({ model: anthropic(MODEL), prompt: "Hello", temperature: 0, maxOutputTokens: 200, maxRetries: 0 });
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
    expect(sent.at(-1)!.body.stream).toBe(true);
    expect(texts.length).toBeGreaterThan(1);
    expect(texts.join("")).toBe(answer);
    expect(reasoning).toBe(thought);
    expect(order.lastIndexOf("reasoning")).toBeLessThan(order.indexOf("text"));
    expect(await result.finishReason).toBe("stop");
    expect((await result.usage).outputTokens).toBeGreaterThan(0);
  });

  it("a forced tool call, its result sent back as a tool_result, then the answer", async () => {
    const calls: unknown[] = [];
    const result = await generateText({
      model: anthropic(MODEL),
      ...forcedWeatherCall(calls),
      temperature: 0,
      maxOutputTokens: 200,
      maxRetries: 0,
    });
    expect(result.steps).toHaveLength(2);
    expect(sent.at(-2)!.body.tool_choice).toMatchObject({ type: "tool", name: "get_weather" });
    expect(result.steps[0]!.finishReason).toBe("tool-calls");
    expect(result.steps[0]!.toolCalls.map((c) => c.toolName)).toEqual(["get_weather"]);
    expect(calls).toHaveLength(1);
    expect(validateJsonAgainstSchema(CITY_SCHEMA, calls[0])).toEqual({ valid: true });
    // The second request carries the call as the server returned it and its result, paired by id.
    const messages = sent.at(-1)!.body.messages as Array<{ role: string; content: Array<Record<string, any>> }>;
    const use = messages[1]!.content.find((b) => b.type === "tool_use")!;
    expect(use.id).toBe(result.steps[0]!.toolCalls[0]!.toolCallId);
    expect(use.input).toEqual(calls[0]);
    const toolResult = messages[2]!.content.find((b) => b.type === "tool_result")!;
    expect(toolResult.tool_use_id).toBe(use.id);
    expect(JSON.stringify(toolResult.content)).toContain('\\"temp\\":21');
    expect(result.steps[1]!.finishReason).toBe("stop");
    expect(result.text).toBe(answer);
  });

  it("structured output with Output.object: sent as output_config.format, and the object satisfies the schema", async () => {
    const result = await generateText({
      model: anthropic(MODEL),
      prompt: "Forecast?",
      output: Output.object({ schema: jsonSchema<Forecast>(forecast) }),
      temperature: 0,
      maxOutputTokens: 300,
      maxRetries: 0,
    });
    expect(sent.at(-1)!.body.output_config).toEqual({ format: { type: "json_schema", schema: forecast } });
    expect(sent.at(-1)!.body.tools).toBeUndefined();
    expect(validateJsonAgainstSchema(forecast, result.output)).toEqual({ valid: true });
    expect(result.reasoningText).toBe(thought);
  });

  it("streamed structured output: the partial objects end in one that satisfies the schema", async () => {
    const result = streamText({
      model: anthropic(MODEL),
      prompt: "Forecast?",
      output: Output.object({ schema: jsonSchema<Forecast>(forecast) }),
      temperature: 0,
      maxOutputTokens: 300,
      maxRetries: 0,
    });
    let partials = 0;
    for await (const _ of result.partialOutputStream) partials++;
    expect(sent.at(-1)!.body.output_config.format.type).toBe("json_schema");
    expect(partials).toBeGreaterThan(1);
    expect(validateJsonAgainstSchema(forecast, await result.output)).toEqual({ valid: true });
  });

  it("for a model id it does not know (svc), the provider asks for the object through a forced tool: that works too", async () => {
    const result = await generateText({
      model: anthropic("svc"),
      prompt: "Forecast?",
      output: Output.object({ schema: jsonSchema<Forecast>(forecast) }),
      temperature: 0,
      maxOutputTokens: 300,
      maxRetries: 0,
    });
    expect(sent.at(-1)!.body.output_config).toBeUndefined();
    expect(sent.at(-1)!.body.tools.map((t: { name: string }) => t.name)).toEqual(["json"]);
    expect(sent.at(-1)!.body.tool_choice.type).toBe("any");
    expect(validateJsonAgainstSchema(forecast, result.output)).toEqual({ valid: true });
  });

  it("a schema the server cannot enforce is a 400 the SDK reports as an APICallError naming it", async () => {
    const err = await generateText({
      model: anthropic(MODEL),
      prompt: "x",
      output: Output.object({ schema: jsonSchema<unknown>({ $ref: "https://example.com/forecast.json" }) }),
      maxOutputTokens: 50,
      maxRetries: 0,
    }).catch((e: unknown) => e);
    expect(sent.at(-1)!.body.output_config.format.schema).toEqual({ $ref: "https://example.com/forecast.json" });
    expect(APICallError.isInstance(err)).toBe(true);
    expect((err as APICallError).statusCode).toBe(400);
    expect((err as APICallError).message).toContain("output_config.format.schema");
    expect(JSON.parse((err as APICallError).responseBody!)).toMatchObject({ type: "error", error: { type: "invalid_request_error", details: { error_code: "invalid_schema" } } });
  });
});
