// The Messages codec without a server: decoder corners, the stream encoder's state machine, error bodies.
import { describe, expect, it } from "vitest";
import { AppError, type AppErrorKind } from "../../server/core/errors.js";
import type { InferenceEvent, InferenceResult } from "../../server/core/inference.js";
import { encodeAnthropicError } from "../../server/http/anthropic-errors.js";
import { decodeCountTokensRequest, decodeMessagesRequest } from "../../server/surfaces/messages/decode.js";
import { encodeMessagesResponse, thinkingSignature, toolInput, toolUseId } from "../../server/surfaces/messages/encode.js";
import type { MessagesRequestBody } from "../../server/surfaces/messages/schema.js";
import { MessagesStreamEncoder } from "../../server/surfaces/messages/stream.js";
import { sseEvents } from "../support/sse-events.js";

/** Blocks are loosely typed in the schema (decode checks them), so bodies are built untyped here. */
const body = (extra: Record<string, unknown> = {}): MessagesRequestBody =>
  ({ model: "svc", max_tokens: 100, messages: [{ role: "user", content: "Hi" }], ...extra }) as MessagesRequestBody;

function result(partial: Partial<InferenceResult> = {}): InferenceResult {
  return {
    mode: "fast",
    text: "",
    reasoning: "",
    toolCalls: [],
    stopReason: "end_turn",
    stopSequence: null,
    usage: { promptTokens: 10, cachedTokens: 0, cacheWriteTokens: 0, completionTokens: 3, reasoningTokens: 0 },
    complexity: {} as InferenceResult["complexity"],
    ...partial,
  };
}

const envelope = { id: "msg_test", model: "claude-x", thinkingDisplay: "summarized" as const };

describe("decodeMessagesRequest", () => {
  it("gives an empty system string no system message and null optionals their defaults", () => {
    const decoded = decodeMessagesRequest(body({ system: "", stop_sequences: null, temperature: null, tools: null, thinking: null, stream: null }));
    expect(decoded.inference.messages).toEqual([{ role: "user", content: [{ type: "text", text: "Hi" }] }]);
    expect(decoded.inference.stopSequences).toEqual([]);
    expect(decoded.inference.tools).toEqual([]);
    expect(decoded.stream).toBe(false);
    expect(decoded.thinkingDisplay).toBe("summarized");
  });

  it("names image parts by their place in the client's request, however deep", () => {
    const decoded = decodeMessagesRequest(
      body({
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "see" },
              { type: "document", source: { type: "content", content: [{ type: "text", text: "a" }, { type: "image", source: { type: "url", url: "https://x/y.png" } }] } },
            ],
          },
        ],
      }),
    );
    const parts = decoded.inference.messages[0]!.content;
    expect(parts.map((p) => p.type)).toEqual(["text", "file", "image"]);
    expect(parts[2]).toMatchObject({ param: "messages[0].content[1].source.content[1]", source: { kind: "url" } });
    expect(parts[1]).toMatchObject({ param: "messages[0].content[1]", source: { kind: "text", text: "a" } });
  });

  it("puts a tool_result's breakpoint on its last part, and an empty result gets an empty text", () => {
    const decoded = decodeMessagesRequest(
      body({
        messages: [
          { role: "user", content: "q" },
          { role: "assistant", content: [{ type: "tool_use", id: "a", name: "f", input: {} }, { type: "tool_use", id: "b", name: "f" }] },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: "a", content: [{ type: "text", text: "1" }, { type: "text", text: "2" }], cache_control: { type: "ephemeral" } },
              { type: "tool_result", tool_use_id: "b" },
            ],
          },
        ],
      }),
    );
    const [, assistant, first, second] = decoded.inference.messages;
    expect(assistant).toMatchObject({ toolCalls: [{ arguments: "{}" }, { arguments: "{}" }] });
    expect(first!.content).toEqual([
      { type: "text", text: "1" },
      { type: "text", text: "2", cacheBreakpoint: true },
    ]);
    expect(second!.content).toEqual([{ type: "text", text: "" }]);
  });

  it("puts a top-level cache_control on the last call when the conversation ends with calls", () => {
    const decoded = decodeMessagesRequest(
      body({
        cache_control: { type: "ephemeral" },
        messages: [
          { role: "user", content: "q" },
          { role: "assistant", content: [{ type: "tool_use", id: "a", name: "f", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "a", content: "r" }] },
          { role: "assistant", content: [{ type: "text", text: "x" }] },
        ],
      }),
    );
    expect(decoded.inference.messages.at(-1)).toEqual({ role: "assistant", content: [{ type: "text", text: "x", cacheBreakpoint: true }] });
  });

  it("count_tokens takes no max_tokens and does not compare budget_tokens with it", () => {
    const request = decodeCountTokensRequest({ model: "m", messages: [{ role: "user", content: "x" }], thinking: { type: "enabled", budget_tokens: 150000 } } as never);
    expect(request.reasoning).toMatchObject({ mode: "thinking", budgetTokens: 150000 });
    expect(request.maxTokens).toBeUndefined();
  });
});

describe("encodeMessagesResponse", () => {
  it("parses tool input, maps ids and leaves unparseable input as {}", () => {
    expect(toolUseId("call_abc")).toBe("toolu_abc");
    expect(toolUseId("xyz")).toBe("toolu_xyz");
    expect(toolInput('{"a":[1]}')).toEqual({ a: [1] });
    expect(toolInput('{"a":')).toEqual({});
    expect(toolInput("[1]")).toEqual({});
    const encoded = encodeMessagesResponse(result({ stopReason: "tool_calls", toolCalls: [{ id: "call_1", name: "f", arguments: '{"x":1}' }] }), envelope);
    expect(encoded.content).toEqual([{ type: "tool_use", id: "toolu_1", name: "f", input: { x: 1 }, caller: { type: "direct" } }]);
    expect(encoded.stop_reason).toBe("tool_use");
  });

  it("signs each thought differently and stably", () => {
    expect(thinkingSignature("a")).toBe(thinkingSignature("a"));
    expect(thinkingSignature("a")).not.toBe(thinkingSignature("b"));
  });
});

describe("MessagesStreamEncoder", () => {
  const start: InferenceEvent = { type: "start", mode: "thinking", promptTokens: 10, cachedTokens: 2, cacheWriteTokens: 5 };

  function run(events: InferenceEvent[], display: "summarized" | "omitted" = "summarized") {
    const encoder = new MessagesStreamEncoder({ ...envelope, thinkingDisplay: display }, "req_1");
    const frames = events.flatMap((e) => encoder.push(e));
    for (const f of frames) expect(f).toMatch(/^event: [a-z_]+\ndata: \{.*\}\n\n$/s);
    return { encoder, events: sseEvents(frames.join("")) };
  }

  it("starts with the input split of usage", () => {
    const { events } = run([start]);
    expect(events[0]!.data.message.usage).toMatchObject({ input_tokens: 3, cache_read_input_tokens: 2, cache_creation_input_tokens: 5, output_tokens: 0 });
    expect(events[1]).toEqual({ event: "ping", data: { type: "ping" } });
  });

  it("goes from a thought straight to a tool call: the thinking block is signed and closed first", () => {
    const { events } = run([
      start,
      { type: "reasoning.delta", text: "plan" },
      { type: "tool_call.start", index: 0, id: "call_q", name: "f" },
      { type: "tool_call.delta", index: 0, argumentsDelta: "{}" },
      { type: "tool_call.end", index: 0, arguments: "{}" },
      { type: "done", result: result({ reasoning: "plan", stopReason: "tool_calls" }) },
    ]);
    expect(events.slice(2).map((e) => (e.event === "content_block_delta" ? `${e.data.index}:${e.data.delta.type}` : `${e.data.index ?? ""}:${e.event}`))).toEqual([
      "0:content_block_start",
      "0:thinking_delta",
      "0:signature_delta",
      "0:content_block_stop",
      "1:content_block_start",
      "1:input_json_delta",
      "1:content_block_stop",
      ":message_delta",
      ":message_stop",
    ]);
    expect(events[4]!.data.delta.signature).toBe(thinkingSignature("plan"));
  });

  it("closes a tool_use block cut short by max_tokens before message_delta", () => {
    const { events } = run([
      start,
      { type: "tool_call.start", index: 0, id: "call_q", name: "f" },
      { type: "tool_call.delta", index: 0, argumentsDelta: '{"a":' },
      { type: "done", result: result({ stopReason: "max_tokens" }) },
    ]);
    expect(events.map((e) => e.event).slice(-4)).toEqual(["content_block_delta", "content_block_stop", "message_delta", "message_stop"]);
    expect(events.at(-2)!.data.delta.stop_reason).toBe("max_tokens");
  });

  it("omitted thinking sends only the signature", () => {
    const { events } = run([start, { type: "reasoning.delta", text: "secret" }, { type: "text.delta", text: "hi" }], "omitted");
    expect(events.slice(2, 5).map((e) => e.data.delta?.type ?? e.event)).toEqual(["content_block_start", "signature_delta", "content_block_stop"]);
    expect(JSON.stringify(events)).not.toContain("secret");
  });

  it("an error is one error event with the Anthropic body", () => {
    const encoder = new MessagesStreamEncoder(envelope, "req_9");
    encoder.push(start);
    const frames = encoder.error(new AppError("unavailable", "Busy.", { code: "model_loading" }));
    expect(sseEvents(frames.join(""))).toEqual([
      { event: "error", data: { type: "error", error: { type: "overloaded_error", message: "Busy.", details: { error_code: "model_loading" } }, request_id: "req_9" } },
    ]);
    expect(encoder.isFinished).toBe(true);
  });
});

describe("encodeAnthropicError", () => {
  it.each([
    ["invalid_request", "invalid_request_error"],
    ["authentication", "authentication_error"],
    ["permission", "permission_error"],
    ["not_found", "not_found_error"],
    ["conflict", "invalid_request_error"],
    ["payload_too_large", "request_too_large"],
    ["unprocessable", "invalid_request_error"],
    ["rate_limit", "rate_limit_error"],
    ["internal", "api_error"],
    ["unavailable", "overloaded_error"],
  ] as Array<[AppErrorKind, string]>)("%s → %s", (kind, type) => {
    const body = encodeAnthropicError(new AppError(kind, "Something.", { param: "x.y", code: "c" }), "req_1");
    expect(body).toEqual({ type: "error", error: { type, message: "x.y: Something.", details: { error_code: "c", param: "x.y" } }, request_id: "req_1" });
  });

  it("does not repeat a param the message already names, and omits details without a code", () => {
    expect(encodeAnthropicError(new AppError("internal", "Bad x.y here.", { param: "x.y" }), "r").error).toEqual({ type: "api_error", message: "Bad x.y here." });
  });
});
