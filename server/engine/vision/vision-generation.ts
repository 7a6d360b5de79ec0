// A request that carries images, generated on the vision engine: OUR chat wrapper renders the prompt (the
// images as markers, in place), the vision process reads it with the images and samples the answer, and the
// text it streams back is split here into reasoning and answer, with stop sequences matched on the visible
// answer only, as runGeneration does for text (the same TextTriggerMatcher). The reasoning budget and the
// answer's grammar work as there, in segments: a completion stops where the thought must close (its marker
// then follows it in the next one's prompt) or where the answer starts (written again under the grammar);
// llama.node's KV cache serves the repeated prefix. What the vision path does not do (docs/api.md,
// "Images"): tool calls (a request offering callable tools with an image is a 400) and per-token
// probabilities (glassbox confidence is null).
import { LlamaText, SpecialToken, SpecialTokensText, type ChatWrapper, type LlamaModel } from "node-llama-cpp";
import { AppError, invalidRequest } from "../../core/errors.js";
import type { CanonicalMessage, ContentPart } from "../../core/inference.js";
import { renderPromptText, type PromptSyntax } from "../prompt.js";
import { TextTriggerMatcher } from "../text-matcher.js";
import type { EngineEvent, EngineOutcome, EngineRequest } from "../types.js";
import { VisionPromptTooLong, type VisionEngine } from "./vision-engine.js";
import { VISION_MEDIA_MARKER, type VisionResult } from "./vision-protocol.js";

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

export interface VisionGenerationSetup {
  model: LlamaModel;
  wrapper: ChatWrapper;
  syntax: PromptSyntax;
  vision: VisionEngine;
  request: EngineRequest;
  contextSize: number;
  /** Room the context keeps free past the answer (forced markers). */
  margin: number;
  tooLong: (promptTokens: number) => AppError;
  /** GBNF the answer must follow (json_object / json_schema output). */
  answerGrammar?: string;
  signal: AbortSignal;
}

/** Exact prompt tokens of a request with images: the text's, and each image's share from its encoder. */
export async function countVisionTokens(setup: Pick<VisionGenerationSetup, "model" | "wrapper" | "vision" | "request">): Promise<number> {
  const { prompt, media } = renderVisionPrompt(setup.model, setup.wrapper, setup.request);
  return (await setup.vision.tokenize(prompt, media)).tokens;
}

export async function* runVisionGeneration(setup: VisionGenerationSetup): AsyncGenerator<EngineEvent, void, void> {
  const { request, syntax, signal } = setup;
  if (request.tools.length > 0 && request.toolChoice.type !== "none")
    throw invalidRequest(
      "Tool calls are not available in a turn that shows the model an image yet: send tool_choice none (or no tools) with images, or the image in another turn.",
      "tools",
      "vision_tools_unsupported",
    );
  const rendered = renderVisionPrompt(setup.model, setup.wrapper, request);
  const media = rendered.media;
  // Fast mode: the answer starts after an empty thought, closed, as non-thinking templates write it (Qwen3's),
  // unless the wrapper wrote one already: llama.node cannot ban the thought's opening token.
  const fastOpen = request.mode === "fast" ? syntax.thought : null;
  const prompt =
    fastOpen && !rendered.prompt.trimEnd().endsWith(fastOpen.close) ? `${rendered.prompt}${fastOpen.open}\n\n${fastOpen.close}\n\n` : rendered.prompt;
  // The prompt is read once, in the vision process: it checks the room, counts the images and says so first.
  const contextLimit = setup.contextSize - setup.margin;
  let maxTokens = Math.min(request.maxTokens ?? contextLimit, contextLimit);
  let imageTokens = 0;
  if (signal.aborted) return;

  const thought = request.mode === "thinking" ? syntax.thought : null;
  // Fast mode: llama.node has no token bans (it reads no logit_bias), so a thought the model opens anyway is
  // skipped: the completion stops, and the next one starts after an empty thought, closed.
  const fastThought = request.mode === "fast" ? syntax.thought : null;
  // The reasoning budget closes the thought with the model's own marker, as runGeneration does: the
  // completion stops there and a second one continues after the marker (its prefix comes from the KV cache).
  let reasoningBudget = thought ? Math.max(0, Math.min(request.reasoningBudget, maxTokens - 1)) : 0;
  const grammar = setup.answerGrammar;

  const answerMatcher = new TextTriggerMatcher(request.stopSequences.map((s) => ({ kind: "stop" as const, text: s })));
  const closeMatcher = thought ? new TextTriggerMatcher([{ kind: "close" as const, text: thought.close }]) : null;
  /** Leading output not yet known to open a thought or not. */
  let lead = "";
  let phase: "lead" | "reasoning" | "answer" = thought || fastThought ? "lead" : "answer";
  let reasoning = "";
  let text = "";
  let reasoningTokens = 0;
  let leadTokens = 0;
  let stopSequence: string | null = null;
  let started = false;
  const events: EngineEvent[] = [];
  /** What this segment's completion should end for: a stop sequence, or the next segment. */
  let stop = new AbortController();
  const onAbort = () => stop.abort();
  signal.addEventListener("abort", onAbort, { once: true });
  /** Set when the segment is stopped to go on differently: after the close marker, or afresh under the grammar. */
  let next: "close" | "grammar" | "skip" | null = null;

  const answer = (piece: string) => {
    if (stopSequence !== null || piece === "") return;
    const match = request.stopSequences.length > 0 ? answerMatcher.push(piece) : { emit: piece, hit: null };
    let emit = match.emit;
    if (text === "") emit = emit.replace(/^\s+/, "");
    if (emit) {
      text += emit;
      events.push({ type: "text.delta", text: emit });
    }
    if (match.hit) {
      stopSequence = match.hit.trigger;
      stop.abort();
    }
  };
  const think = (piece: string) => {
    const match = closeMatcher!.push(piece);
    let emit = match.emit;
    if (reasoning === "") emit = emit.replace(/^\s+/, "");
    if (emit) {
      reasoning += emit;
      events.push({ type: "reasoning.delta", text: emit });
    }
    if (match.hit) {
      phase = "answer";
      // The answer's grammar applies from here: the rest is written again under it.
      if (grammar !== undefined) {
        next = "grammar";
        stop.abort();
      } else answer(match.rest);
    }
  };

  try {
    /** The model's output so far as it wrote it (what a continuation's prompt repeats). */
    let written = "";
    let segmentPrompt = prompt;
    let completionTokens = 0;
    let first: VisionResult | null = null;
    let last: VisionResult | null = null;
    // At most three segments: the reasoning, and the answer after its close (under the grammar, if any).
    for (let segment = 0; segment < 3; segment++) {
      const left = maxTokens - completionTokens;
      const constrained = grammar !== undefined && (phase === "answer" || !thought);
      let result: VisionResult | null = null;
      /** This segment's streamed pieces taken as output (about one token each). */
      let kept = 0;
      for await (const step of setup.vision.complete(
        {
          prompt: segmentPrompt,
          media,
          maxTokens: left,
          contextLimit,
          temperature: request.sampling.temperature ?? 0.7,
          topP: request.sampling.topP ?? 0.95,
          topK: request.sampling.topK ?? 40,
          seed: request.sampling.seed ?? 0,
          frequencyPenalty: request.sampling.frequencyPenalty ?? 0,
          presencePenalty: request.sampling.presencePenalty ?? 0,
          ...(constrained ? { grammar } : {}),
        },
        stop.signal,
      )) {
        if ("prompt" in step) {
          if (!started) {
            // The room the context leaves bounds the answer (and the thought within it).
            maxTokens = Math.min(maxTokens, step.prompt.maxTokens);
            reasoningBudget = thought ? Math.max(0, Math.min(request.reasoningBudget, maxTokens - 1)) : 0;
            imageTokens = step.prompt.imageTokens.reduce((a, b) => a + b, 0);
            yield { type: "start", mode: request.mode, promptTokens: step.prompt.tokens, cachedTokens: step.prompt.cached };
          }
          started = true;
          continue;
        }
        if ("result" in step) {
          result = step.result;
          break;
        }
        // Tokens that arrive after this segment was stopped are not part of the output.
        if (stop.signal.aborted) continue;
        written += step.text;
        kept++;
        if (phase === "lead") {
          lead += step.text;
          leadTokens++;
          const opener = (thought ?? fastThought)!.open;
          const trimmed = lead.trimStart();
          if (trimmed.length >= opener.length || !opener.startsWith(trimmed)) {
            if (fastThought && trimmed.startsWith(opener)) {
              // Watched again in the next segment: a model that opens a thought after every newline would.
              lead = "";
              leadTokens = 0;
              next = "skip";
              stop.abort();
            } else if (trimmed.startsWith(opener)) {
              phase = "reasoning";
              reasoningTokens += leadTokens;
              think(trimmed.slice(thought!.open.length));
            } else if (grammar !== undefined) {
              // No thought: the answer starts now, under its grammar, written afresh.
              phase = "answer";
              written = "";
              next = "grammar";
              stop.abort();
            } else {
              phase = "answer";
              answer(lead);
            }
          }
        } else if (phase === "reasoning") {
          reasoningTokens++;
          think(step.text);
          if (phase === "reasoning" && reasoningTokens >= reasoningBudget) {
            next = "close";
            stop.abort();
          }
        } else answer(step.text);
        if (events.length > 0) yield* events.splice(0);
      }
      if (signal.aborted) return;
      if (!result) throw new AppError("unavailable", "The vision engine ended without a result.", { code: "vision_failed", retryAfter: 5 });
      first ??= result;
      last = result;
      const going = next;
      // Output is what was kept: a skipped thought, and a free-running answer written again under the
      // grammar, are not (the tokens the model wrote before the stop took effect are not either).
      completionTokens += going === "skip" ? 0 : going === "grammar" ? Math.min(kept, result.completionTokens) : going === "close" ? kept : result.completionTokens;
      next = null;
      if (going === null || stopSequence !== null) break;
      if (going === "close") {
        // The budget is spent: the thought ends with the model's own marker (counted as output).
        const held = closeMatcher!.flush();
        if (held) (reasoning += held), events.push({ type: "reasoning.delta", text: held });
        written += thought!.close;
        completionTokens += 1;
        phase = "answer";
      } else if (going === "skip") {
        // The thought the model opened ends at once: its marker and the close, nothing between.
        written = written.slice(0, written.lastIndexOf(fastThought!.open)) + fastThought!.open + fastThought!.close;
      } else if (going === "grammar") {
        // Written again under the grammar: the tokens of the free-running attempt after the thought are not output.
        const cut = thought ? written.lastIndexOf(thought.close) : -1;
        written = cut >= 0 ? written.slice(0, cut + thought!.close.length) : "";
      }
      if (maxTokens - completionTokens < 1) break;
      segmentPrompt = prompt + written;
      stop = new AbortController();
    }
    const result = last!;
    // Text held back as a possible stop sequence's start is answer text after all.
    if (phase === "lead") answer(lead);
    else if (phase === "reasoning") {
      const held = closeMatcher!.flush();
      if (held) (reasoning += held), events.push({ type: "reasoning.delta", text: held });
    }
    if (stopSequence === null) {
      const held = answerMatcher.flush();
      if (held) (text += held), events.push({ type: "text.delta", text: held });
    }
    if (!started) yield { type: "start", mode: request.mode, promptTokens: first!.promptTokens, cachedTokens: first!.promptTokens - first!.evaluatedTokens };
    yield* events.splice(0);
    const outcome: EngineOutcome = {
      mode: request.mode,
      text,
      reasoning,
      toolCalls: [],
      stopReason: stopSequence !== null ? "stop_sequence" : result.endOfTurn ? "end_turn" : "max_tokens",
      stopSequence,
      usage: {
        promptTokens: first!.promptTokens,
        cachedTokens: first!.promptTokens - first!.evaluatedTokens,
        completionTokens,
        reasoningTokens: Math.min(reasoningTokens, completionTokens),
      },
      vision: { images: media.length, imageTokens },
    };
    yield { type: "done", outcome };
  } catch (err) {
    if (err instanceof VisionPromptTooLong) throw setup.tooLong(err.promptTokens);
    throw err;
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}
