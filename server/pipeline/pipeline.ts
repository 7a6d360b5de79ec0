// Runs one inference for any caller (the three HTTP surfaces, batches, agent runs): schema checks, policy,
// content resolution, a ticket from the scheduler, the engine call, and the result's derived fields.
// Surfaces only translate.
import { randomInt } from "node:crypto";
import { AppError, invalidRequest } from "../core/errors.js";
import { readAhead } from "../core/read-ahead.js";
import type {
  CanonicalMessage,
  InferenceEvent,
  InferenceRequest,
  InferenceResult,
  ToolDefinition,
} from "../core/inference.js";
import type { EngineHost } from "../engine/engine-host.js";
import { UnsupportedSchemaError } from "../engine/json-schema-grammar.js";
import { sharedSchemaChecks, type SchemaChecks } from "./schema-checks.js";
import type { CacheBreakpoint, EngineEvent, EngineOutcome, EngineRequest, LoadedModelInfo } from "../engine/types.js";
import { sharedIngest, type Ingest } from "../ingest/ingest.js";
import { checkVisionLogprobs, countImages, imageInputFor, imageInputOf, resolveContent, type CallerContext, type ContentResolver, type FileResolver } from "./content.js";

export { countImages, imageInputFor, imageInputOf, resolveContent, type CallerContext, type ContentResolver, type FileResolver, type ImageInput } from "./content.js";
import { assessComplexity, planComplexity, type ComplexityPlan } from "./complexity.js";
import { buildTrace, holdsAnswerBack, judgeAnswer, wantsConfidence } from "./glassbox.js";
import { Scheduler, type Ticket, type WorkClass } from "./scheduler.js";
import { fitToContext, nameInputParam } from "./context-fit.js";
import { checkSchemaLimits } from "./schema-limits.js";
import { estimateImageTokens, estimateTokens, renderedTextLength } from "./token-estimate.js";
import { imageSize } from "../ingest/vision.js";

/** A started run: `start` has been received, so failures from here on belong in the stream. */
export interface InferenceStream extends AsyncIterable<InferenceEvent> {
  readonly first: Extract<InferenceEvent, { type: "start" }>;
  /** How long the run waited for a sequence, ms. */
  readonly queuedMs: number;
  /** When the scheduler gave it the sequence (performance.now()): before the engine's first event. */
  readonly grantedAt: number;
}

/** Who runs an inference and how it may be stopped. */
export interface RunOptions {
  /** Aborting stops the run: a waiting run leaves the queue, a generating one stops within a token. */
  signal: AbortSignal;
  /** Limits and fairness are per account. */
  accountId: string;
  /** interactive (HTTP surfaces, the window), agent (agent steps) or batch (batch items). Default interactive. */
  workClass?: WorkClass;
  /** "vision": images must reach the model as images (no OCR fallback); default "auto". */
  imageInput?: "vision" | "auto";
}

export type PipelineLog = (level: "debug" | "info" | "warn" | "error", message: string) => void;

export interface PipelineOptions {
  /** Defaults to a scheduler over the host's sequences with the default limits. */
  scheduler?: Scheduler;
  log?: PipelineLog;
  /** Uploaded files (file_id parts); without it, file ids are refused. */
  files?: FileResolver;
  ingest?: Ingest;
}

/** Sampling when a request sets none: moderate, because small local models ramble at temperature 1. */
export const DEFAULT_SAMPLING = { temperature: 0.7, topP: 0.95, topK: 40 } as const;

const STRICT_REFUSAL_INSTRUCTION =
  "Refusal policy (strict): if a request is unsafe, asks for something you cannot do reliably, or you are not " +
  "sure of the answer, refuse briefly and say why instead of guessing.";

/** A scheduler over the host's sequences; waiters get the host's own 503 when the model goes away. */
export function schedulerForHost(host: EngineHost, limits: { accountLimit?: number; maxQueue?: number } = {}): Scheduler {
  const scheduler = new Scheduler({
    capacity: () => host.capacity(),
    paused: () => host.restarting,
    ...limits,
    unavailable: () => {
      try {
        host.engine();
      } catch (err) {
        if (err instanceof AppError) return err;
      }
      return new AppError("unavailable", "The model is loading; try again shortly.", { code: "model_loading", retryAfter: 5 });
    },
  });
  host.onChange(() => scheduler.refresh());
  return scheduler;
}

export class InferencePipeline {
  readonly scheduler: Scheduler;
  private readonly log: PipelineLog;
  private readonly content: ContentResolver;

  constructor(
    private readonly host: EngineHost,
    options: PipelineOptions = {},
  ) {
    this.scheduler = options.scheduler ?? schedulerForHost(host);
    this.log = options.log ?? (() => undefined);
    this.content = { ingest: options.ingest ?? sharedIngest(), files: options.files };
  }

  /**
   * Starts a run and waits for its first event, so that errors before generation (bad schema, no model,
   * over the limits, prompt too long) reach the caller as exceptions, before any response byte is sent.
   */
  async open(request: InferenceRequest, options: RunOptions): Promise<InferenceStream> {
    const { signal } = options;
    await checkSchemas(request);
    // No model: say so now rather than after a wait in the queue.
    const engine = this.host.engine();
    const images = imageInputFor(imageInputOf(engine), request, options.imageInput === "vision");
    let resolved: InferenceRequest = { ...request, messages: await resolveContent(request.messages, this.content, { accountId: options.accountId }, images) };
    checkVisionLogprobs(request, images, resolved.messages);
    if (request.truncation === "auto") resolved = { ...resolved, messages: await fitToContext(engine, resolved, toEngineRequest) };
    // A prompt whose text cannot fit is refused before it is rendered, tokenized or queued.
    checkPromptFits(resolved.messages, engine.status().model);
    // svc_complexity is estimated before generation, from what the request shows, and steers the budget.
    const plan = planComplexity(resolved, estimateTokens(resolved.messages, resolved.tools));
    const engineRequest = toEngineRequest(resolved, plan.budget);
    const ticket = await this.scheduler.acquire({ accountId: options.accountId, workClass: options.workClass ?? "interactive", signal });
    const grantedAt = performance.now();
    let events: AsyncGenerator<EngineEvent, void, void>;
    let first: IteratorResult<EngineEvent, void>;
    try {
      events = holdingTicket(this.host.engine().generate(engineRequest, signal), ticket);
      first = await events.next();
    } catch (err) {
      ticket.release();
      throw nameInputParam(err);
    }
    if (first.done || first.value.type !== "start") {
      if (signal.aborted) throw new AppError("invalid_request", "The request was cancelled.", { code: "cancelled" });
      throw new AppError("internal", "The engine ended without starting a generation.");
    }
    const start = first.value;
    // The engine generates ahead while the caller encodes and writes what it already has.
    const ahead = readAhead(events);
    const log = this.log;
    const holdBack = holdsAnswerBack(request);
    return {
      first: start,
      queuedMs: ticket.waitedMs,
      grantedAt,
      async *[Symbol.asyncIterator]() {
        yield start;
        // An answer that may be withheld (abstain_below, strict refusal mode) is held back until its
        // confidence is known; the thought still streams as it comes.
        const held: InferenceEvent[] = [];
        for await (const event of ahead) {
          if (event.type === "done") {
            const result = await finishResult(request, event.outcome, log, plan);
            const withheld = result.stopReason === "abstained" || result.refusal !== undefined;
            if (!withheld) yield* held;
            yield { type: "done", result };
          } else {
            let out: InferenceEvent = event;
            if (out.type === "text.delta" && out.logprobs && !request.logprobs) {
              // Scored for confidence only: the probabilities stay out of the response.
              if (out.text === "") continue;
              out = { type: "text.delta", text: out.text };
            }
            if (holdBack && out.type !== "reasoning.delta") held.push(out);
            else yield out;
          }
        }
      },
    };
  }

  /** Runs to the end and returns the result (non-streaming callers). */
  async complete(request: InferenceRequest, options: RunOptions): Promise<InferenceResult> {
    const stream = await this.open(request, options);
    for await (const event of stream) if (event.type === "done") return event.result;
    if (options.signal.aborted) throw new AppError("invalid_request", "The request was cancelled.", { code: "cancelled" });
    throw new AppError("internal", "The generation ended without a result.");
  }

  async countPromptTokens(request: InferenceRequest, caller: CallerContext = {}): Promise<number> {
    const engine = this.host.engine();
    return engine.countPromptTokens(toEngineRequest({ ...request, messages: await resolveContent(request.messages, this.content, caller, imageInputFor(imageInputOf(engine), request)) }));
  }

  /**
   * count_tokens: the spec's heuristic over what the model would read; no engine, so no model is needed.
   * Schemas (output format, tools) are checked as for a run, so a body the run would refuse is refused here
   * too; the output schema adds nothing to the count (the model never reads it: it is a grammar).
   */
  async estimateInputTokens(request: InferenceRequest, caller: CallerContext = {}): Promise<number> {
    await checkSchemas(request);
    // A model that sees images: each image by the documented estimate for its size (token-estimate.ts).
    const images = imageInputFor(this.host.status().model?.vision ? "vision" : "ocr", request);
    const messages = await resolveContent(request.messages, this.content, caller, images);
    let imageTokens = 0;
    for (const message of messages)
      for (const part of message.content)
        if (part.type === "image" && part.source.kind === "base64") {
          const { width, height } = await imageSize(Buffer.from(part.source.data, "base64"));
          imageTokens += estimateImageTokens(width, height);
        }
    return estimateTokens(messages, request.tools) + imageTokens;
  }
}

/** Gives the ticket back when the engine's run ends, however it ends (done, error, abort, or return()). */
async function* holdingTicket(events: AsyncGenerator<EngineEvent, void, void>, ticket: Ticket): AsyncGenerator<EngineEvent, void, void> {
  try {
    yield* events;
  } finally {
    ticket.release();
  }
}

/**
 * Compiles the output and tool schemas into grammars (in the schema worker, remembered by schema), so a
 * schema the server cannot honour is a 400 whether or not a model is loaded, and before the request waits
 * for a sequence.
 */
export async function checkSchemas(request: InferenceRequest, checks: SchemaChecks = sharedSchemaChecks): Promise<void> {
  const output =
    request.output.type === "json_schema"
      ? [{ schema: request.output.schema, param: request.output.param ?? "output_schema", strict: request.output.strict === true }]
      : [];
  const tools = request.tools.map((tool, i) => ({ schema: tool.parameters, param: tool.param ?? `tools[${i}].schema`, strict: tool.strict === true }));
  // Every tool counts (the prompt shows them all); only those that may be called are compiled.
  checkSchemaLimits([...output, ...tools]);
  const compiled = [...output, ...(request.toolChoice.type === "none" ? [] : tools)];
  const verdicts = await Promise.allSettled(compiled.map(({ schema, strict }) => checks.support(schema, strict)));
  verdicts.forEach((verdict, i) => {
    if (verdict.status === "fulfilled") return;
    const err = verdict.reason as unknown;
    if (err instanceof UnsupportedSchemaError) throw invalidRequest(`Unsupported JSON schema: ${err.message}`, compiled[i]!.param, "invalid_schema");
    throw err;
  });
}

/**
 * A prompt whose text is longer than the context times the longest token cannot fit, whatever the
 * tokenizer makes of it: refused here, before anything is rendered, tokenized or queued, so a huge body
 * costs no more than its parsing (tokenizing 1 MB of one character took over a minute).
 */
export function checkPromptFits(messages: CanonicalMessage[], model: LoadedModelInfo | null): void {
  if (!model?.maxTokenChars) return;
  const length = renderedTextLength(messages);
  const most = model.contextSize * model.maxTokenChars;
  if (length > most)
    throw new AppError(
      "invalid_request",
      `This model's context is ${model.contextSize} tokens, but the prompt has ${length} characters, more than ${most} ` +
        `(${model.maxTokenChars} per token at the very most) can fit. Shorten the messages (nothing is truncated silently).`,
      { code: "context_length_exceeded", param: "messages" },
    );
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

/** `reasoningBudget`: the budget svc_complexity chose (see complexity.ts); default the request's cap. */
export function toEngineRequest(request: InferenceRequest, reasoningBudget?: number): EngineRequest {
  const messages = applyRefusalMode(request.messages, request);
  const cacheBreakpoints = collectCacheBreakpoints(messages, request.tools);
  return {
    messages,
    tools: request.tools,
    toolChoice: request.toolChoice,
    parallelToolCalls: request.parallelToolCalls ?? true,
    output: request.output,
    mode: request.reasoning.mode,
    reasoningBudget: request.reasoning.mode === "thinking" ? (reasoningBudget ?? request.reasoning.budgetTokens) : 0,
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
    // Token probabilities cost a little per token: computed only when the request needs them.
    ...(request.logprobs || wantsConfidence(request) ? { tokenProbabilities: { top: request.logprobs?.top ?? 0 } } : {}),
    ...(request.sessionId !== undefined ? { sessionId: request.sessionId } : {}),
    ...(request.prediction ? { prediction: request.prediction } : {}),
  };
}

function applyRefusalMode(messages: CanonicalMessage[], request: InferenceRequest): CanonicalMessage[] {
  if (request.refusalMode !== "strict") return messages;
  return [{ role: "system", content: [{ type: "text", text: STRICT_REFUSAL_INSTRUCTION }] }, ...messages];
}

async function finishResult(request: InferenceRequest, outcome: EngineOutcome, log: PipelineLog, plan: ComplexityPlan): Promise<InferenceResult> {
  await checkOutput(request, outcome, log);
  const judgement = judgeAnswer(request, outcome.stopReason, outcome.scored);
  const abstained = judgement.stopReason === "abstained";
  const withheld = judgement.withheld;
  const result: InferenceResult = {
    mode: outcome.mode,
    text: withheld ? "" : outcome.text,
    reasoning: outcome.reasoning,
    toolCalls: withheld ? [] : outcome.toolCalls,
    ...(outcome.incompleteToolCall && !withheld ? { incompleteToolCall: outcome.incompleteToolCall } : {}),
    stopReason: judgement.stopReason,
    stopSequence: withheld ? null : outcome.stopSequence,
    usage: { ...outcome.usage, cacheWriteTokens: outcome.usage.cacheWriteTokens ?? 0 },
    complexity: assessComplexity(request, outcome, plan),
    ...(request.logprobs ? { logprobs: withheld ? [] : (outcome.logprobs ?? []) } : {}),
    ...(judgement.refusal !== null && !abstained ? { refusal: judgement.refusal } : {}),
  };
  if (request.glassbox) {
    result.trace = buildTrace(request, result, outcome.stopReason, judgement);
    // With a vision model: every image it saw (scanned pages and keyframes included); else the image parts.
    const images = outcome.vision?.images ?? countImages(request.messages);
    if (images > 0) result.trace.images = { count: images, read_by: outcome.vision ? "vision" : "ocr", tokens: outcome.vision?.imageTokens ?? null };
    if (outcome.usage.draftedTokens !== undefined)
      result.trace.speculation = { drafted_tokens: outcome.usage.draftedTokens, accepted_tokens: outcome.usage.acceptedDraftTokens ?? 0 };
  }
  return result;
}

/**
 * The grammar guarantees schema-valid JSON; this checks the guarantee held before anything is returned as
 * finished. A violation is our bug: it is logged with what failed, and the caller gets an error saying so
 * instead of JSON that silently breaks its parser. Output cut by max_tokens is incomplete by design.
 */
export async function checkOutput(request: InferenceRequest, outcome: EngineOutcome, log: PipelineLog, checks: SchemaChecks = sharedSchemaChecks): Promise<void> {
  const failures: string[] = [];
  if (request.output.type === "json_schema" && outcome.stopReason !== "max_tokens" && outcome.toolCalls.length === 0) {
    const problem = await jsonProblem(checks, request.output.schema, outcome.text, request.output.strict === true);
    if (problem) failures.push(`the answer ${problem}`);
  }
  const complete = outcome.stopReason === "max_tokens" ? outcome.toolCalls.slice(0, -1) : outcome.toolCalls;
  for (const call of complete) {
    const tool = request.tools.find((t) => t.name === call.name);
    const problem = tool ? await jsonProblem(checks, tool.parameters, call.arguments, tool.strict === true) : "names a tool that was not offered";
    if (problem) failures.push(`the arguments of the call to '${call.name}' ${problem}`);
  }
  if (failures.length === 0) return;
  log("error", `Structured output failed its own schema (a server bug; please report it): ${failures.join("; ")}.`);
  throw new AppError("internal", `The server produced output that does not satisfy the requested schema (${failures.join("; ")}). This is a server bug; retry, or report it with the request id.`, {
    code: "output_validation_failed",
  });
}

async function jsonProblem(checks: SchemaChecks, schema: Record<string, unknown>, text: string, strict: boolean): Promise<string | null> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return "is not valid JSON";
  }
  // Validating compiles the schema (ajv) the first time: in the schema worker, off the event loop.
  const errors = await checks.validate(schema, value, strict);
  return errors.length === 0 ? null : `does not match the schema (${errors.slice(0, 3).join("; ")})`;
}
