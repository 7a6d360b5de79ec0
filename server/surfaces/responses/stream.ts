// Canonical events → Responses SSE events. A small pure state machine: push(event) → frames.
//
// Order (what the openai SDK's stream helper needs): response.created (status in_progress, output []),
// response.in_progress, then per output item: output_item.added with the item empty, its parts and
// deltas, their .done events with the full text, output_item.done; finally response.completed (or
// response.incomplete when max_output_tokens ran out) carrying the full object. Every event has a
// sequence_number and an `event:` line; only types in the SDK's union are sent, and no [DONE].
import type { AppError } from "../../core/errors.js";
import type { InferenceEvent, InferenceResult, Mode, TokenLogprob } from "../../core/inference.js";
import { withWireParam } from "../../http/errors.js";
import { encodeOpenAIError } from "../../http/openai-errors.js";
import { RESPONSES_PARAMS } from "./params.js";
import { compactionItem } from "./compaction.js";
import {
  compactionSummaryOf,
  encodeFunctionCallItem,
  encodeLogprobEntries,
  encodeOutputText,
  encodeResponse,
  encodeResponseObject,
  newFunctionCallId,
  newMessageId,
  newReasoningId,
  statusOf,
  type FunctionCallItem,
  type MessageItem,
  type OutputItem,
  type OutputText,
  type ReasoningItem,
  type ResponsesEnvelope,
} from "./encode.js";

/** An item still being streamed, and its output_index. */
interface Open<T extends OutputItem> {
  item: T;
  index: number;
}

export class ResponsesStreamEncoder {
  private sequence = 0;
  private mode: Mode = "thinking";
  private started = false;
  private finished = false;
  /** Everything announced so far, in output order (response.failed reports these). */
  private readonly items: OutputItem[] = [];
  private reasoning: Open<ReasoningItem> | null = null;
  private message: Open<MessageItem> | null = null;
  private readonly calls = new Map<number, Open<FunctionCallItem>>();
  private reasoningId: string | undefined;
  private messageId: string | undefined;
  private readonly callIds = new Map<string, string>();

  constructor(private readonly envelope: ResponsesEnvelope) {}

  push(event: InferenceEvent): string[] {
    if (this.envelope.echo.compaction) return this.pushCompaction(event);
    switch (event.type) {
      case "start":
        this.mode = event.mode;
        return this.begin();
      case "reasoning.delta":
        // Without the key's trace flag the thought is not shown at all (usage still counts it).
        if (!this.envelope.trace) return [];
        return [...this.openReasoning(), this.reasoningDelta(event.text)];
      case "text.delta":
        return [...this.closeReasoning(), ...this.openMessage(), this.textDelta(event.text, event.logprobs)];
      case "tool_call.start":
        return [...this.closeReasoning(), ...this.closeMessage("completed"), ...this.openCall(event.index, event.id, event.name)];
      case "tool_call.delta": {
        const call = this.calls.get(event.index);
        if (!call) return [];
        call.item.arguments += event.argumentsDelta;
        return [this.frame("response.function_call_arguments.delta", { item_id: call.item.id, output_index: call.index, delta: event.argumentsDelta })];
      }
      case "tool_call.end": {
        const call = this.calls.get(event.index);
        if (!call) return [];
        call.item.arguments = event.arguments;
        return this.closeCall(event.index, "completed");
      }
      case "done":
        return this.finish(event.result);
    }
  }

  /**
   * A compaction request: nothing of the summary is streamed; one compaction item holding it comes at the
   * end (what Codex's remote compaction reads), then response.completed.
   */
  private pushCompaction(event: InferenceEvent): string[] {
    if (event.type === "start") {
      this.mode = event.mode;
      return this.begin();
    }
    if (event.type !== "done") return [];
    this.finished = true;
    this.mode = event.result.mode;
    const item = compactionItem(compactionSummaryOf(event.result));
    const index = this.add(item);
    const response = encodeResponse(event.result, this.envelope, { compaction: item.id });
    return [
      this.frame("response.output_item.added", { output_index: index, item }),
      this.frame("response.output_item.done", { output_index: index, item }),
      this.frame("response.completed", { response }),
    ];
  }

  /** An error after the stream began: response.failed with status failed and error {code, message}. */
  error(err: AppError): string[] {
    if (this.finished) return [];
    this.finished = true;
    const { code, message } = encodeOpenAIError(withWireParam(err, RESPONSES_PARAMS)).error;
    const frames = this.started ? [] : this.begin();
    const output = this.items.map((item) => ("status" in item && item.status === "in_progress" ? { ...item, status: "incomplete" as const } : item));
    return [
      ...frames,
      this.frame("response.failed", {
        response: encodeResponseObject({ status: "failed", mode: this.mode, output, error: { code: code ?? "server_error", message } }, this.envelope),
      }),
    ];
  }

  get isFinished(): boolean {
    return this.finished;
  }

  private begin(): string[] {
    this.started = true;
    const snapshot = () => encodeResponseObject({ status: "in_progress", mode: this.mode, output: [] }, this.envelope);
    return [this.frame("response.created", { response: snapshot() }), this.frame("response.in_progress", { response: snapshot() })];
  }

  private finish(result: InferenceResult): string[] {
    this.finished = true;
    this.mode = result.mode;
    const status = statusOf(result);
    const frames = [...this.closeReasoning()];
    frames.push(...this.closeMessage(status));
    // A call cut off by max_output_tokens: end it as incomplete (the final output has it as incomplete too).
    for (const index of [...this.calls.keys()]) frames.push(...this.closeCall(index, "incomplete"));
    if (result.refusal !== undefined && this.messageId === undefined) frames.push(...this.refusalMessage(result.refusal, status));
    // The final output always has a message when there are no calls; announce it if no text came.
    else if (this.messageId === undefined && result.toolCalls.length === 0 && !result.incompleteToolCall)
      frames.push(...this.openMessage(), ...this.closeMessage(status));
    const response = encodeResponse(result, this.envelope, { reasoning: this.reasoningId, message: this.messageId, calls: this.callIds });
    frames.push(this.frame(status === "completed" ? "response.completed" : "response.incomplete", { response }));
    return frames;
  }

  /** Strict refusal mode: the held-back answer is replaced by a message whose one part is the refusal. */
  private refusalMessage(refusal: string, status: "completed" | "incomplete"): string[] {
    const item: MessageItem = { id: newMessageId(), type: "message", role: "assistant", status: "in_progress", content: [] };
    this.messageId = item.id;
    const index = this.add(item);
    const at = { item_id: item.id, output_index: index, content_index: 0 };
    const frames = [
      this.frame("response.output_item.added", { output_index: index, item: structuredClone(item) }),
      this.frame("response.content_part.added", { ...at, part: { type: "refusal", refusal: "" } }),
      this.frame("response.refusal.delta", { ...at, delta: refusal }),
      this.frame("response.refusal.done", { ...at, refusal }),
      this.frame("response.content_part.done", { ...at, part: { type: "refusal", refusal } }),
    ];
    item.content.push({ type: "refusal", refusal });
    item.status = status;
    frames.push(this.frame("response.output_item.done", { output_index: index, item: structuredClone(item) }));
    return frames;
  }

  private openReasoning(): string[] {
    if (this.reasoning) return [];
    const item: ReasoningItem = { id: newReasoningId(), type: "reasoning", summary: [] };
    this.reasoningId = item.id;
    this.reasoning = { item, index: this.add(item) };
    const part = { type: "summary_text" as const, text: "" };
    item.summary.push(part);
    return [
      this.frame("response.output_item.added", { output_index: this.reasoning.index, item: { ...item, summary: [] } }),
      this.frame("response.reasoning_summary_part.added", { item_id: item.id, output_index: this.reasoning.index, summary_index: 0, part: { ...part } }),
    ];
  }

  private reasoningDelta(text: string): string {
    const { item, index } = this.reasoning!;
    item.summary[0]!.text += text;
    return this.frame("response.reasoning_summary_text.delta", { item_id: item.id, output_index: index, summary_index: 0, delta: text });
  }

  private closeReasoning(): string[] {
    if (!this.reasoning) return [];
    const { item, index } = this.reasoning;
    this.reasoning = null;
    const part = item.summary[0]!;
    return [
      this.frame("response.reasoning_summary_text.done", { item_id: item.id, output_index: index, summary_index: 0, text: part.text }),
      this.frame("response.reasoning_summary_part.done", { item_id: item.id, output_index: index, summary_index: 0, part: { ...part } }),
      this.frame("response.output_item.done", { output_index: index, item: structuredClone(item) }),
    ];
  }

  private openMessage(): string[] {
    if (this.message) return [];
    const item: MessageItem = { id: newMessageId(), type: "message", role: "assistant", status: "in_progress", content: [] };
    this.messageId = item.id;
    this.message = { item, index: this.add(item) };
    const frames = [
      this.frame("response.output_item.added", { output_index: this.message.index, item: structuredClone(item) }),
      this.frame("response.content_part.added", { item_id: item.id, output_index: this.message.index, content_index: 0, part: encodeOutputText("") }),
    ];
    item.content.push(encodeOutputText(""));
    return frames;
  }

  private textDelta(text: string, tokens: TokenLogprob[] = []): string {
    const { item, index } = this.message!;
    const part = item.content[0] as OutputText;
    part.text += text;
    const logprobs = encodeLogprobEntries(tokens);
    part.logprobs.push(...logprobs);
    return this.frame("response.output_text.delta", { item_id: item.id, output_index: index, content_index: 0, delta: text, logprobs });
  }

  private closeMessage(status: "completed" | "incomplete"): string[] {
    if (!this.message) return [];
    const { item, index } = this.message;
    this.message = null;
    item.status = status;
    const part = item.content[0] as OutputText;
    return [
      this.frame("response.output_text.done", { item_id: item.id, output_index: index, content_index: 0, text: part.text, logprobs: part.logprobs }),
      this.frame("response.content_part.done", { item_id: item.id, output_index: index, content_index: 0, part: structuredClone(part) }),
      this.frame("response.output_item.done", { output_index: index, item: structuredClone(item) }),
    ];
  }

  private openCall(engineIndex: number, callId: string, name: string): string[] {
    const item = encodeFunctionCallItem(newFunctionCallId(), { id: callId, name, arguments: "" }, "in_progress", this.envelope.echo.namespaced);
    this.callIds.set(callId, item.id);
    const open = { item, index: this.add(item) };
    this.calls.set(engineIndex, open);
    return [this.frame("response.output_item.added", { output_index: open.index, item: structuredClone(item) })];
  }

  private closeCall(engineIndex: number, status: "completed" | "incomplete"): string[] {
    const call = this.calls.get(engineIndex);
    if (!call) return [];
    this.calls.delete(engineIndex);
    const { item, index } = call;
    item.status = status;
    return [
      this.frame("response.function_call_arguments.done", { item_id: item.id, output_index: index, name: item.name, arguments: item.arguments }),
      this.frame("response.output_item.done", { output_index: index, item: structuredClone(item) }),
    ];
  }

  private add(item: OutputItem): number {
    this.items.push(item);
    return this.items.length - 1;
  }

  private frame(type: string, payload: Record<string, unknown>): string {
    const data = { type, sequence_number: this.sequence++, ...payload };
    return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
  }
}
