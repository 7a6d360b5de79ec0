// Runs one inference for any caller (the three HTTP surfaces, batches, agent runs): policy, content
// resolution, the engine call, and the result's derived fields. Surfaces only translate.
import { randomInt } from "node:crypto";
import { AppError, invalidRequest } from "../core/errors.js";
import { readAhead } from "../core/read-ahead.js";
import type {
  CanonicalMessage,
  ContentPart,
  InferenceEvent,
  InferenceRequest,
  InferenceResult,
  ToolDefinition,
  Trace,
} from "../core/inference.js";
import type { EngineHost } from "../engine/engine-host.js";
import type { CacheBreakpoint, EngineOutcome, EngineRequest } from "../engine/types.js";
import { formatFileText, sharedIngest, type Extracted, type Ingest } from "../ingest/ingest.js";
import { assessComplexity } from "./complexity.js";
import { estimateTokens } from "./token-estimate.js";

/** A started run: `start` has been received, so failures from here on belong in the stream. */
export interface InferenceStream extends AsyncIterable<InferenceEvent> {
  readonly first: Extract<InferenceEvent, { type: "start" }>;
}

/** Sampling when a request sets none: moderate, because small local models ramble at temperature 1. */
export const DEFAULT_SAMPLING = { temperature: 0.7, topP: 0.95, topK: 40 } as const;

const STRICT_REFUSAL_INSTRUCTION =
  "Refusal policy (strict): if a request is unsafe, asks for something you cannot do reliably, or you are not " +
  "sure of the answer, refuse briefly and say why instead of guessing.";

/** Uploaded files by id, for the caller's account (the Files feature implements it). */
export interface FileResolver {
  /** The extracted content of the caller's file; throws 404 naming the id for a missing or foreign file. */
  contentOf(fileId: string, accountId: string | undefined, param: string): Promise<{ extracted: Extracted; filename: string }>;
}

export interface PipelineOptions {
  files?: FileResolver;
  ingest?: Ingest;
}

/** Who is asking: uploaded files are resolved within the caller's account. */
export interface CallerContext {
  accountId?: string;
}

export class InferencePipeline {
  private readonly content: ContentResolver;

  constructor(
    private readonly host: EngineHost,
    options: PipelineOptions = {},
  ) {
    this.content = { ingest: options.ingest ?? sharedIngest(), files: options.files };
  }

  /**
   * Starts a run and waits for its first event, so that errors before generation (no model, prompt too
   * long, bad schema) reach the caller as exceptions, before any response byte is sent.
   */
  async open(request: InferenceRequest, signal: AbortSignal, caller: CallerContext = {}): Promise<InferenceStream> {
    const engine = this.host.engine();
    const engineRequest = toEngineRequest({ ...request, messages: await resolveContent(request.messages, this.content, caller) });
    const events = engine.generate(engineRequest, signal);
    const first = await events.next();
    if (first.done || first.value.type !== "start") {
      if (signal.aborted) throw new AppError("invalid_request", "The request was cancelled.", { code: "cancelled" });
      throw new AppError("internal", "The engine ended without starting a generation.");
    }
    const start = first.value;
    // The engine generates ahead while the caller encodes and writes what it already has.
    const ahead = readAhead(events);
    return {
      first: start,
      async *[Symbol.asyncIterator]() {
        yield start;
        for await (const event of ahead) {
          if (event.type === "done") yield { type: "done", result: finishResult(request, event.outcome) };
          else yield event;
        }
      },
    };
  }

  /** Runs to the end and returns the result (non-streaming callers). */
  async complete(request: InferenceRequest, signal: AbortSignal, caller: CallerContext = {}): Promise<InferenceResult> {
    const stream = await this.open(request, signal, caller);
    for await (const event of stream) if (event.type === "done") return event.result;
    throw new AppError("internal", "The generation ended without a result.");
  }

  async countPromptTokens(request: InferenceRequest, caller: CallerContext = {}): Promise<number> {
    const engine = this.host.engine();
    return engine.countPromptTokens(toEngineRequest({ ...request, messages: await resolveContent(request.messages, this.content, caller) }));
  }

  /** count_tokens: the spec's heuristic over what the model would read; no engine, so no model is needed. */
  async estimateInputTokens(request: InferenceRequest, caller: CallerContext = {}): Promise<number> {
    return estimateTokens(await resolveContent(request.messages, this.content, caller), request.tools);
  }
}

/** Spec: at most 4 cache breakpoints are kept; the first 4 in request order (tools, then messages). */
export const MAX_CACHE_BREAKPOINTS = 4;

export function collectCacheBreakpoints(messages: CanonicalMessage[], tools: ToolDefinition[]): CacheBreakpoint[] {
  const found: CacheBreakpoint[] = [];
  tools.forEach((tool, i) => {
    if (tool.cacheBreakpoint) found.push({ kind: "tool", tool: i });
  });
  messages.forEach((message, i) => {
    message.content.forEach((part, j) => {
      if (part.cacheBreakpoint) found.push({ kind: "content", message: i, part: j });
    });
    if (message.role === "assistant")
      (message.toolCalls ?? []).forEach((call, k) => {
        if (call.cacheBreakpoint) found.push({ kind: "tool_call", message: i, call: k });
      });
  });
  return found.slice(0, MAX_CACHE_BREAKPOINTS);
}

export function toEngineRequest(request: InferenceRequest): EngineRequest {
  const messages = applyRefusalMode(request.messages, request);
  const cacheBreakpoints = collectCacheBreakpoints(messages, request.tools);
  return {
    messages,
    tools: request.tools,
    toolChoice: request.toolChoice,
    parallelToolCalls: request.parallelToolCalls ?? true,
    output: request.output,
    mode: request.reasoning.mode,
    reasoningBudget: request.reasoning.mode === "thinking" ? request.reasoning.budgetTokens : 0,
    maxTokens: request.maxTokens,
    stopSequences: request.stopSequences,
    sampling: {
      ...request.sampling,
      // node-llama-cpp's default seed is the current second, so unseeded requests in the same second would
      // sample alike; each gets its own random seed instead.
      seed: request.sampling.seed ?? randomInt(2 ** 32),
      temperature: request.sampling.temperature ?? DEFAULT_SAMPLING.temperature,
      topP: request.sampling.topP ?? DEFAULT_SAMPLING.topP,
      topK: request.sampling.topK ?? DEFAULT_SAMPLING.topK,
    },
    ...(cacheBreakpoints.length > 0 ? { cacheBreakpoints } : {}),
  };
}

export interface ContentResolver {
  ingest: Ingest;
  files?: FileResolver;
}

/**
 * File and image parts become model-ready text here (shared by every surface): uploaded files by id from
 * the caller's account, inline ones through the ingest worker. The model reads text, so an image becomes
 * what the vision path can honestly say about it (see server/ingest).
 */
export async function resolveContent(messages: CanonicalMessage[], resolver: ContentResolver, caller: CallerContext = {}): Promise<CanonicalMessage[]> {
  const out: CanonicalMessage[] = [];
  for (const [i, message] of messages.entries()) {
    if (!message.content.some((p) => p.type !== "text")) {
      out.push(message);
      continue;
    }
    const content: ContentPart[] = [];
    for (const [j, part] of message.content.entries()) {
      if (part.type === "text") {
        content.push(part);
        continue;
      }
      const param = part.param ?? `messages[${i}].content[${j}]`;
      const filename = part.type === "file" ? (part.filename ?? part.title) : undefined;
      let text: string;
      if (part.source.kind === "file_id") {
        if (!resolver.files)
          throw new AppError("not_found", `No file with id '${part.source.fileId}': this server has no Files API configured.`, { param, code: "file_not_found" });
        const { extracted, filename: stored } = await resolver.files.contentOf(part.source.fileId, caller.accountId, param);
        if (part.type === "image" && extracted.kind !== "image")
          throw invalidRequest(`The file '${part.source.fileId}' is not an image (${extracted.mediaType}); send it as a file part.`, param, "invalid_image");
        text = formatFileText(extracted, filename ?? stored);
      } else {
        const extracted = await resolver.ingest.inline({ source: part.source, filename, param, expect: part.type === "image" ? "image" : undefined });
        text = formatFileText(extracted, filename);
      }
      content.push({ type: "text", text, cacheBreakpoint: part.cacheBreakpoint });
    }
    out.push({ ...message, content } as CanonicalMessage);
  }
  return out;
}

function applyRefusalMode(messages: CanonicalMessage[], request: InferenceRequest): CanonicalMessage[] {
  if (request.refusalMode !== "strict") return messages;
  return [{ role: "system", content: [{ type: "text", text: STRICT_REFUSAL_INSTRUCTION }] }, ...messages];
}

function finishResult(request: InferenceRequest, outcome: EngineOutcome): InferenceResult {
  const result: InferenceResult = {
    mode: outcome.mode,
    text: outcome.text,
    reasoning: outcome.reasoning,
    toolCalls: outcome.toolCalls,
    stopReason: outcome.stopReason,
    stopSequence: outcome.stopSequence,
    usage: { ...outcome.usage, cacheWriteTokens: outcome.usage.cacheWriteTokens ?? 0 },
    complexity: assessComplexity(request, outcome),
  };
  if (request.glassbox) result.trace = buildTrace(request, outcome);
  return result;
}

function buildTrace(request: InferenceRequest, outcome: EngineOutcome): Trace {
  return {
    confidence: null,
    mode: outcome.mode,
    effort: request.reasoning.effort,
    reasoning_budget: outcome.mode === "thinking" ? request.reasoning.budgetTokens : 0,
    reasoning_tokens: outcome.usage.reasoningTokens,
    cached_tokens: outcome.usage.cachedTokens,
    stop_reason: outcome.stopReason,
    threshold: request.glassbox?.threshold ?? null,
    abstain_below: request.glassbox?.abstainBelow ?? null,
  };
}
