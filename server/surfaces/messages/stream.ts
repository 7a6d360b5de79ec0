// Canonical events → the Messages SSE event graph. A small pure state machine: push(event) → frames.
//
//   message_start, ping
//   (content_block_start, content_block_delta*, content_block_stop)*   one block per index: thinking
//                                                                       (deltas, then one signature_delta),
//                                                                       text, tool_use (input_json_delta)
//   message_delta (stop_reason, stop_sequence, usage), message_stop
//
// Every frame has an `event:` line: the Anthropic SDK drops frames without one.
import type { AppError } from "../../core/errors.js";
import type { InferenceEvent } from "../../core/inference.js";
import { encodeAnthropicError } from "../../http/anthropic-errors.js";
import { withWireParam } from "../../http/errors.js";
import { MESSAGES_PARAMS } from "./params.js";
import {
  encodeMessagesFinalUsage,
  encodeMessagesUsage,
  stopReasonOf,
  thinkingSignature,
  toolUseId,
  type MessagesEnvelope,
} from "./encode.js";

const frame = (data: { type: string; [field: string]: unknown }) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;

type OpenBlock =
  | { kind: "thinking"; index: number; text: string }
  | { kind: "text"; index: number }
  | { kind: "tool_use"; index: number; call: number; sent: string };

export class MessagesStreamEncoder {
  private block: OpenBlock | null = null;
  private blocks = 0;
  private finished = false;

  constructor(
    private readonly envelope: MessagesEnvelope,
    private readonly requestId: string,
  ) {}

  push(event: InferenceEvent): string[] {
    switch (event.type) {
      case "start":
        return [
          frame({
            type: "message_start",
            message: {
              id: this.envelope.id,
              type: "message",
              role: "assistant",
              model: this.envelope.model,
              content: [],
              stop_reason: null,
              stop_sequence: null,
              stop_details: null,
              container: null,
              usage: {
                ...encodeMessagesUsage({
                  promptTokens: event.promptTokens,
                  cachedTokens: event.cachedTokens,
                  cacheWriteTokens: event.cacheWriteTokens ?? 0,
                }),
                output_tokens: 0,
                service_tier: "standard",
              },
            },
          }),
          frame({ type: "ping" }),
        ];
      case "reasoning.delta": {
        const out = this.block?.kind === "thinking" ? [] : this.open({ kind: "thinking", text: "" });
        const block = this.block as Extract<OpenBlock, { kind: "thinking" }>;
        block.text += event.text;
        if (this.envelope.thinkingDisplay === "omitted") return out;
        return [...out, this.delta({ type: "thinking_delta", thinking: event.text })];
      }
      case "text.delta": {
        const out = this.block?.kind === "text" ? [] : this.open({ kind: "text" });
        return [...out, this.delta({ type: "text_delta", text: event.text })];
      }
      case "tool_call.start":
        return this.open({ kind: "tool_use", call: event.index, sent: "" }, { id: toolUseId(event.id), name: event.name });
      case "tool_call.delta": {
        const block = this.block;
        if (block?.kind !== "tool_use" || block.call !== event.index) return [];
        block.sent += event.argumentsDelta;
        return [this.delta({ type: "input_json_delta", partial_json: event.argumentsDelta })];
      }
      case "tool_call.end": {
        const block = this.block;
        if (block?.kind !== "tool_use" || block.call !== event.index) return [];
        // Arguments that arrived without deltas (e.g. an empty call written as {}) still reach the client.
        const rest = block.sent.trim() === "" && event.arguments.trim() !== "{}" ? [this.delta({ type: "input_json_delta", partial_json: event.arguments })] : [];
        return [...rest, ...this.close()];
      }
      case "done": {
        this.finished = true;
        const result = event.result;
        const usage = encodeMessagesFinalUsage(result);
        return [
          ...this.close(),
          frame({
            type: "message_delta",
            delta: { stop_reason: stopReasonOf(result.stopReason, result.refusal !== undefined), stop_sequence: result.stopSequence, stop_details: null },
            usage: {
              input_tokens: usage.input_tokens,
              output_tokens: usage.output_tokens,
              cache_creation_input_tokens: usage.cache_creation_input_tokens,
              cache_read_input_tokens: usage.cache_read_input_tokens,
              output_tokens_details: usage.output_tokens_details,
              server_tool_use: null,
            },
          }),
          frame({ type: "message_stop" }),
        ];
      }
    }
  }

  /** An error after the stream began: one `error` event; the stream then ends without message_stop. */
  error(err: AppError): string[] {
    this.finished = true;
    const { type, error } = encodeAnthropicError(withWireParam(err, MESSAGES_PARAMS), this.requestId);
    return [frame({ type, error, request_id: this.requestId })];
  }

  get isFinished(): boolean {
    return this.finished;
  }

  private open(block: { kind: "thinking"; text: string } | { kind: "text" } | { kind: "tool_use"; call: number; sent: string }, tool?: { id: string; name: string }): string[] {
    const out = this.close();
    const index = this.blocks++;
    this.block = { ...block, index } as OpenBlock;
    let contentBlock: Record<string, unknown>;
    if (block.kind === "thinking") contentBlock = { type: "thinking", thinking: "", signature: "" };
    else if (block.kind === "text") contentBlock = { type: "text", text: "" }; // no citations key, as in encode.ts
    else contentBlock = { type: "tool_use", id: tool!.id, name: tool!.name, input: {}, caller: { type: "direct" } };
    out.push(frame({ type: "content_block_start", index, content_block: contentBlock }));
    return out;
  }

  private close(): string[] {
    const block = this.block;
    if (!block) return [];
    this.block = null;
    const out: string[] = [];
    if (block.kind === "thinking") out.push(this.delta({ type: "signature_delta", signature: thinkingSignature(block.text) }, block.index));
    out.push(frame({ type: "content_block_stop", index: block.index }));
    return out;
  }

  private delta(delta: Record<string, unknown>, index = this.block!.index): string {
    return frame({ type: "content_block_delta", index, delta });
  }
}
