// The engine on node-llama-cpp: one model, one context with N sequences, a scheduler over them, and the
// generation state machine. This folder is the only importer of node-llama-cpp.
import { stat } from "node:fs/promises";
import { basename } from "node:path";
import {
  getLlama,
  JinjaTemplateChatWrapper,
  LlamaLogLevel,
  resolveChatWrapper,
  type ChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaGrammar,
  type LlamaModel,
} from "node-llama-cpp";
import { AppError, invalidRequest } from "../core/errors.js";
import { runGeneration, type CompiledGrammars } from "./generation.js";
import { jsonObjectGbnf, jsonSchemaToGbnf, UnsupportedSchemaError } from "./json-schema-grammar.js";
import { cacheBreakpointOffset, renderPrompt, resolvePromptSyntax, type PromptSyntax } from "./prompt.js";
import { SequencePool } from "./sequence-pool.js";
import type { Engine, EngineEvent, EngineRequest, EngineStatus, GpuInfo, LoadedModelInfo } from "./types.js";

export type GpuPreference = "auto" | "cuda" | "vulkan" | "metal" | "cpu";

export interface LlamaEngineOptions {
  modelPath: string;
  threads: number;
  sequences: number;
  /** Tokens per sequence; undefined lets the library size it to memory (capped by maxContextSize). */
  contextSize?: number;
  maxContextSize?: number;
  gpu?: GpuPreference;
  log?: (level: "debug" | "info" | "warn" | "error", message: string) => void;
}

/** Tokens kept free at the end of the context for forced markers (thought close, call suffix). */
const CONTEXT_MARGIN = 16;
const GRAMMAR_CACHE_LIMIT = 256;

let llamaPromise: Promise<Llama> | null = null;
let llamaPreference: GpuPreference | null = null;

/** One Llama runtime per process; GPU auto-detection falls back to the CPU binaries. */
export async function loadLlamaRuntime(preference: GpuPreference = "auto", log?: LlamaEngineOptions["log"]): Promise<Llama> {
  if (llamaPromise && llamaPreference === preference) return llamaPromise;
  llamaPreference = preference;
  const logger = (level: LlamaLogLevel, message: string) => {
    const text = message.trim();
    if (!text || !log) return;
    if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) log("error", `llama.cpp: ${text}`);
    else if (level === LlamaLogLevel.warn) log("debug", `llama.cpp: ${text}`);
  };
  const common = { build: "never" as const, progressLogs: false, logLevel: LlamaLogLevel.warn, logger };
  llamaPromise = (async () => {
    if (preference === "cpu") return getLlama({ ...common, gpu: false });
    try {
      return await getLlama({ ...common, gpu: preference });
    } catch (err) {
      log?.("warn", `No usable ${preference === "auto" ? "GPU" : preference} backend (${(err as Error).message}); using the CPU.`);
      return getLlama({ ...common, gpu: false });
    }
  })();
  return llamaPromise;
}

export async function describeGpu(llama: Llama): Promise<GpuInfo> {
  const backend = llama.gpu === false ? "cpu" : llama.gpu;
  if (backend === "cpu") return { backend, devices: [], vramTotalBytes: 0, vramFreeBytes: 0 };
  const [devices, vram] = await Promise.all([llama.getGpuDeviceNames(), llama.getVramState()]);
  return { backend, devices, vramTotalBytes: vram.total, vramFreeBytes: vram.free };
}

/** Adds the prompt tokens written at cache breakpoints to the run's start event and usage. */
async function* withCacheWrites(events: AsyncGenerator<EngineEvent, void, void>, cacheWriteTokens: number): AsyncGenerator<EngineEvent, void, void> {
  for await (const event of events) {
    if (event.type === "start") yield { ...event, cacheWriteTokens };
    else if (event.type === "done") yield { ...event, outcome: { ...event.outcome, usage: { ...event.outcome.usage, cacheWriteTokens } } };
    else yield event;
  }
}

export class LlamaEngine implements Engine {
  private readonly grammarCache = new Map<string, Promise<LlamaGrammar>>();
  private closed = false;

  private constructor(
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly pool: SequencePool,
    private readonly wrappers: { thinking: ChatWrapper; fast: ChatWrapper },
    private readonly syntax: PromptSyntax,
    private readonly info: LoadedModelInfo,
    private readonly gpu: GpuInfo,
  ) {}

  static async load(options: LlamaEngineOptions): Promise<LlamaEngine> {
    const size = await stat(options.modelPath).then(
      (s) => s.size,
      () => {
        throw new AppError("unavailable", `Model file not found: ${options.modelPath}`, { code: "model_not_found" });
      },
    );
    const llama = await loadLlamaRuntime(options.gpu ?? "auto", options.log);
    let model: LlamaModel;
    try {
      model = await llama.loadModel({ modelPath: options.modelPath });
    } catch (err) {
      throw new AppError("unavailable", `Could not load the model ${options.modelPath}: ${(err as Error).message}`, {
        code: "model_load_failed",
        cause: err,
      });
    }
    try {
      const contextSize =
        options.contextSize ?? { min: 512, max: Math.min(options.maxContextSize ?? 16384, model.trainContextSize || 16384) };
      const context = await model.createContext({
        contextSize,
        sequences: options.sequences,
        threads: options.threads,
      });
      const thinking = resolveChatWrapper(model);
      // A Jinja template renders fast mode with enable_thinking=false (an empty thought, as the model was trained).
      const fast =
        thinking instanceof JinjaTemplateChatWrapper
          ? (resolveChatWrapper(model, { customWrapperSettings: { jinjaTemplate: { reasoning: false } } }) ?? thinking)
          : thinking;
      const syntax = resolvePromptSyntax(model, thinking);
      const info: LoadedModelInfo = {
        path: options.modelPath,
        name: model.fileInfo.metadata?.general?.name ?? basename(options.modelPath),
        sizeBytes: size,
        trainContextSize: model.trainContextSize,
        contextSize: context.contextSize,
        sequences: options.sequences,
        threads: options.threads,
      };
      const gpu = await describeGpu(llama);
      options.log?.(
        "info",
        `Model ${info.name} loaded on ${gpu.backend}${gpu.devices.length ? ` (${gpu.devices.join(", ")})` : ""}: ` +
          `${info.sequences} sequence(s) of ${info.contextSize} tokens, ${info.threads} thread(s), chat wrapper ${thinking.wrapperName}` +
          `${syntax.thought ? ", thoughts" : ""}${syntax.toolCall ? ", tool calls" : ""}.`,
      );
      return new LlamaEngine(llama, model, context, new SequencePool(context, options.sequences), { thinking, fast }, syntax, info, gpu);
    } catch (err) {
      await model.dispose().catch(() => undefined);
      if (err instanceof AppError) throw err;
      throw new AppError("unavailable", `Could not create a context for ${options.modelPath}: ${(err as Error).message}`, {
        code: "model_load_failed",
        cause: err,
      });
    }
  }

  status(): EngineStatus {
    return {
      state: this.closed ? "no_model" : "ready",
      model: this.closed ? null : this.info,
      gpu: this.gpu,
      active: this.pool.active,
      queued: this.pool.queued,
      error: null,
    };
  }

  async countPromptTokens(request: EngineRequest): Promise<number> {
    return this.render(request).length;
  }

  async *generate(request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent, void, void> {
    if (this.closed) throw new AppError("unavailable", "The model is being unloaded.", { retryAfter: 5 });
    const promptTokens = this.render(request);
    const room = this.context.contextSize - promptTokens.length - CONTEXT_MARGIN;
    if (room < 1)
      throw new AppError(
        "invalid_request",
        `This model's context is ${this.context.contextSize} tokens, but the prompt is ${promptTokens.length} tokens. ` +
          `Shorten the messages (nothing is truncated silently).`,
        { code: "context_length_exceeded", param: "messages" },
      );
    const grammars = await this.compileGrammars(request);
    const breakpointEnd = request.cacheBreakpoints?.length
      ? cacheBreakpointOffset((messages, tools) => this.render({ ...request, messages, tools }), promptTokens, request.messages, request.tools, request.cacheBreakpoints)
      : 0;
    const lease = await this.pool.acquire(promptTokens, signal);
    try {
      const generation = runGeneration({
        model: this.model,
        sequence: lease.sequence,
        syntax: this.syntax,
        request,
        promptTokens,
        cachedTokens: lease.cachedTokens,
        maxCompletionTokens: Math.min(request.maxTokens ?? Number.POSITIVE_INFINITY, room),
        grammars,
        signal,
      });
      if (breakpointEnd === 0) yield* generation;
      else yield* withCacheWrites(generation, Math.max(0, breakpointEnd - lease.cachedTokens));
    } finally {
      lease.release();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.pool.close();
    await this.context.dispose();
    await this.model.dispose();
  }

  private render(request: EngineRequest) {
    const wrapper = request.mode === "fast" ? this.wrappers.fast : this.wrappers.thinking;
    return renderPrompt(this.model, wrapper, request.messages, request.tools);
  }

  private async compileGrammars(request: EngineRequest): Promise<CompiledGrammars> {
    const output = request.output;
    let answer: LlamaGrammar | null = null;
    if (output.type === "json_object") answer = await this.grammar(jsonObjectGbnf());
    else if (output.type === "json_schema")
      answer = await this.grammar(this.schemaGrammar(output.schema, output.param ?? "response_format"));

    const callable = request.tools.length > 0 && request.toolChoice.type !== "none" && this.syntax.toolCall !== null;
    if (request.toolChoice.type === "tool") {
      const name = request.toolChoice.name;
      if (!request.tools.some((t) => t.name === name))
        throw invalidRequest(`tool_choice names the tool '${name}', which is not among the tools.`, "tool_choice");
    }
    if (!callable) return { answer, toolNames: null, toolArguments: new Map() };
    const toolNames = await this.grammar(`root ::= ${request.tools.map((t) => JSON.stringify(t.name)).join(" | ")}`);
    const toolArguments = new Map<string, LlamaGrammar>();
    for (const [i, tool] of request.tools.entries())
      toolArguments.set(tool.name, await this.grammar(this.schemaGrammar(tool.parameters, tool.param ?? `tools[${i}].parameters`)));
    return { answer, toolNames, toolArguments };
  }

  private schemaGrammar(schema: Record<string, unknown>, param: string): string {
    try {
      return jsonSchemaToGbnf(schema);
    } catch (err) {
      if (err instanceof UnsupportedSchemaError) throw invalidRequest(`Unsupported JSON schema: ${err.message}`, param, "invalid_schema");
      throw err;
    }
  }

  private grammar(text: string): Promise<LlamaGrammar> {
    let found = this.grammarCache.get(text);
    if (!found) {
      found = this.llama.createGrammar({ grammar: text }).catch((err: unknown) => {
        this.grammarCache.delete(text);
        throw invalidRequest(`The schema could not be compiled into a grammar: ${(err as Error).message}`, "response_format", "invalid_schema");
      });
      if (this.grammarCache.size >= GRAMMAR_CACHE_LIMIT) {
        const oldest = this.grammarCache.keys().next().value;
        if (oldest !== undefined) this.grammarCache.delete(oldest);
      }
      this.grammarCache.set(text, found);
    }
    return found;
  }
}
