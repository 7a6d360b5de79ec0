// LlamaIndex.TS's OpenAI LLM (@llamaindex/openai, on the openai 5.x SDK) against the real server: Chat
// Completions, as a LlamaIndex app drives it (chat, a stream, exec running a forced tool, structured output).
import { tool } from "@llamaindex/core/tools";
import type { ChatMessage, ToolCallLLMMessageOptions } from "@llamaindex/core/llms";
import { OpenAI } from "@llamaindex/openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { z } from "zod";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import { validateJsonAgainstSchema } from "../../server/engine/json-schema-grammar.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let llm: OpenAI;
/** Every request the LLM sent: its URL and JSON body. */
const sent: Array<{ url: string; body: any }> = [];
const greedy = greedyTexts();
const answer = greedy.answer.trim();

beforeAll(async () => {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
  llm = new OpenAI({
    model: "svc",
    apiKey: key,
    baseURL: `${server.url}/v1`,
    temperature: 0,
    maxRetries: 0,
    additionalSessionOptions: {
      fetch: async (url: RequestInfo | URL, init?: RequestInit) => {
        sent.push({ url: String(url), body: typeof init?.body === "string" ? JSON.parse(init.body) : undefined });
        return fetch(url, init);
      },
    },
  });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

type Message = ChatMessage<ToolCallLLMMessageOptions>;
const question: Message[] = [{ role: "user", content: "Weather in Oslo?" }];

describe("LlamaIndex.TS, OpenAI LLM (Chat Completions)", () => {
  it("chat: the answer, with the completion and its usage in raw", async () => {
    const res = await llm.chat({ messages: [{ role: "user", content: "Hello" }] });
    expect(sent.at(-1)!.url).toBe(`${server.url}/v1/chat/completions`);
    expect(sent.at(-1)!.body).toMatchObject({ model: "svc", temperature: 0, messages: [{ role: "user", content: "Hello" }] });
    expect(res.message).toMatchObject({ role: "assistant", content: answer });
    const raw = res.raw as { id: string; choices: Array<{ finish_reason: string }>; usage: { completion_tokens: number } };
    expect(raw.id).toMatch(/^chatcmpl-/);
    expect(raw.choices[0]!.finish_reason).toBe("stop");
    expect(raw.usage.completion_tokens).toBeGreaterThan(answer.split(" ").length);
  });

  it("chat with stream: true: deltas that add up to the answer", async () => {
    const stream = await llm.chat({ messages: [{ role: "user", content: "Hello" }], stream: true });
    const deltas: string[] = [];
    for await (const chunk of stream) deltas.push(chunk.delta);
    expect(sent.at(-1)!.body.stream).toBe(true);
    expect(deltas.filter((d) => d !== "").length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe(answer);
  });

  it("exec runs a forced tool call; its result goes back as a tool message and the model answers", async () => {
    const calls: Array<{ city: string }> = [];
    const weather = tool({
      name: "get_weather",
      description: "Weather for a city",
      parameters: z.object({ city: z.string() }),
      execute: ({ city }) => {
        calls.push({ city });
        return { temp: 21, sky: "clear" };
      },
    });
    const first = await llm.exec({
      messages: question,
      tools: [weather],
      additionalChatOptions: { tool_choice: { type: "function", function: { name: "get_weather" } } },
    });
    expect(sent.at(-1)!.body.tools.map((t: { function: { name: string } }) => t.function.name)).toEqual(["get_weather"]);
    expect(first.toolCalls.map((c) => c.name)).toEqual(["get_weather"]);
    expect(calls).toHaveLength(1);
    expect(typeof calls[0]!.city).toBe("string");
    const [assistant, result] = first.newMessages;
    expect((result!.options as { toolResult: { id: string } }).toolResult.id).toBe(first.toolCalls[0]!.id);

    const second = await llm.chat({ messages: [...question, ...first.newMessages], tools: [weather], additionalChatOptions: { tool_choice: "none" } });
    const messages = sent.at(-1)!.body.messages as Array<Record<string, any>>;
    expect(messages[1]).toMatchObject({ role: "assistant", tool_calls: [{ id: first.toolCalls[0]!.id, function: { name: "get_weather" } }] });
    expect(JSON.parse(messages[1]!.tool_calls[0].function.arguments)).toEqual(calls[0]);
    expect(messages[2]).toMatchObject({ role: "tool", tool_call_id: first.toolCalls[0]!.id });
    // LlamaIndex writes the result as JSON with its quotes taken out.
    expect(messages[2]!.content).toMatch(/temp: 21,\s+sky: clear/);
    expect(assistant!.role).toBe("assistant");
    expect(second.message.content).toBe(answer);
    expect((second.raw as { choices: Array<{ finish_reason: string }> }).choices[0]!.finish_reason).toBe("stop");
  });

  it("structured output with a zod responseFormat: json_schema, and the answer parses into it", async () => {
    const forecast = z.object({ city: z.string(), unit: z.enum(["c", "f"]), days: z.array(z.number().int()).min(1).max(3) });
    const res = await llm.chat({ messages: [{ role: "user", content: "Forecast?" }], responseFormat: forecast });
    const format = sent.at(-1)!.body.response_format;
    expect(format).toMatchObject({ type: "json_schema", json_schema: { name: "response_format", strict: true } });
    const value = JSON.parse(res.message.content as string);
    expect(forecast.safeParse(value).success).toBe(true);
    expect(validateJsonAgainstSchema(format.json_schema.schema, value)).toEqual({ valid: true });
  });
});
