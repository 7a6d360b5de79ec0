// `svc serve` on the generated model, driven with the official openai client exactly as users drive it.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import { validateJsonAgainstSchema } from "../../server/engine/json-schema-grammar.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let client: OpenAI;
let key: string;
const greedy = greedyTexts();
const user = (content: string) => [{ role: "user" as const, content }];

beforeAll(async () => {
  const dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
  client = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

describe("plain completions", () => {
  it("thinks, then answers, with reasoning counted inside completion tokens", async () => {
    const res = await client.chat.completions.create({ model: "svc", messages: user("Hello"), temperature: 0 });
    const message = res.choices[0]!.message as typeof res.choices[0]["message"] & { reasoning_content?: string };
    expect(res.id).toMatch(/^chatcmpl-/);
    expect(res.model).toBe("svc-thinking");
    expect(res.choices[0]!.finish_reason).toBe("stop");
    expect(message.reasoning_content).toBe(greedy.thought.trim());
    expect(message.content).toBe(greedy.answer.trim());
    const usage = res.usage as NonNullable<typeof res.usage> & { reasoning_tokens?: number };
    expect(usage.reasoning_tokens).toBe(5);
    expect(usage.completion_tokens_details?.reasoning_tokens).toBe(5);
    expect(usage.completion_tokens).toBeGreaterThan(usage.reasoning_tokens!);
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
    expect((res as unknown as { svc_complexity: { mode: string } }).svc_complexity.mode).toBe("thinking");
    expect(res._request_id).toMatch(/^req_/);
  });

  it("reasoning_effort none and minimal give the fast mode: no reasoning", async () => {
    for (const effort of ["none", "minimal"] as const) {
      const res = await client.chat.completions.create({ model: "svc-preview", messages: user("Hello"), temperature: 0, reasoning_effort: effort });
      expect(res.model).toBe("svc-fast");
      expect((res.choices[0]!.message as { reasoning_content?: string }).reasoning_content).toBeUndefined();
      expect(res.choices[0]!.message.content).toBe(greedy.answer.trim());
      expect(res.usage).not.toHaveProperty("reasoning_tokens");
    }
  });

  it("low, medium, high, xhigh, max and unknown efforts all think", async () => {
    for (const effort of ["low", "medium", "high", "xhigh", "max", "galaxy-brain"]) {
      const res = await client.chat.completions.create({ model: "svc", messages: user("Hi"), temperature: 0, reasoning_effort: effort as "low" });
      expect(res.model).toBe("svc-thinking");
      expect((res.usage as { reasoning_tokens?: number }).reasoning_tokens).toBeGreaterThan(0);
    }
  });

  it("max_reasoning_tokens caps the thought exactly, and the answer still comes", async () => {
    const res = await client.chat.completions.create({ model: "svc", messages: user("Hi"), temperature: 0, max_reasoning_tokens: 2 } as never);
    const r = res as unknown as OpenAI.ChatCompletion & { usage: { reasoning_tokens: number } };
    expect(r.usage.reasoning_tokens).toBe(2);
    expect(r.choices[0]!.message.content).toBe(greedy.answer.trim());
    expect((r.choices[0]!.message as { reasoning_content?: string }).reasoning_content).toBe(greedy.thought.trim().split(" ").slice(0, 2).join(" "));
  });

  it("max_tokens bounds reasoning plus answer: a small value ends with finish_reason length", async () => {
    const tiny = await client.chat.completions.create({ model: "svc", messages: user("Hi"), temperature: 0, max_tokens: 3 });
    expect(tiny.choices[0]!.finish_reason).toBe("length");
    expect(tiny.usage!.completion_tokens).toBeLessThanOrEqual(3);
    expect(tiny.choices[0]!.message.content).toBe("");
    const fast = await client.chat.completions.create({ model: "svc", messages: user("Hi"), temperature: 0, max_tokens: 2, reasoning_effort: "none" });
    expect(fast.choices[0]!.finish_reason).toBe("length");
    expect(fast.usage!.completion_tokens).toBe(2);
    expect(fast.choices[0]!.message.content).toBe(greedy.answer.trim().split(" ").slice(0, 2).join(" "));
  });

  it("the same seed gives the same output; different seeds differ", async () => {
    const run = async (seed: number) =>
      JSON.stringify(
        (await client.chat.completions.create({ model: "svc", messages: user("Tell me"), temperature: 1, seed })).choices[0]!.message,
      );
    const a = await run(1234);
    expect(await run(1234)).toBe(a);
    const others = new Set([a, await run(1), await run(2), await run(3), await run(4)]);
    expect(others.size).toBeGreaterThan(1);
  });

  it("frequency and presence penalties change what is sampled", async () => {
    // Same seed and temperature; only the penalties differ. The sampled words repeat less under penalty.
    const sample = async (seed: number, penalty: number) =>
      (
        await client.chat.completions.create({
          model: "svc",
          messages: user("Tell me"),
          temperature: 1,
          seed,
          reasoning_effort: "none",
          max_tokens: 40,
          frequency_penalty: penalty,
          presence_penalty: penalty,
        })
      ).choices[0]!.message.content;
    let differing = 0;
    for (const seed of [11, 12, 13, 14, 15]) if ((await sample(seed, 0)) !== (await sample(seed, 2))) differing++;
    expect(differing).toBeGreaterThan(0);
    // And without penalties the same seed reproduces exactly, so the difference comes from the penalties.
    expect(await sample(11, 0)).toBe(await sample(11, 0));
  });

  it("accepts the full sampling parameter set", async () => {
    const res = await client.chat.completions.create({
      model: "svc",
      messages: user("Hi"),
      temperature: 0.7,
      top_p: 0.9,
      frequency_penalty: 1.5,
      presence_penalty: -1,
      seed: 9007199254740993,
      user: "me",
      n: 1,
    });
    expect(res.choices).toHaveLength(1);
  });
});

describe("streaming", () => {
  it("raw stream: reasoning_content deltas, content deltas, finish, usage, [DONE]", async () => {
    const stream = await client.chat.completions.create({ model: "svc", messages: user("Hello"), temperature: 0, stream: true });
    let reasoning = "";
    let content = "";
    let role = "";
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      const delta = choice?.delta as (OpenAI.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string }) | undefined;
      if (delta?.role) role = delta.role;
      if (delta?.reasoning_content) reasoning += delta.reasoning_content;
      if (delta?.content) content += delta.content;
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(role).toBe("assistant");
    expect(reasoning).toBe(greedy.thought.trim());
    expect(content).toBe(greedy.answer.trim());
    expect(finish).toBe("stop");
    expect((usage as { reasoning_tokens?: number }).reasoning_tokens).toBe(5);
  });

  it("the SDK's stream helper produces the final completion", async () => {
    const stream = client.chat.completions.stream({ model: "svc", messages: user("Hello"), temperature: 0, reasoning_effort: "none" });
    const deltas: string[] = [];
    stream.on("content", (delta) => deltas.push(delta));
    const final = await stream.finalChatCompletion();
    expect(final.choices[0]!.message.content).toBe(greedy.answer.trim());
    expect(final.choices[0]!.finish_reason).toBe("stop");
    expect(deltas.join("")).toBe(greedy.answer.trim());
    expect(final.usage?.total_tokens).toBeGreaterThan(0);
  });
});

describe("stop sequences", () => {
  const answerWords = greedy.answer.trim().split(" ");
  const thoughtWords = greedy.thought.trim().split(" ");

  it("cut the visible answer before the match, never include it, and finish with stop", async () => {
    const stopWord = answerWords[3]!;
    const res = await client.chat.completions.create({ model: "svc", messages: user("Hi"), temperature: 0, stop: [stopWord, "zzz"] });
    expect(res.choices[0]!.finish_reason).toBe("stop");
    expect(res.choices[0]!.message.content).toBe(answerWords.slice(0, 3).join(" ") + " ");
    expect(res.choices[0]!.message.content).not.toContain(stopWord);
  });

  it("streamed: the stop sequence never appears in any delta, even across tokens", async () => {
    const target = `${answerWords[1]} ${answerWords[2]}`;
    const stream = await client.chat.completions.create({ model: "svc", messages: user("Hi"), temperature: 0, stop: target, stream: true });
    let content = "";
    let finish = "";
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(content).toBe(`${answerWords[0]} `);
    expect(finish).toBe("stop");
  });

  it("do not apply inside reasoning", async () => {
    const res = await client.chat.completions.create({ model: "svc", messages: user("Hi"), temperature: 0, stop: [thoughtWords[1]!] });
    const message = res.choices[0]!.message as { content: string; reasoning_content?: string };
    expect(message.reasoning_content).toContain(thoughtWords[1]!);
    expect(message.content).toBe(greedy.answer.trim());
  });
});

describe("JSON output", () => {
  it("json_object yields a parseable object, with thinking on", async () => {
    for (const seed of [1, 2, 3]) {
      const res = await client.chat.completions.create({ model: "svc", messages: user("JSON please"), seed, temperature: 1, response_format: { type: "json_object" } });
      const parsed = JSON.parse(res.choices[0]!.message.content!);
      expect(typeof parsed).toBe("object");
      expect(Array.isArray(parsed)).toBe(false);
      expect(res.model).toBe("svc-thinking");
      expect((res.choices[0]!.message as { reasoning_content?: string }).reasoning_content).toBeTruthy();
    }
  });

  it("json_schema output satisfies the schema (required, optional, enums, anyOf, nested arrays)", async () => {
    const schema = {
      type: "object",
      properties: {
        city: { type: "string" },
        unit: { enum: ["c", "f"] },
        days: { type: "array", items: { type: "object", properties: { t: { type: "integer" }, rain: { type: "boolean" } }, required: ["t", "rain"] }, minItems: 2, maxItems: 3 },
        note: { anyOf: [{ type: "string" }, { type: "null" }] },
        extra: { type: "number" },
      },
      required: ["city", "unit", "days", "note"],
      additionalProperties: false,
    };
    for (const [seed, effort] of [[1, "none"], [2, "medium"], [3, "high"]] as const) {
      const res = await client.chat.completions.create({
        model: "svc",
        messages: user("Forecast"),
        seed,
        temperature: 1,
        reasoning_effort: effort,
        response_format: { type: "json_schema", json_schema: { name: "forecast", schema, strict: true } },
      });
      const value = JSON.parse(res.choices[0]!.message.content!);
      expect(validateJsonAgainstSchema(schema, value)).toEqual({ valid: true });
    }
  });

  it("rejects schemas it cannot enforce with a 400 naming the schema", async () => {
    const err = await client.chat.completions
      .create({
        model: "svc",
        messages: user("x"),
        response_format: { type: "json_schema", json_schema: { name: "x", schema: { $ref: "https://example.com/s.json" } } },
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("response_format.json_schema.schema");
  });
});

describe("tools", () => {
  const weather: OpenAI.ChatCompletionTool = {
    type: "function",
    function: {
      name: "get_weather",
      description: "Weather for a city",
      parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city", "days"] },
    },
  };
  const time: OpenAI.ChatCompletionTool = {
    type: "function",
    function: { name: "get_time", parameters: { type: "object", properties: { zone: { enum: ["utc", "local"] } }, required: ["zone"] } },
  };

  it("a named tool_choice forces that call, with arguments matching its schema", async () => {
    const res = await client.chat.completions.create({
      model: "svc",
      messages: user("Weather in Oslo?"),
      tools: [weather, time],
      tool_choice: { type: "function", function: { name: "get_time" } },
      temperature: 1,
      seed: 5,
    });
    const choice = res.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    const call = choice.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.id).toMatch(/^call_/);
    expect(call.type).toBe("function");
    expect(call.function.name).toBe("get_time");
    expect(validateJsonAgainstSchema(time.function.parameters!, JSON.parse(call.function.arguments))).toEqual({ valid: true });
  });

  it("required forces some call, in both modes, streamed too", async () => {
    for (const effort of ["none", "medium"] as const) {
      const res = await client.chat.completions.create({ model: "svc", messages: user("Weather?"), tools: [weather], tool_choice: "required", reasoning_effort: effort, temperature: 0 });
      const call = res.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(call.function.name).toBe("get_weather");
      expect(validateJsonAgainstSchema(weather.function.parameters!, JSON.parse(call.function.arguments))).toEqual({ valid: true });
    }
    const stream = client.chat.completions.stream({ model: "svc", messages: user("Weather?"), tools: [weather], tool_choice: "required", temperature: 0 });
    const final = await stream.finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe("get_weather");
    expect(JSON.parse(call.function.arguments)).toHaveProperty("city");
  });

  it("auto lets the model decide: some seeds call the tool, some answer; none never calls", async () => {
    const outcomes = { call: 0, text: 0 };
    for (let seed = 1; seed <= 30 && (outcomes.call === 0 || outcomes.text === 0); seed++) {
      const res = await client.chat.completions.create({ model: "svc", messages: user("Weather?"), tools: [weather], tool_choice: "auto", temperature: 1, seed });
      const choice = res.choices[0]!;
      if (choice.message.tool_calls?.length) {
        outcomes.call++;
        expect(choice.finish_reason).toBe("tool_calls");
        const call = choice.message.tool_calls[0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
        expect(validateJsonAgainstSchema(weather.function.parameters!, JSON.parse(call.function.arguments))).toEqual({ valid: true });
      } else {
        outcomes.text++;
        expect(choice.finish_reason).toMatch(/stop|length/);
      }
    }
    expect(outcomes.call).toBeGreaterThan(0);
    expect(outcomes.text).toBeGreaterThan(0);
    for (let seed = 1; seed <= 10; seed++) {
      const res = await client.chat.completions.create({ model: "svc", messages: user("Weather?"), tools: [weather], tool_choice: "none", temperature: 1, seed });
      expect(res.choices[0]!.message.tool_calls ?? []).toHaveLength(0);
    }
  });

  it("feeds a tool result back and answers", async () => {
    const first = await client.chat.completions.create({ model: "svc", messages: user("Weather in Oslo?"), tools: [weather], tool_choice: "required", temperature: 0 });
    const call = first.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    const second = await client.chat.completions.create({
      model: "svc",
      messages: [
        ...user("Weather in Oslo?"),
        first.choices[0]!.message,
        { role: "tool", tool_call_id: call.id, content: '{"temp": 21, "sky": "clear"}' },
      ],
      tools: [weather],
      tool_choice: "none",
      temperature: 0,
    });
    expect(second.choices[0]!.finish_reason).toBe("stop");
    expect(second.choices[0]!.message.content).toBe(greedy.answer.trim());
    // The tool result is part of the prompt the model saw.
    expect(second.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens + 20);
  });

  it("a tool message for an unknown call id is a 400", async () => {
    const err = await client.chat.completions
      .create({
        model: "svc",
        messages: [...user("x"), { role: "tool", tool_call_id: "call_ghost", content: "r" }],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("messages[1].tool_call_id");
  });
});

describe("errors through the SDK", () => {
  it("401 AuthenticationError with code invalid_api_key and a request id", async () => {
    const bad = new OpenAI({ apiKey: "sk-svc-" + "0".repeat(32), baseURL: `${server.url}/v1`, maxRetries: 0 });
    const err = await bad.chat.completions.create({ model: "svc", messages: user("x") }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((err as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe("invalid_api_key");
    expect((err as InstanceType<typeof OpenAI.AuthenticationError>).requestID).toMatch(/^req_/);
  });

  it("400 BadRequestError naming the parameter; n other than 1 is refused", async () => {
    for (const [body, param] of [
      [{ temperature: 3 }, "temperature"],
      [{ n: 3 }, "n"],
      [{ top_p: 0 }, "top_p"],
      [{ stop: ["1", "2", "3", "4", "5"] }, "stop"],
    ] as const) {
      const err = await client.chat.completions.create({ model: "svc", messages: user("x"), ...body } as never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
    }
  });

  it("a prompt longer than the context is a clear 400, not a truncation", async () => {
    const err = await client.chat.completions.create({ model: "svc", messages: user("word ".repeat(5000)) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).code).toBe("context_length_exceeded");
  });

  it("404 for paths outside /v1 and /health, each with an X-Request-Id", async () => {
    for (const path of ["/", "/v1beta/chat", "/admin"]) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status).toBe(404);
      expect(res.headers.get("x-request-id")).toMatch(/^req_/);
    }
  });
});

describe("prompt caching", () => {
  it("reuses a repeated long prefix and reports cached_tokens from the shared prefix", async () => {
    const system = { role: "system" as const, content: "You are a careful assistant. ".repeat(60) };
    const first = await client.chat.completions.create({ model: "svc", messages: [system, ...user("First question?")], temperature: 0, reasoning_effort: "none" });
    const second = await client.chat.completions.create({ model: "svc", messages: [system, ...user("Second question?")], temperature: 0, reasoning_effort: "none" });
    const cachedFirst = first.usage!.prompt_tokens_details!.cached_tokens!;
    const cachedSecond = second.usage!.prompt_tokens_details!.cached_tokens!;
    expect(first.usage!.prompt_tokens).toBeGreaterThan(1000);
    // The system prompt (~1700 tokens) is shared; the differing user message is not.
    expect(cachedSecond).toBeGreaterThan(1500);
    expect(cachedSecond).toBeLessThan(second.usage!.prompt_tokens);
    expect(cachedSecond).toBeGreaterThan(cachedFirst);
    const again = await client.chat.completions.create({ model: "svc", messages: [system, ...user("Second question?")], temperature: 0, reasoning_effort: "none" });
    // An identical prompt reuses everything but the last token, which must be evaluated to sample from.
    expect(again.usage!.prompt_tokens_details!.cached_tokens).toBe(again.usage!.prompt_tokens - 1);
  });
});

describe("concurrency and cancellation", () => {
  it("queues requests beyond the sequence count and serves them all", async () => {
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => client.chat.completions.create({ model: "svc", messages: user(`Q${i}`), temperature: 0, reasoning_effort: "none" })),
    );
    for (const r of results) expect(r.choices[0]!.message.content).toBe(greedy.answer.trim());
  });

  it("a client that disconnects mid-stream frees its sequence", async () => {
    // A schema that needs hundreds of tokens keeps the generation going long enough to cut it.
    const schema = { type: "object", properties: { xs: { type: "array", items: { type: "integer" }, minItems: 1500 } }, required: ["xs"] };
    const controller = new AbortController();
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ messages: user("numbers"), stream: true, reasoning_effort: "none", response_format: { type: "json_schema", json_schema: { name: "n", schema } } }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    const busy = (await (await fetch(`${server.url}/health`)).json()) as { requests: { active: number } };
    expect(busy.requests.active).toBe(1);
    controller.abort();
    let active = 1;
    for (let i = 0; i < 50 && active > 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      active = ((await (await fetch(`${server.url}/health`)).json()) as { requests: { active: number } }).requests.active;
    }
    expect(active).toBe(0);
  });
});
