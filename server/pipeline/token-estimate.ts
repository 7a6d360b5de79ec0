// The spec's token-count heuristic (count_tokens): about one token per four characters of what the model
// reads. No tokenizer is involved, so it works with no model loaded and is the same for every model.
import type { CanonicalMessage, ToolDefinition } from "../core/inference.js";

/** Unicode code points, so an emoji or a CJK character counts once. */
function characters(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/**
 * ceil(characters / 4) over: every text part (files already turned into the text the model gets), each
 * earlier tool call's name and arguments JSON, and each tool's name, description and JSON schema text.
 */
export function estimateTokens(messages: CanonicalMessage[], tools: ToolDefinition[]): number {
  let chars = 0;
  for (const message of messages) {
    for (const part of message.content) if (part.type === "text") chars += characters(part.text);
    if (message.role === "assistant") for (const call of message.toolCalls ?? []) chars += characters(call.name) + characters(call.arguments);
  }
  for (const tool of tools) chars += characters(tool.name) + characters(tool.description ?? "") + characters(JSON.stringify(tool.parameters));
  return Math.ceil(chars / 4);
}

/**
 * UTF-16 length of the message text every chat template renders (system, user and tool text, the
 * assistant's answers; not earlier reasoning, which templates may drop, nor tool-call arguments, which
 * they may re-serialise shorter). O(messages): string lengths only, no pass over the text.
 */
export function renderedTextLength(messages: CanonicalMessage[]): number {
  let length = 0;
  for (const message of messages) for (const part of message.content) if (part.type === "text") length += part.text.length;
  return length;
}

/** Images are estimated as the encoder would see them scaled to fit this side and this many pixels. */
const IMAGE_ESTIMATE_SIDE = 1568;
const IMAGE_ESTIMATE_PIXELS = 1_150_000;
/** Pixels per token in the estimate (Anthropic's published rule of thumb for its own models). */
const PIXELS_PER_IMAGE_TOKEN = 750;

/**
 * count_tokens' estimate for one image a vision model sees (docs/api.md, "Images"): scaled to fit 1568 pixels
 * on its longer side and 1.15 megapixels, then width × height / 750, rounded up; at most about 1,540. The
 * run's usage has the exact count, which depends on the projector (256 for any Gemma 3 image).
 */
export function estimateImageTokens(width: number, height: number): number {
  if (width <= 0 || height <= 0) return 0;
  const scale = Math.min(1, IMAGE_ESTIMATE_SIDE / Math.max(width, height), Math.sqrt(IMAGE_ESTIMATE_PIXELS / (width * height)));
  return Math.ceil((Math.round(width * scale) * Math.round(height * scale)) / PIXELS_PER_IMAGE_TOKEN);
}
