// Canonical events → chat.completion.chunk SSE frames. A small pure state machine: push(event) → frames.
import type { AppError } from "../../core/errors.js";
import type { InferenceEvent, Mode } from "../../core/inference.js";
import { modelIdOfMode } from "../../core/inference.js";
import { withWireParam } from "../../http/errors.js";
import { encodeOpenAIError } from "../../http/openai-errors.js";
import { CHAT_PARAMS } from "./params.js";
import { encodeChatUsage, encodeExtensions, encodeLogprobs, finishReasonOf, type ChatEnvelope } from "./encode.js";

const frame = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;

export class ChatStreamEncoder {
  private mode: Mode = "thinking";
  private started = false;
  private finished = false;

  constructor(private readonly envelope: ChatEnvelope) {}

  push(event: InferenceEvent): string[] {
    switch (event.type) {
      case "start":
        this.mode = event.mode;
        this.started = true;
        return [this.chunk({ role: "assistant", content: null })];
      case "reasoning.delta":
        return [this.chunk({ reasoning_content: event.text })];
      case "text.delta":
        return [this.chunk({ content: event.text }, null, event.logprobs ? encodeLogprobs(event.logprobs) : null)];
      case "tool_call.start":
        return [
          this.chunk({
            tool_calls: [{ index: event.index, id: event.id, type: "function", function: { name: event.name, arguments: "" } }],
          }),
        ];
      case "tool_call.delta":
        return [this.chunk({ tool_calls: [{ index: event.index, function: { arguments: event.argumentsDelta } }] })];
      case "tool_call.end":
        return [];
      case "done": {
        this.finished = true;
        const result = event.result;
        this.mode = result.mode;
        return [
          // Strict refusal mode: the answer was held back and is replaced by the refusal.
          ...(result.refusal !== undefined ? [this.chunk({ refusal: result.refusal })] : []),
          this.chunk({}, finishReasonOf(result.stopReason)),
          frame({
            ...this.head(),
            choices: [],
            usage: encodeChatUsage(result),
            ...encodeExtensions(result, this.envelope),
          }),
          "data: [DONE]\n\n",
        ];
      }
    }
  }

  /** An error after the first byte: one error frame; the stream then ends. */
  error(err: AppError): string[] {
    this.finished = true;
    return [frame(encodeOpenAIError(withWireParam(err, CHAT_PARAMS)))];
  }

  get isFinished(): boolean {
    return this.finished;
  }

  get hasStarted(): boolean {
    return this.started;
  }

  private head() {
    return {
      id: this.envelope.id,
      object: "chat.completion.chunk" as const,
      created: this.envelope.created,
      model: modelIdOfMode(this.mode),
      ...(this.envelope.sessionId !== undefined ? { session_id: this.envelope.sessionId } : {}),
    };
  }

  private chunk(delta: Record<string, unknown>, finishReason: string | null = null, logprobs: unknown = null): string {
    return frame({ ...this.head(), choices: [{ index: 0, delta, finish_reason: finishReason, logprobs }] });
  }
}
