// The prompt of a request with images, as the vision process reads it: OUR chat wrapper renders the
// conversation (tools and earlier calls included, as for text) with each image as llama.node's media marker
// in its place, special tokens written out as the text its tokenizer reads back into them.
import { LlamaText, SpecialToken, SpecialTokensText, type ChatWrapper, type LlamaModel } from "node-llama-cpp";
import { invalidRequest } from "../../core/errors.js";
import type { CanonicalMessage, ContentPart } from "../../core/inference.js";
import { renderPromptText } from "../prompt.js";
import type { EngineRequest } from "../types.js";
import { VISION_MEDIA_MARKER } from "./vision-protocol.js";

/** Does the request carry an image for the model to see (an image part the pipeline kept as bytes)? */
export function hasImages(request: Pick<EngineRequest, "messages">): boolean {
  return request.messages.some((m) => m.content.some((p) => p.type === "image"));
}

/** Where image k stands in the rendered prompt, until it becomes the media marker. */
const placeholder = (k: number) => `\u{F8FF}svc-image-${k}\u{F8FF}`;
const PLACEHOLDER = /\u{F8FF}svc-image-(\d+)\u{F8FF}/gu;

export interface VisionPrompt {
  prompt: string;
  /** The images as data: URLs, in the order their markers appear in the prompt. */
  media: string[];
}

/** The prompt text our wrapper renders, special tokens written out, each image as VISION_MEDIA_MARKER. */
export function renderVisionPrompt(model: LlamaModel, wrapper: ChatWrapper, request: EngineRequest): VisionPrompt {
  const images: string[] = [];
  const messages = request.messages.map((message, i): CanonicalMessage => {
    if (!message.content.some((p) => p.type === "image")) return message;
    const content = message.content.map((part, j): ContentPart => {
      if (part.type !== "image") return part;
      if (part.source.kind !== "base64") throw invalidRequest("An image reached the model unread.", part.param ?? `messages[${i}].content[${j}]`, "invalid_image");
      images.push(`data:${part.source.mediaType};base64,${part.source.data}`);
      return { type: "text", text: placeholder(images.length - 1) };
    });
    return { ...message, content } as CanonicalMessage;
  });
  const text = renderPromptText(wrapper, messages, request.tools);
  // A marker the caller wrote in its own text is not an image: defused before ours go in.
  const written = llamaTextString(model, text).split(VISION_MEDIA_MARKER).join("<__media_>");
  const media: string[] = [];
  const prompt = written.replace(PLACEHOLDER, (_, k: string) => {
    media.push(images[Number(k)]!);
    return VISION_MEDIA_MARKER;
  });
  return { prompt, media };
}

/** LlamaText as the text a tokenizer that parses special tokens reads back into the same tokens. */
function llamaTextString(model: LlamaModel, text: LlamaText): string {
  return text.values
    .map((value) => {
      if (typeof value === "string") return value;
      if (value instanceof SpecialTokensText) return value.value;
      if (value instanceof SpecialToken) return model.detokenize(value.tokenize(model.tokenizer), true);
      return String(value);
    })
    .join("");
}
