// `svc serve` on the generated model, driven by @anthropic-ai/sdk as users drive it: the current 1.x (key in
// Authorization: Bearer, anthropic-version 2026-10-21) and the last 0.x (key in X-Api-Key, 2023-06-01).
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import Anthropic from "@anthropic-ai/sdk";
import { betaJSONSchemaOutputFormat } from "@anthropic-ai/sdk/helpers/beta/json-schema";
import { jsonSchemaOutputFormat } from "@anthropic-ai/sdk/helpers/json-schema";
import Anthropic0 from "anthropic-sdk-0";
import { betaJSONSchemaOutputFormat as betaJSONSchemaOutputFormat0 } from "anthropic-sdk-0/helpers/beta/json-schema";
import { jsonSchemaOutputFormat as jsonSchemaOutputFormat0 } from "anthropic-sdk-0/helpers/json-schema";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import { validateJsonAgainstSchema } from "../../server/engine/json-schema-grammar.js";
import { makePdf } from "../support/make-pdf.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let key: string;
let dataDir: string;
const greedy = greedyTexts();
const thought = greedy.thought.trim();
const answer = greedy.answer.trim();

beforeAll(async () => {
  dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
  rmSync(dataDir, { recursive: true, force: true });
});

type ErrorClass = abstract new (...args: never[]) => Error;
interface Sdk {
  label: string;
  client: (apiKey: string) => Anthropic;
  BadRequestError: ErrorClass;
  AuthenticationError: ErrorClass;
  /** 1.x reads error.details.error_code into err.errorCode; 0.x has no such field. */
  errorCodes: boolean;
  /** The SDK's structured-output helpers: output_config.format for messages.parse, output_format for beta.messages.parse. */
  outputFormat: typeof jsonSchemaOutputFormat;
  betaOutputFormat: typeof betaJSONSchemaOutputFormat;
}

const sdks: Sdk[] = [
  {
    label: "@anthropic-ai/sdk 1.x",
    client: (apiKey) => new Anthropic({ apiKey, baseURL: server.url, maxRetries: 0 }),
    BadRequestError: Anthropic.BadRequestError,
    AuthenticationError: Anthropic.AuthenticationError,
    errorCodes: true,
    outputFormat: jsonSchemaOutputFormat,
    betaOutputFormat: betaJSONSchemaOutputFormat,
  },
  {
    label: "@anthropic-ai/sdk 0.x",
    client: (apiKey) => new Anthropic0({ apiKey, baseURL: server.url, maxRetries: 0 }) as unknown as Anthropic,
    BadRequestError: Anthropic0.BadRequestError,
    AuthenticationError: Anthropic0.AuthenticationError,
    errorCodes: false,
    outputFormat: jsonSchemaOutputFormat0 as unknown as typeof jsonSchemaOutputFormat,
    betaOutputFormat: betaJSONSchemaOutputFormat0 as unknown as typeof betaJSONSchemaOutputFormat,
  },
];

/** 1.x's types dropped temperature (the API still takes it); the tests use it for greedy, pinned output. */
type Params = Omit<Anthropic.MessageCreateParamsNonStreaming, "model" | "max_tokens"> & { model?: string; max_tokens?: number; temperature?: number; top_k?: number };
const params = (p: Params) => ({ model: "svc", max_tokens: 200, temperature: 0, ...p }) as Anthropic.MessageCreateParamsNonStreaming;
const user = (content: Anthropic.MessageParam["content"]): Anthropic.MessageParam[] => [{ role: "user", content }];

const weather: Anthropic.Tool = {
  name: "get_weather",
  description: "Weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city", "days"] },
};
const time: Anthropic.Tool = { name: "get_time", input_schema: { type: "object", properties: { zone: { enum: ["utc", "local"] } }, required: ["zone"] } };

const texts = (m: Anthropic.Message) => m.content.filter((b): b is Anthropic.TextBlock => b.type === "text").map((b) => b.text);
const thinkings = (m: Anthropic.Message) => m.content.filter((b): b is Anthropic.ThinkingBlock => b.type === "thinking");
const toolUses = (m: Anthropic.Message) => m.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");

describe.each(sdks)("$label", (sdk) => {
  let client: Anthropic;
  beforeAll(() => {
    client = sdk.client(key);
  });

  describe("create", () => {
    it("thinks, then answers; echoes the model; usage adds up", async () => {
      const res = await client.messages.create(params({ model: "claude-sonnet-4-6", messages: user("Hello") }));
      expect(res.id).toMatch(/^msg_/);
      expect(res.type).toBe("message");
      expect(res.role).toBe("assistant");
      expect(res.model).toBe("claude-sonnet-4-6");
      expect(res.stop_reason).toBe("end_turn");
      expect(res.stop_sequence).toBeNull();
      expect(res.content.map((b) => b.type)).toEqual(["thinking", "text"]);
      const block = thinkings(res)[0]!;
      expect(block.thinking).toBe(thought);
      expect(block.signature.length).toBeGreaterThan(20);
      expect(texts(res)).toEqual([answer]);
      expect(res.usage.input_tokens).toBeGreaterThan(5);
      expect(res.usage.output_tokens).toBeGreaterThan(answer.split(" ").length + thought.split(" ").length);
      expect(res.usage.cache_creation_input_tokens).toBe(0);
      expect(typeof res.usage.cache_read_input_tokens).toBe("number");
      expect(res._request_id).toMatch(/^req_/);
    });

    it("the model name picks the mode: haiku answers directly, opus and other names think", async () => {
      const haiku = await client.messages.create(params({ model: "claude-haiku-4-5", messages: user("Hello") }));
      expect(haiku.content.map((b) => b.type)).toEqual(["text"]);
      expect(texts(haiku)).toEqual([answer]);
      for (const model of ["claude-opus-4-1", "svc", "svc-preview", "anything-else"]) {
        const res = await client.messages.create(params({ model, messages: user("Hello") }));
        expect(res.model).toBe(model);
        expect(thinkings(res).map((b) => b.thinking)).toEqual([thought]);
      }
    });

    it("the thinking parameter wins over the name: enabled with a budget, disabled, adaptive", async () => {
      const on = await client.messages.create(params({ model: "claude-haiku-4-5", thinking: { type: "enabled", budget_tokens: 2 }, messages: user("Hi") }));
      expect(thinkings(on).map((b) => b.thinking)).toEqual([thought.split(" ").slice(0, 2).join(" ")]);
      expect(texts(on)).toEqual([answer]);
      const off = await client.messages.create(params({ model: "claude-opus-4-1", thinking: { type: "disabled" }, messages: user("Hi") }));
      expect(off.content.map((b) => b.type)).toEqual(["text"]);
      const adaptive = await client.messages.create(params({ model: "claude-haiku-4-5", thinking: { type: "adaptive" } as never, messages: user("Hi") }));
      expect(adaptive.content.map((b) => b.type)).toEqual(["text"]);
    });

    it("max_tokens bounds thinking plus answer: stop_reason max_tokens", async () => {
      const res = await client.messages.create(params({ model: "claude-haiku-4-5", max_tokens: 2, messages: user("Hi") }));
      expect(res.stop_reason).toBe("max_tokens");
      expect(res.usage.output_tokens).toBe(2);
      expect(texts(res)).toEqual([answer.split(" ").slice(0, 2).join(" ")]);
    });

    it("a conversation with earlier thinking blocks sent back (as the SDK returned them) works", async () => {
      const first = await client.messages.create(params({ messages: user("Hello") }));
      const second = await client.messages.create(
        params({ messages: [...user("Hello"), { role: "assistant", content: first.content as Anthropic.ContentBlockParam[] }, ...user("And then?")] }),
      );
      expect(texts(second)).toEqual([answer]);
      // The earlier thought is dropped: the second prompt holds the first answer but not the thought.
      const promptOf = (m: Anthropic.Message) => m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0) + (m.usage.cache_creation_input_tokens ?? 0);
      const withThought = await client.messages.create(
        params({ messages: [...user("Hello"), { role: "assistant", content: `${thought} ${answer}` }, ...user("And then?")] }),
      );
      expect(promptOf(second)).toBeLessThan(promptOf(withThought));
    });
  });

  describe("streaming", () => {
    it("stream() emits thinking and text deltas; finalMessage() is the whole message", async () => {
      const stream = client.messages.stream(params({ model: "claude-sonnet-4-6", messages: user("Hello") }) as Anthropic.MessageStreamParams);
      const deltas: string[] = [];
      const thoughts: string[] = [];
      stream.on("text", (delta) => deltas.push(delta));
      stream.on("thinking", (delta) => thoughts.push(delta));
      const final = await stream.finalMessage();
      expect(final.model).toBe("claude-sonnet-4-6");
      expect(final.stop_reason).toBe("end_turn");
      expect(final.content.map((b) => b.type)).toEqual(["thinking", "text"]);
      expect(thinkings(final)[0]!.thinking).toBe(thought);
      expect(thinkings(final)[0]!.signature.length).toBeGreaterThan(20);
      expect(texts(final)).toEqual([answer]);
      expect(deltas.join("")).toBe(answer);
      expect(thoughts.join("")).toBe(thought);
      expect(final.usage.output_tokens).toBeGreaterThan(0);
      expect(final.usage.input_tokens).toBeGreaterThan(0);
      expect(await stream.finalText()).toBe(answer);
    });

    it("raw create({stream: true}) yields the event graph in order", async () => {
      const events = await client.messages.create({ ...params({ model: "claude-haiku-4-5", messages: user("Hello") }), stream: true });
      const seen: string[] = [];
      for await (const event of events) seen.push(event.type === "content_block_delta" ? `delta:${event.delta.type}` : event.type);
      expect(seen[0]).toBe("message_start");
      expect(seen.slice(1, 2)).toEqual(["content_block_start"]);
      expect(seen.slice(-3)).toEqual(["content_block_stop", "message_delta", "message_stop"]);
      expect(new Set(seen.slice(2, -3))).toEqual(new Set(["delta:text_delta"]));
    });

    it("streams tool_use input as JSON deltas that parse into the final input", async () => {
      const stream = client.messages.stream(
        params({ messages: user("Weather?"), tools: [weather], tool_choice: { type: "tool", name: "get_weather" } }) as Anthropic.MessageStreamParams,
      );
      const final = await stream.finalMessage();
      expect(final.stop_reason).toBe("tool_use");
      const call = toolUses(final)[0]!;
      expect(call.id).toMatch(/^toolu_/);
      expect(validateJsonAgainstSchema(weather.input_schema, call.input)).toEqual({ valid: true });
    });
  });

  describe("stop sequences", () => {
    const words = answer.split(" ");
    it("cut the answer before the match and report it", async () => {
      const res = await client.messages.create(params({ messages: user("Hi"), stop_sequences: [words[3]!, "zzz"] }));
      expect(res.stop_reason).toBe("stop_sequence");
      expect(res.stop_sequence).toBe(words[3]);
      expect(texts(res).join("")).toBe(words.slice(0, 3).join(" ") + " ");
    });

    it("streamed too; never inside thinking", async () => {
      const target = thought.split(" ")[1]!;
      const stream = client.messages.stream(params({ messages: user("Hi"), stop_sequences: [target, `${words[1]} ${words[2]}`] }) as Anthropic.MessageStreamParams);
      const final = await stream.finalMessage();
      expect(thinkings(final)[0]!.thinking).toContain(target);
      expect(texts(final)).toEqual([`${words[0]} `]);
      expect(final.stop_reason).toBe("stop_sequence");
      expect(final.stop_sequence).toBe(`${words[1]} ${words[2]}`);
    });
  });

  describe("tools", () => {
    it("tool_choice tool forces that call; any forces some call; input matches the schema", async () => {
      const named = await client.messages.create(params({ messages: user("Weather in Oslo?"), tools: [weather, time], tool_choice: { type: "tool", name: "get_time" } }));
      expect(named.stop_reason).toBe("tool_use");
      const call = toolUses(named)[0]!;
      expect(call.name).toBe("get_time");
      expect(call.id).toMatch(/^toolu_[A-Za-z0-9]{24}$/);
      expect(validateJsonAgainstSchema(time.input_schema, call.input)).toEqual({ valid: true });
      for (const model of ["claude-haiku-4-5", "claude-sonnet-4-6"]) {
        const any = await client.messages.create(params({ model, messages: user("Weather?"), tools: [weather], tool_choice: { type: "any" } }));
        expect(any.stop_reason).toBe("tool_use");
        expect(toolUses(any)[0]!.name).toBe("get_weather");
        expect(validateJsonAgainstSchema(weather.input_schema, toolUses(any)[0]!.input)).toEqual({ valid: true });
      }
    });

    it("auto lets the model decide: sampled runs both call and answer; none never calls", async () => {
      const outcomes = { call: 0, text: 0 };
      for (let i = 0; i < 60 && (outcomes.call === 0 || outcomes.text === 0); i++) {
        const res = await client.messages.create(params({ model: "claude-haiku-4-5", messages: user("Weather?"), tools: [weather], temperature: 1 }));
        if (toolUses(res).length > 0) {
          outcomes.call++;
          expect(res.stop_reason).toBe("tool_use");
          expect(validateJsonAgainstSchema(weather.input_schema, toolUses(res)[0]!.input)).toEqual({ valid: true });
        } else {
          outcomes.text++;
          expect(res.stop_reason).toMatch(/end_turn|max_tokens/);
        }
      }
      expect(outcomes.call).toBeGreaterThan(0);
      expect(outcomes.text).toBeGreaterThan(0);
      for (let i = 0; i < 10; i++) {
        const res = await client.messages.create(params({ model: "claude-haiku-4-5", messages: user("Weather?"), tools: [weather], tool_choice: { type: "none" }, temperature: 1 }));
        expect(toolUses(res)).toHaveLength(0);
      }
    });

    it("a tool_result round trip: the call goes back as returned, the result is read, the model answers", async () => {
      const question = user("Weather in Oslo?");
      const first = await client.messages.create(params({ messages: question, tools: [weather], tool_choice: { type: "any" } }));
      const call = toolUses(first)[0]!;
      const second = await client.messages.create(
        params({
          messages: [
            ...question,
            { role: "assistant", content: first.content as Anthropic.ContentBlockParam[] },
            { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: [{ type: "text", text: '{"temp": 21, "sky": "clear"}' }] }] },
          ],
          tools: [weather],
        }),
      );
      expect(second.stop_reason).toBe("end_turn");
      expect(texts(second)).toEqual([answer]);
      const prompt = (m: Anthropic.Message) => m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0) + (m.usage.cache_creation_input_tokens ?? 0);
      expect(prompt(second)).toBeGreaterThan(prompt(first) + 20);
      const failed = await client.messages.create(
        params({
          messages: [
            ...question,
            { role: "assistant", content: first.content as Anthropic.ContentBlockParam[] },
            { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "city not found", is_error: true }] },
          ],
          tools: [weather],
        }),
      );
      expect(failed.stop_reason).toBe("end_turn");
    });
  });

  describe("structured outputs", () => {
    const forecast = {
      type: "object",
      properties: { city: { type: "string" }, unit: { type: "string", enum: ["c", "f"] }, days: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3 } },
      required: ["city", "unit", "days"],
      additionalProperties: false,
    } as const;

    // The SDKs' helpers rewrite the schema into Anthropic's subset (moving some keywords, e.g. maxItems, into
    // the description), so the guarantee is checked against the schema sent.
    it("messages.parse with output_config.format: the text is JSON satisfying the schema, after the thought", async () => {
      const format = sdk.outputFormat(forecast);
      const res = await client.messages.parse({ ...params({ messages: user("Forecast?") }), output_config: { format } });
      expect(res.stop_reason).toBe("end_turn");
      expect(res.content.map((b) => b.type)).toEqual(["thinking", "text"]);
      expect(thinkings(res)[0]!.thinking).toBe(thought);
      expect(validateJsonAgainstSchema(format.schema, res.parsed_output)).toEqual({ valid: true });
      expect(JSON.parse(texts(res)[0]!)).toEqual(res.parsed_output);
    });

    it("beta.messages.parse with output_format (the beta's field and header): the same guarantee", async () => {
      const format = sdk.betaOutputFormat(forecast);
      const res = await client.beta.messages.parse({
        ...(params({ model: "claude-haiku-4-5", messages: user("Forecast?") }) as Anthropic.Beta.MessageCreateParamsNonStreaming),
        output_format: format,
      });
      expect(res.content.map((b) => b.type)).toEqual(["text"]);
      expect(validateJsonAgainstSchema(format.schema, res.parsed_output)).toEqual({ valid: true });
    });

    it("streamed: the text deltas add up to JSON satisfying the schema", async () => {
      const stream = client.messages.stream({ ...(params({ messages: user("Forecast?") }) as Anthropic.MessageStreamParams), output_config: { format: { type: "json_schema", schema: forecast } } });
      const deltas: string[] = [];
      stream.on("text", (delta) => deltas.push(delta));
      const final = await stream.finalMessage();
      expect(final.stop_reason).toBe("end_turn");
      expect(validateJsonAgainstSchema(forecast, JSON.parse(deltas.join("")))).toEqual({ valid: true });
      expect(texts(final)).toEqual([deltas.join("")]);
    });

    it("a schema the grammar cannot express: BadRequestError naming output_config.format.schema, in count_tokens too", async () => {
      const format = { type: "json_schema" as const, schema: { type: "object", properties: { a: { type: "string" } }, not: { required: ["a"] } } };
      const err = await client.messages.create({ ...params({ messages: user("x") }), output_config: { format } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(sdk.BadRequestError);
      const e = err as InstanceType<typeof Anthropic.APIError>;
      expect(e.status).toBe(400);
      expect(e.message).toContain("output_config.format.schema");
      if (sdk.errorCodes) expect((e as unknown as { errorCode: string }).errorCode).toBe("invalid_schema");
      const counted = await client.messages.countTokens({ model: "svc", messages: user("x"), output_config: { format } }).catch((x: unknown) => x);
      expect(counted).toBeInstanceOf(sdk.BadRequestError);
    });
  });

  describe("documents", () => {
    it("a base64 PDF is read: the model gets exactly its extracted text", async () => {
      const pdf = makePdf(["Invoice 42", "Total 99 EUR"]).toString("base64");
      const prompt = (m: Anthropic.Message) => m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0) + (m.usage.cache_creation_input_tokens ?? 0);
      const withPdf = await client.messages.create(
        params({
          messages: user([
            { type: "document", source: { type: "base64", media_type: "application/pdf", data: pdf }, title: "invoice.pdf" },
            { type: "text", text: "Total?" },
          ]),
        }),
      );
      expect(texts(withPdf)).toEqual([answer]);
      const withText = await client.messages.create(
        params({
          messages: user([
            { type: "text", text: '<file name="invoice.pdf" type="application/pdf">\nInvoice 42\nTotal 99 EUR\n</file>' },
            { type: "text", text: "Total?" },
          ]),
        }),
      );
      expect(prompt(withPdf)).toBe(prompt(withText));
    });

    it("a URL document is refused (never fetched), an undecodable image with a clear 400", async () => {
      const url = await client.messages
        .create(params({ messages: user([{ type: "document", source: { type: "url", url: "http://127.0.0.1:9/x.pdf" } }]) }))
        .catch((e: unknown) => e);
      expect(url).toBeInstanceOf(sdk.BadRequestError);
      expect((url as Error).message).toContain("not fetched");
      const image = await client.messages
        .create(params({ messages: user([{ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }]) }))
        .catch((e: unknown) => e);
      expect(image).toBeInstanceOf(sdk.BadRequestError);
      expect((image as Error).message).toContain("messages[0].content[0]");
      expect((image as Error).message).toContain("The image could not be decoded");
    });
  });

  describe("prompt caching", () => {
    it("cache_control on a repeated prefix: written once, then read; input_tokens is the rest", async () => {
      const system: Anthropic.TextBlockParam[] = [{ type: "text", text: `${randomUUID()} You are a careful assistant. `.repeat(30), cache_control: { type: "ephemeral" } }];
      const first = await client.messages.create(params({ model: "claude-haiku-4-5", system, messages: user("First question?") }));
      const second = await client.messages.create(params({ model: "claude-haiku-4-5", system, messages: user("Second question, longer?") }));
      const written = first.usage.cache_creation_input_tokens!;
      expect(written).toBeGreaterThan(800);
      expect(first.usage.cache_read_input_tokens).toBeLessThan(10);
      expect(first.usage.input_tokens).toBeLessThan(40);
      expect(second.usage.cache_creation_input_tokens).toBe(0);
      expect(second.usage.cache_read_input_tokens).toBeGreaterThanOrEqual(written);
      expect(second.usage.input_tokens).toBeLessThan(40);
      // The same breakpoint further back: more than 4 are accepted, the extras are dropped.
      const many = Array.from({ length: 6 }, (_, i): Anthropic.TextBlockParam => ({ type: "text", text: `note ${i}`, cache_control: { type: "ephemeral" } }));
      const extra = await client.messages.create(params({ model: "claude-haiku-4-5", system: [...system, ...many], messages: user("Third?") }));
      expect(extra.stop_reason).toBe("end_turn");
    });
  });

  describe("count_tokens", () => {
    it("answers the heuristic estimate for the same body shape", async () => {
      const res = await client.messages.countTokens({
        model: "claude-sonnet-4-6",
        system: "abcd",
        messages: user("hello world"),
        tools: [{ name: "f", description: "desc", input_schema: { type: "object" } }],
      });
      // ceil((4 + 11 + 1 + 4 + 17) / 4): system, message, tool name, description, schema JSON.
      expect(res).toEqual({ input_tokens: 10 });
    });
  });

  describe("errors", () => {
    it("401 AuthenticationError for a wrong key, with the request id", async () => {
      const bad = sdk.client("sk-svc-" + "0".repeat(32));
      const err = await bad.messages.create(params({ messages: user("x") })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(sdk.AuthenticationError);
      const e = err as InstanceType<typeof Anthropic.APIError>;
      expect(e.status).toBe(401);
      expect(e.requestID).toMatch(/^req_/);
      expect((e.error as { error: { type: string } }).error.type).toBe("authentication_error");
      const count = await bad.messages.countTokens({ model: "svc", messages: user("x") }).catch((x: unknown) => x);
      expect(count).toBeInstanceOf(sdk.AuthenticationError);
    });

    it.each([
      [{ max_tokens: 0 }, "max_tokens"],
      [{ max_tokens: 200001 }, "max_tokens"],
      [{ model: "" }, "model"],
      [{ messages: [] }, "messages"],
      [{ messages: Array.from({ length: 201 }, () => ({ role: "user", content: "x" })) }, "messages", "too_many_items"],
      [{ temperature: 2.5 }, "temperature"],
      [{ top_p: 0 }, "top_p"],
      [{ top_k: 0 }, "top_k"],
      [{ stop_sequences: Array.from({ length: 9 }, (_, i) => `s${i}`) }, "stop_sequences", "too_many_items"],
      [{ stop_sequences: ["x".repeat(501)] }, "stop_sequences[0]"],
      [{ thinking: { type: "enabled", budget_tokens: 500 } }, "thinking.budget_tokens"],
      [{ thinking: { type: "bogus" } }, "thinking.type"],
      [{ tools: [{ name: "no spaces allowed", input_schema: { type: "object" } }] }, "tools[0].name"],
      [{ tools: [weather], tool_choice: { type: "tool", name: "ghost" } }, "tool_choice.name"],
      [{ messages: [{ role: "tool", content: "x" }] }, "messages[0].role"],
      [{ messages: user([{ type: "tool_result", tool_use_id: "toolu_ghost", content: "x" }]) }, "messages[0].content[0].tool_use_id"],
      [{ system: [{ type: "text", text: "s", cache_control: { type: "forever" } }] }, "system[0].cache_control"],
    ])("%j → BadRequestError naming %s", async (body, param, code = "invalid_request") => {
      // An explicit timeout lets the SDK send large max_tokens without streaming.
      const err = await client.messages.create(params({ ...{ messages: user("x") }, ...(body as Params) }), { timeout: 60_000 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(sdk.BadRequestError);
      const e = err as InstanceType<typeof Anthropic.APIError>;
      expect(e.status).toBe(400);
      expect(e.message).toContain(param);
      expect((e.error as { error: { type: string } }).error.type).toBe("invalid_request_error");
      // A list over its bound says so (docs/api.md, "Limits on lists").
      if (sdk.errorCodes) expect((e as unknown as { errorCode: string }).errorCode).toBe(code);
    });
  });
});

describe("keyless probes", () => {
  it("GET /v1/messages/_health and /health answer without a key", async () => {
    for (const path of ["/v1/messages/_health", "/health"]) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { model: { state: string } }).model.state).toBe("ready");
    }
  });
});
