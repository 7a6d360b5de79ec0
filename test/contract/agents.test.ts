// What coding agents (Claude Code, Codex CLI) need from the surfaces, against a scripted engine: cut tool
// calls shown the same streamed or not, namespace and deferred tools, compaction, truncation, the model
// list's served context, and context errors that name the client's own parameter.
import { partialParse } from "@anthropic-ai/sdk/_vendor/partial-json-parser/parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import type { EngineEvent } from "../../server/engine/types.js";
import { decodeCompactionContent, SUMMARY_PREFIX } from "../../server/surfaces/responses/compaction.js";
import { answer, FakeEngine, outcome } from "../support/fake-engine.js";
import { buildTestApp, postJson, sseData, type TestApp } from "../support/test-app.js";

let t: TestApp;
let engine: FakeEngine;

beforeAll(async () => {
  engine = new FakeEngine();
  t = await buildTestApp(engine);
});
afterAll(async () => t.close());

const post = (url: string, body: unknown) => postJson(t, url, body);

function sseEvents(body: string): any[] {
  return body
    .split("\n\n")
    .filter((block) => block.trim() !== "" && !block.startsWith(":"))
    .map((block) => JSON.parse(block.split("\n").find((l) => l.startsWith("data: "))!.slice(6)));
}

/** A call to get_weather cut off by max_tokens after `args` (the deltas), with one complete call before it. */
function cutCall(args: string[]): EngineEvent[] {
  const complete = { id: "call_aaaaaaaaaaaaaaaaaaaaaaaa", name: "get_weather", arguments: '{"city":"Oslo"}' };
  const cut = { id: "call_bbbbbbbbbbbbbbbbbbbbbbbb", name: "get_weather", arguments: args.join("") };
  return [
    { type: "start", mode: "fast", promptTokens: 20, cachedTokens: 0 },
    { type: "tool_call.start", index: 0, id: complete.id, name: complete.name },
    { type: "tool_call.delta", index: 0, argumentsDelta: complete.arguments },
    { type: "tool_call.end", index: 0, arguments: complete.arguments },
    { type: "tool_call.start", index: 1, id: cut.id, name: cut.name },
    ...args.map((a): EngineEvent => ({ type: "tool_call.delta", index: 1, argumentsDelta: a })),
    {
      type: "done",
      outcome: outcome({
        mode: "fast",
        toolCalls: [complete],
        incompleteToolCall: cut,
        stopReason: "max_tokens",
        usage: { promptTokens: 20, cachedTokens: 0, completionTokens: 30, reasoningTokens: 0 },
      }),
    },
  ];
}

const weatherTool = { name: "get_weather", description: "Weather", input_schema: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } } };

describe("a tool call cut off by max_tokens", () => {
  const cuts: Array<[string[]]> = [[[]], [['{"ci']], [['{"city":', ' "Ber']], [['{"city": "Bergen"']], [['{"city": "Bergen", "days": 1']]];

  it.each(cuts)("Messages %j: the last block is an incomplete tool_use, the same as the stream gives", async (args) => {
    engine.script = () => cutCall(args);
    const body = { model: "claude-haiku-4-5", max_tokens: 30, tools: [weatherTool], messages: [{ role: "user", content: "Weather?" }] };
    const plain = (await post("/v1/messages", body)).json();
    expect(plain.stop_reason).toBe("max_tokens");
    expect(plain.content.map((b: { type: string }) => b.type)).toEqual(["tool_use", "tool_use"]);
    const last = plain.content.at(-1);
    expect(last).toMatchObject({ type: "tool_use", id: "toolu_bbbbbbbbbbbbbbbbbbbbbbbb", name: "get_weather" });
    // What the Anthropic SDK's stream accumulator makes of the same stream: partial JSON, parsed.
    const frames = sseEvents((await post("/v1/messages", { ...body, stream: true })).body);
    const json = frames.filter((f) => f.type === "content_block_delta" && f.index === 1).map((f) => f.delta.partial_json).join("");
    expect(last.input).toEqual(json === "" ? {} : partialParse(json));
    expect(frames.find((f) => f.type === "message_delta").delta.stop_reason).toBe("max_tokens");
  });

  it.each(cuts)("Chat %j: the non-streamed message carries the cut call with the arguments streamed", async (args) => {
    engine.script = () => cutCall(args);
    const body = { model: "svc", messages: [{ role: "user", content: "Weather?" }], tools: [{ type: "function", function: { name: "get_weather" } }] };
    const plain = (await post("/v1/chat/completions", body)).json();
    expect(plain.choices[0].finish_reason).toBe("length");
    const streamed = sseData((await post("/v1/chat/completions", { ...body, stream: true })).body).filter((c): c is any => c !== "[DONE]");
    const calls: Array<{ id: string; name: string; arguments: string }> = [];
    for (const chunk of streamed)
      for (const d of chunk.choices?.[0]?.delta?.tool_calls ?? []) {
        calls[d.index] ??= { id: d.id, name: d.function.name, arguments: "" };
        calls[d.index]!.arguments += d.function.arguments ?? "";
      }
    expect(plain.choices[0].message.tool_calls.map((c: any) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments }))).toEqual(calls);
    expect(calls.at(-1)!.arguments).toBe(args.join(""));
  });

  it.each(cuts)("Responses %j: an incomplete function_call item, in the stream's final object too", async (args) => {
    engine.script = () => cutCall(args);
    const body = { model: "svc", input: "Weather?", tools: [{ type: "function", name: "get_weather" }] };
    const plain = (await post("/v1/responses", body)).json();
    expect(plain.status).toBe("incomplete");
    expect(plain.output.map((i: any) => [i.type, i.status])).toEqual([
      ["function_call", "completed"],
      ["function_call", "incomplete"],
    ]);
    expect(plain.output[1]).toMatchObject({ call_id: "call_bbbbbbbbbbbbbbbbbbbbbbbb", arguments: args.join("") });
    const events = sseEvents((await post("/v1/responses", { ...body, stream: true })).body);
    const final = events.at(-1);
    expect(final.type).toBe("response.incomplete");
    const strip = (items: any[]) => items.map(({ id: _id, ...rest }) => rest);
    expect(strip(final.response.output)).toEqual(strip(plain.output));
  });
});

describe("Codex on the Responses surface", () => {
  const namespace = {
    type: "namespace",
    name: "multi_agent_v1",
    description: "Sub-agents",
    tools: [
      { type: "function", name: "spawn_agent", parameters: { type: "object", properties: { task: { type: "string" } } } },
      { type: "function", name: "hidden", defer_loading: true, parameters: { type: "object" } },
    ],
  };

  it("offers a namespace's functions under namespaced names, and answers calls with the namespace apart", async () => {
    const call = { id: "call_cccccccccccccccccccccccc", name: "multi_agent_v1.spawn_agent", arguments: '{"task":"x"}' };
    engine.script = () => [
      { type: "start", mode: "fast", promptTokens: 9, cachedTokens: 0 },
      { type: "tool_call.start", index: 0, id: call.id, name: call.name },
      { type: "tool_call.delta", index: 0, argumentsDelta: call.arguments },
      { type: "tool_call.end", index: 0, arguments: call.arguments },
      { type: "done", outcome: outcome({ mode: "fast", toolCalls: [call], stopReason: "tool_calls" }) },
    ];
    const body = {
      model: "svc",
      input: "Go",
      tools: [namespace, { type: "function", name: "exec_command", parameters: { type: "object" } }, { type: "function", name: "later", defer_loading: true }],
    };
    const res = await post("/v1/responses", body);
    expect(engine.requests.at(-1)!.tools.map((tool) => tool.name)).toEqual(["multi_agent_v1.spawn_agent", "exec_command"]);
    expect(res.json().output).toEqual([
      expect.objectContaining({ type: "function_call", name: "spawn_agent", namespace: "multi_agent_v1", call_id: call.id, arguments: call.arguments }),
    ]);
    const events = sseEvents((await post("/v1/responses", { ...body, stream: true })).body);
    expect(events.find((e) => e.type === "response.output_item.added").item).toMatchObject({ name: "spawn_agent", namespace: "multi_agent_v1" });
    // Sent back, the call reads as the model wrote it.
    engine.script = () => answer("ok");
    await post("/v1/responses", {
      ...body,
      input: [
        { role: "user", content: "Go" },
        { type: "function_call", call_id: call.id, name: "spawn_agent", namespace: "multi_agent_v1", arguments: call.arguments },
        { type: "function_call_output", call_id: call.id, output: "spawned" },
      ],
    });
    const assistant = engine.requests.at(-1)!.messages.find((m) => m.role === "assistant");
    expect(assistant).toMatchObject({ toolCalls: [{ name: "multi_agent_v1.spawn_agent" }] });
  });

  it("reports the effort that ran: the documented default (medium) when none is sent", async () => {
    engine.script = () => answer("ok");
    expect((await post("/v1/responses", { model: "svc", input: "Hi", reasoning: { summary: "auto" } })).json().reasoning).toEqual({ effort: "medium", summary: "auto" });
    expect(engine.requests.at(-1)!.mode).toBe("thinking");
    expect((await post("/v1/responses", { model: "svc", input: "Hi", reasoning: { effort: "low" } })).json().reasoning.effort).toBe("low");
    expect((await post("/v1/responses", { model: "svc-fast", input: "Hi" })).json().reasoning.effort).toBe("none");
  });

  it("a too-long input is a 400 naming input (messages on the other surfaces)", async () => {
    engine.script = () => new AppError("invalid_request", "Too long.", { code: "context_length_exceeded", param: "messages" });
    expect((await post("/v1/responses", { model: "svc", input: "Hi" })).json().error).toMatchObject({ code: "context_length_exceeded", param: "input" });
    expect((await post("/v1/chat/completions", { model: "svc", messages: [{ role: "user", content: "Hi" }] })).json().error).toMatchObject({
      param: "messages",
    });
  });
});

describe("compaction", () => {
  const history = [
    { role: "developer", content: "You are Codex." },
    { role: "user", content: "Fix the bug." },
    { type: "message", role: "assistant", content: [{ type: "output_text", text: "Looking." }] },
    { role: "user", content: "And the tests." },
  ];

  it("a compaction_trigger item gets one compaction item holding the model's summary, streamed or not", async () => {
    engine.script = () => answer("The user wants the bug and the tests fixed.");
    const body = { model: "svc", input: [...history, { type: "compaction_trigger" }], tools: [{ type: "function", name: "exec_command" }] };
    const plain = (await post("/v1/responses", body)).json();
    const request = engine.requests.at(-1)!;
    // The tools stay described (the prompt's start is shared with the turns), but cannot be called.
    expect(request.tools.map((tool) => tool.name)).toEqual(["exec_command"]);
    expect(request.toolChoice).toEqual({ type: "none" });
    expect(request.messages.at(-1)).toMatchObject({ role: "user", content: [{ text: expect.stringContaining("summary") }] });
    expect(plain.status).toBe("completed");
    expect(plain.output).toEqual([{ id: expect.stringMatching(/^cmp_/), type: "compaction", encrypted_content: expect.any(String) }]);
    expect(decodeCompactionContent(plain.output[0].encrypted_content)).toBe("The user wants the bug and the tests fixed.");

    const events = sseEvents((await post("/v1/responses", { ...body, stream: true })).body);
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events[3].item.type).toBe("compaction");
    expect(events[4].response.output).toEqual([events[3].item]);
  });

  it("a compaction item sent back gives the model its summary; one from another service is left out", async () => {
    engine.script = () => answer("Summary text.");
    const item = (await post("/v1/responses", { model: "svc", input: [...history, { type: "compaction_trigger" }] })).json().output[0];
    engine.script = () => answer("ok");
    await post("/v1/responses", {
      model: "svc",
      input: [{ role: "user", content: "Fix the bug." }, item, { type: "compaction", encrypted_content: "gAAAAB-openai-opaque" }, { role: "user", content: "Next?" }],
    });
    const users = engine.requests.at(-1)!.messages.filter((m) => m.role === "user").map((m) => (m.content[0] as { text: string }).text);
    expect(users).toEqual(["Fix the bug.", `${SUMMARY_PREFIX}\n\nSummary text.`, "Next?"]);
    const misplaced = await post("/v1/responses", { model: "svc", input: [{ type: "compaction_trigger" }, { role: "user", content: "x" }] });
    expect(misplaced.statusCode).toBe(400);
    expect(misplaced.json().error.param).toBe("input[0].type");
  });

  it("POST /v1/responses/compact returns the user messages and one compaction item (response.compaction)", async () => {
    engine.script = () => answer("Compact summary.");
    const res = await post("/v1/responses/compact", { model: "svc", input: history });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ id: expect.stringMatching(/^resp_/), object: "response.compaction", created_at: expect.any(Number) });
    expect(body.output.map((i: any) => [i.type, i.role])).toEqual([
      ["message", "user"],
      ["message", "user"],
      ["compaction", undefined],
    ]);
    expect(body.output[0].content).toEqual([{ type: "input_text", text: "Fix the bug." }]);
    expect(decodeCompactionContent(body.output[2].encrypted_content)).toBe("Compact summary.");
    expect(body.usage).toMatchObject({ input_tokens: 12, output_tokens: expect.any(Number) });
    const unauth = await t.app.inject({ method: "POST", url: "/v1/responses/compact", payload: { input: "x" } });
    expect(unauth.statusCode).toBe(401);
    const stateful = await post("/v1/responses/compact", { input: "x", previous_response_id: "resp_1" });
    expect(stateful.json().error).toMatchObject({ param: "previous_response_id" });
  });

  it("truncation auto leaves out the oldest turns until the input fits the context", async () => {
    engine.script = () => answer("ok");
    const turns = Array.from({ length: 10 }, (_, i) => [
      { role: "user", content: `question ${i} ${"x".repeat(400)}` },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: `answer ${i}` }] },
    ]).flat();
    const input = [{ role: "developer", content: "Rules." }, ...turns, { role: "user", content: "last" }];
    await post("/v1/responses", { model: "svc", input, truncation: "auto", max_output_tokens: 100 });
    const kept = engine.requests.at(-1)!.messages;
    // The fake engine counts one token per character of the messages' JSON; its context is 4096 tokens.
    expect(JSON.stringify(kept).length + 116).toBeLessThanOrEqual(4096);
    expect(kept[0]).toMatchObject({ role: "system" });
    expect(kept[1]).toMatchObject({ role: "user" });
    expect(kept.at(-1)).toMatchObject({ role: "user", content: [{ text: "last" }] });
    expect(kept.length).toBeLessThan(input.length);
    expect(kept.length).toBeGreaterThan(3);
    // Without it the whole input goes to the engine (which refuses what does not fit).
    await post("/v1/responses", { model: "svc", input, max_output_tokens: 100 });
    expect(engine.requests.at(-1)!.messages).toHaveLength(input.length);
  });
});

describe("GET /v1/models", () => {
  it("shows the context and output the loaded model serves, and null without a model", async () => {
    const model = (await t.app.inject({ method: "GET", url: "/v1/models" })).json().data[0];
    expect(model).toMatchObject({ context_window: 200000, loaded_context_length: 4096, max_output_tokens: 4080 });
    const empty = await buildTestApp(null);
    try {
      const none = (await empty.app.inject({ method: "GET", url: "/v1/models/svc" })).json();
      expect(none).toMatchObject({ id: "svc-preview", context_window: 200000, loaded_context_length: null, max_output_tokens: null });
    } finally {
      await empty.close();
    }
  });
});
