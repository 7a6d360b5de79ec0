// The Responses stream encoder alone: event order, payloads, sequence numbers, and that the openai SDK's
// own accumulator (what responses.stream() runs) rebuilds exactly the final object from the events.
import { accumulateResponse } from "openai/lib/responses/ResponseAccumulator";
import { describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import type { InferenceEvent, InferenceResult, ToolCall } from "../../server/core/inference.js";
import { encodeResponse, type ResponsesEnvelope } from "../../server/surfaces/responses/encode.js";
import { ResponsesStreamEncoder } from "../../server/surfaces/responses/stream.js";

const echo: ResponsesEnvelope["echo"] = {
  instructions: null,
  metadata: {},
  maxOutputTokens: null,
  temperature: 0.7,
  topP: 0.95,
  parallelToolCalls: true,
  toolChoice: "auto",
  tools: [],
  reasoning: { effort: null, summary: null },
  textFormat: { type: "text" },
  namespaced: new Map(),
  compaction: false,
  truncation: "disabled",
};

const envelope = (trace = false): ResponsesEnvelope => ({ id: "resp_test", createdAt: 1700000000, trace, echo });

function result(partial: Partial<InferenceResult>): InferenceResult {
  return {
    mode: "thinking",
    text: "",
    reasoning: "",
    toolCalls: [],
    stopReason: "end_turn",
    stopSequence: null,
    usage: { promptTokens: 10, cachedTokens: 2, cacheWriteTokens: 0, completionTokens: 7, reasoningTokens: 3 },
    complexity: {
      score: 0.1,
      level: "low",
      mode: "thinking",
      effort: "medium",
      reasoning_cap: 4096,
      reasoning_budget: 4096,
      reasoning_tokens: 3,
      prompt_tokens: 10,
      tools: 0,
      structured_output: false,
    },
    ...partial,
  };
}

interface Frame {
  event: string;
  data: any;
}

function parse(frames: string[]): Frame[] {
  return frames.map((f) => {
    expect(f.endsWith("\n\n")).toBe(true);
    const [eventLine, dataLine, ...rest] = f.slice(0, -2).split("\n");
    expect(rest).toEqual([]);
    expect(eventLine).toMatch(/^event: /);
    expect(dataLine).toMatch(/^data: /);
    const event = eventLine!.slice(7);
    const data = JSON.parse(dataLine!.slice(6));
    expect(data.type).toBe(event);
    return { event, data };
  });
}

function run(events: InferenceEvent[], trace = false): Frame[] {
  const encoder = new ResponsesStreamEncoder(envelope(trace));
  const frames = parse(events.flatMap((e) => encoder.push(e)));
  expect(encoder.isFinished).toBe(true);
  return frames;
}

/** What the SDK's stream helper holds at the end (it throws on anything it cannot place). */
function accumulate(frames: Frame[]) {
  let snapshot: any;
  for (const f of frames) snapshot = accumulateResponse(f.data, snapshot);
  return snapshot;
}

const start = (mode: "fast" | "thinking" = "thinking"): InferenceEvent => ({ type: "start", mode, promptTokens: 10, cachedTokens: 2 });
const text = (t: string): InferenceEvent => ({ type: "text.delta", text: t });
const thought = (t: string): InferenceEvent => ({ type: "reasoning.delta", text: t });
const done = (r: Partial<InferenceResult>): InferenceEvent => ({ type: "done", result: result(r) });

function callEvents(index: number, call: ToolCall, pieces: string[]): InferenceEvent[] {
  return [
    { type: "tool_call.start", index, id: call.id, name: call.name },
    ...pieces.map((p): InferenceEvent => ({ type: "tool_call.delta", index, argumentsDelta: p })),
    { type: "tool_call.end", index, arguments: call.arguments },
  ];
}

describe("ResponsesStreamEncoder", () => {
  it("text answer: the spec's order, consecutive sequence numbers, empty items first, full object last", () => {
    const frames = run([start(), thought("hmm"), text("Hello"), text(" there"), done({ text: "Hello there", reasoning: "hmm" })]);
    expect(frames.map((f) => f.event)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(frames.map((f) => f.data.sequence_number)).toEqual(frames.map((_, i) => i));
    const created = frames[0]!.data.response;
    expect(created).toMatchObject({ id: "resp_test", object: "response", status: "in_progress", output: [], usage: null, model: "svc-thinking", store: false });
    expect(frames[1]!.data.response.status).toBe("in_progress");
    const added = frames[2]!.data;
    expect(added.output_index).toBe(0);
    expect(added.item).toEqual({ id: expect.stringMatching(/^msg_/), type: "message", role: "assistant", status: "in_progress", content: [] });
    const id = added.item.id;
    expect(frames[3]!.data).toMatchObject({ item_id: id, output_index: 0, content_index: 0, part: { type: "output_text", text: "", annotations: [] } });
    expect(frames[4]!.data).toMatchObject({ item_id: id, output_index: 0, content_index: 0, delta: "Hello", logprobs: [] });
    expect(frames[6]!.data).toMatchObject({ item_id: id, text: "Hello there" });
    expect(frames[7]!.data.part).toEqual({ type: "output_text", text: "Hello there", annotations: [], logprobs: [] });
    expect(frames[8]!.data.item).toMatchObject({ id, status: "completed", content: [{ type: "output_text", text: "Hello there" }] });
    const completed = frames[9]!.data.response;
    expect(completed.status).toBe("completed");
    expect(completed.output).toEqual([frames[8]!.data.item]);
    expect(completed.usage).toEqual({
      input_tokens: 10,
      input_tokens_details: { cached_tokens: 2, cache_write_tokens: 0 },
      output_tokens: 7,
      output_tokens_details: { reasoning_tokens: 3 },
      total_tokens: 17,
    });
    // No reasoning item without the key's trace flag, though the model thought.
    expect(JSON.stringify(frames)).not.toContain("reasoning_summary");
    expect(JSON.stringify(frames)).not.toContain("hmm");
    const final = accumulate(frames);
    expect(final.output_text).toBe("Hello there");
    expect(final.output).toEqual(completed.output);
  });

  it("with the trace flag: a reasoning item with summary events comes first, the message at index 1", () => {
    const frames = run([start(), thought("let me"), thought(" think"), text("Hi"), done({ text: "Hi", reasoning: "let me think" })], true);
    expect(frames.map((f) => f.event)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.reasoning_summary_part.added",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.done",
      "response.reasoning_summary_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const rs = frames[2]!.data;
    expect(rs).toEqual({ type: "response.output_item.added", sequence_number: 2, output_index: 0, item: { id: expect.stringMatching(/^rs_/), type: "reasoning", summary: [] } });
    expect(frames[3]!.data).toMatchObject({ item_id: rs.item.id, output_index: 0, summary_index: 0, part: { type: "summary_text", text: "" } });
    expect(frames[4]!.data).toMatchObject({ item_id: rs.item.id, summary_index: 0, delta: "let me" });
    expect(frames[6]!.data).toMatchObject({ text: "let me think" });
    expect(frames[7]!.data.part).toEqual({ type: "summary_text", text: "let me think" });
    expect(frames[8]!.data.item).toEqual({ id: rs.item.id, type: "reasoning", summary: [{ type: "summary_text", text: "let me think" }] });
    expect(frames[9]!.data.output_index).toBe(1);
    expect(frames[11]!.data).toMatchObject({ output_index: 1, delta: "Hi" });
    const completed = frames.at(-1)!.data.response;
    expect(completed.output.map((i: any) => [i.type, i.id])).toEqual([
      ["reasoning", rs.item.id],
      ["message", frames[9]!.data.item.id],
    ]);
    const final = accumulate(frames);
    expect(final.output).toEqual(completed.output);
    expect(final.output_text).toBe("Hi");
  });

  it("tool calls: one function_call item each, argument deltas, no message item without text", () => {
    const a = { id: "call_a", name: "get_weather", arguments: '{"city":"Oslo"}' };
    const b = { id: "call_b", name: "get_time", arguments: '{"zone":"utc"}' };
    const frames = run([
      start("fast"),
      ...callEvents(0, a, ['{"city":', '"Oslo"}']),
      ...callEvents(1, b, ['{"zone":"utc"}']),
      done({ mode: "fast", toolCalls: [a, b], stopReason: "tool_calls" }),
    ]);
    expect(frames.map((f) => f.event)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const first = frames[2]!.data;
    expect(first).toMatchObject({ output_index: 0, item: { type: "function_call", status: "in_progress", call_id: "call_a", name: "get_weather", arguments: "" } });
    expect(first.item.id).toMatch(/^fc_/);
    expect(frames[3]!.data).toEqual({ type: "response.function_call_arguments.delta", sequence_number: 3, item_id: first.item.id, output_index: 0, delta: '{"city":' });
    expect(frames[5]!.data).toMatchObject({ item_id: first.item.id, output_index: 0, name: "get_weather", arguments: '{"city":"Oslo"}' });
    expect(frames[6]!.data.item).toEqual({ ...first.item, status: "completed", arguments: '{"city":"Oslo"}' });
    expect(frames[7]!.data).toMatchObject({ output_index: 1, item: { call_id: "call_b" } });
    const completed = frames.at(-1)!.data.response;
    expect(completed.model).toBe("svc-fast");
    expect(completed.output).toEqual([frames[6]!.data.item, frames[10]!.data.item]);
    expect(accumulate(frames).output).toEqual(completed.output);
  });

  it("text before a call: the message is completed before the call's item is added", () => {
    const call = { id: "call_c", name: "f", arguments: "{}" };
    const frames = run([start(), text("Checking."), ...callEvents(0, call, ["{}"]), done({ text: "Checking.", toolCalls: [call], stopReason: "tool_calls" })]);
    const names = frames.map((f) => f.event);
    expect(names.indexOf("response.output_item.done")).toBeLessThan(names.lastIndexOf("response.output_item.added"));
    const completed = frames.at(-1)!.data.response;
    expect(completed.output.map((i: any) => i.type)).toEqual(["message", "function_call"]);
    expect(completed.output[1]).toMatchObject({ call_id: "call_c", status: "completed" });
    expect(accumulate(frames).output).toEqual(completed.output);
  });

  it("max_output_tokens reached: response.incomplete with the reason, the message incomplete", () => {
    const frames = run([start(), text("Sure here"), done({ text: "Sure here", stopReason: "max_tokens" })]);
    expect(frames.map((f) => f.event).slice(-2)).toEqual(["response.output_item.done", "response.incomplete"]);
    expect(frames.at(-2)!.data.item.status).toBe("incomplete");
    const response = frames.at(-1)!.data.response;
    expect(response).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" } });
    expect(response.output[0]).toMatchObject({ status: "incomplete", content: [{ text: "Sure here" }] });
    expect(accumulate(frames).status).toBe("incomplete");
  });

  it("no text and no calls (the budget went to reasoning): an empty message is still announced", () => {
    const frames = run([start(), thought("hmm"), done({ reasoning: "hmm", stopReason: "max_tokens" })]);
    expect(frames.map((f) => f.event)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.incomplete",
    ]);
    const final = accumulate(frames);
    expect(final.output_text).toBe("");
    expect(final.output).toEqual([{ id: expect.stringMatching(/^msg_/), type: "message", role: "assistant", status: "incomplete", content: [{ type: "output_text", text: "", annotations: [], logprobs: [] }] }]);
  });

  it("a call cut off by max_output_tokens is closed as incomplete", () => {
    const frames = run([
      start("fast"),
      { type: "tool_call.start", index: 0, id: "call_x", name: "f" },
      { type: "tool_call.delta", index: 0, argumentsDelta: '{"a":' },
      done({ mode: "fast", stopReason: "max_tokens" }),
    ]);
    const closing = frames.find((f) => f.event === "response.output_item.done" && f.data.item.type === "function_call")!;
    expect(closing.data.item).toMatchObject({ status: "incomplete", arguments: '{"a":' });
    expect(frames.at(-1)!.event).toBe("response.incomplete");
    accumulate(frames);
  });

  it("an error after the start: response.failed with status failed, error {code, message}, the partial output", () => {
    const encoder = new ResponsesStreamEncoder(envelope());
    const frames = parse([...encoder.push(start()), ...encoder.push(text("par")), ...encoder.error(new AppError("internal", "boom"))]);
    const failed = frames.at(-1)!;
    expect(failed.event).toBe("response.failed");
    expect(failed.data.response).toMatchObject({
      status: "failed",
      error: { code: "internal_error", message: "boom" },
      output: [{ type: "message", status: "incomplete", content: [{ text: "par" }] }],
      usage: null,
    });
    expect(frames.map((f) => f.data.sequence_number)).toEqual(frames.map((_, i) => i));
    expect(encoder.isFinished).toBe(true);
    expect(encoder.error(new AppError("internal", "again"))).toEqual([]);
    expect(accumulate(frames).status).toBe("failed");
  });

  it("ends with the same object a non-streamed request returns (ids aside)", () => {
    const r = result({ text: "Hi", reasoning: "t" });
    const frames = run([start(), thought("t"), text("Hi"), { type: "done", result: r }], true);
    const streamed = frames.at(-1)!.data.response;
    const plain = JSON.parse(JSON.stringify(encodeResponse(r, envelope(true))));
    const withoutIds = (o: any) => JSON.parse(JSON.stringify(o).replace(/"(rs|msg|fc)_[A-Za-z0-9]+"/g, '"ID"'));
    expect(withoutIds(streamed)).toEqual(withoutIds(plain));
  });
});
