// Tool calls at the edge of max_tokens, through the official SDKs against `svc serve` on the tiny model:
// output never exceeds max_tokens, a call whose arguments are complete is a tool call (not a cut one), and a
// cut call reads the same from a streamed and a non-streamed request, on all three surfaces.
import { rmSync } from "node:fs";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let key: string;
let dataDir: string;
let anthropic: Anthropic;
let openai: OpenAI;

beforeAll(async () => {
  dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "1", "--context-size", "4096"] });
  anthropic = new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
  rmSync(dataDir, { recursive: true, force: true });
});

const schema = { type: "object" as const, properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city", "days"] };

/** Ids differ from run to run, and the stream helpers add what they parse themselves; the rest must match. */
function withoutIds<T>(value: T): T {
  return JSON.parse(JSON.stringify(value, (k, v) => (k === "id" || k === "call_id" || k === "parsed_arguments" ? undefined : v)));
}

describe("Messages, a forced call (the issue's max_tokens 64 case and its neighbours)", () => {
  const body = (max_tokens: number) =>
    ({
      model: "claude-haiku-4-5",
      max_tokens,
      temperature: 0,
      tools: [{ name: "get_weather", description: "Weather", input_schema: schema }],
      tool_choice: { type: "tool", name: "get_weather" },
      messages: [{ role: "user", content: "Weather in Oslo?" }],
    }) as Anthropic.MessageCreateParamsNonStreaming;

  it("never more output than max_tokens; complete arguments are a tool_use stop; cut ones the same streamed or not", async () => {
    const full = await anthropic.messages.create(body(400));
    expect(full.stop_reason).toBe("tool_use");
    const needed = full.usage.output_tokens;
    const seen = new Set<string>();
    for (let max = needed - 24; max <= needed + 1; max++) {
      const plain = await anthropic.messages.create(body(max));
      const where = `max_tokens ${max}: ${JSON.stringify(plain)}`;
      expect(plain.usage.output_tokens, where).toBeLessThanOrEqual(max);
      seen.add(plain.stop_reason!);
      const last = plain.content.at(-1);
      if (plain.stop_reason === "tool_use") {
        expect(last, where).toMatchObject({ type: "tool_use", name: "get_weather", input: full.content.at(-1)!.type === "tool_use" ? (full.content.at(-1) as Anthropic.ToolUseBlock).input : {} });
      } else {
        expect(plain.stop_reason, where).toBe("max_tokens");
        const streamed = await anthropic.messages.stream(body(max)).finalMessage();
        expect(withoutIds(streamed.content), where).toEqual(withoutIds(plain.content));
        expect(streamed.stop_reason).toBe("max_tokens");
        expect(streamed.usage.output_tokens).toBe(plain.usage.output_tokens);
      }
    }
    expect([...seen].sort()).toEqual(["max_tokens", "tool_use"]);
  });
});

describe("Chat and Responses, a cut call", () => {
  it("Chat: the non-streamed message has the cut call's arguments as the stream helper assembles them", async () => {
    const body = (max_tokens: number) => ({
      model: "svc",
      max_tokens,
      temperature: 0,
      reasoning_effort: "none" as const,
      tools: [{ type: "function" as const, function: { name: "get_weather", parameters: schema } }],
      tool_choice: { type: "function" as const, function: { name: "get_weather" } },
      messages: [{ role: "user" as const, content: "Weather in Oslo?" }],
    });
    const full = await openai.chat.completions.create(body(400));
    const needed = full.usage!.completion_tokens;
    for (const max of [needed - 14, needed - 9, needed - 5]) {
      const plain = await openai.chat.completions.create(body(max));
      expect(plain.choices[0]!.finish_reason).toBe("length");
      expect(plain.usage!.completion_tokens).toBeLessThanOrEqual(max);
      const streamed = await openai.chat.completions.stream(body(max)).finalChatCompletion();
      expect(withoutIds(streamed.choices[0]!.message.tool_calls)).toEqual(withoutIds(plain.choices[0]!.message.tool_calls));
      const cut = plain.choices[0]!.message.tool_calls![0]!;
      expect(cut.type === "function" && cut.function.arguments.length > 0).toBe(true);
    }
  });

  it("Responses: an incomplete function_call item, the same in the stream helper's final response", async () => {
    const body = (max_output_tokens: number) => ({
      model: "svc",
      max_output_tokens,
      temperature: 0,
      reasoning: { effort: "none" as const },
      tools: [{ type: "function" as const, name: "get_weather", parameters: schema, strict: true }],
      tool_choice: { type: "function" as const, name: "get_weather" },
      input: "Weather in Oslo?",
    });
    const full = await openai.responses.create(body(400));
    const needed = full.usage!.output_tokens;
    for (const max of [needed - 14, needed - 9, needed - 5]) {
      const plain = await openai.responses.create(body(max));
      expect(plain.status).toBe("incomplete");
      expect(plain.usage!.output_tokens).toBeLessThanOrEqual(max);
      expect(plain.output.at(-1)).toMatchObject({ type: "function_call", status: "incomplete", name: "get_weather" });
      const streamed = await openai.responses.stream(body(max)).finalResponse();
      expect(withoutIds(streamed.output)).toEqual(withoutIds(plain.output));
    }
  });
});
