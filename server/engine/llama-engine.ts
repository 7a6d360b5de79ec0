// Why one file (over 400 lines): the LlamaEngine class (load, count, generate, grammars) is one job, the
// engine on node-llama-cpp; its load reads the model's facts, plans its fit (model-fit.ts) and creates the
// context in one sequence whose intermediate values each step uses. The runtime it loads on is
// llama-runtime.ts.
//
// The engine on node-llama-cpp: one model, one context with N sequences (the pipeline's scheduler lets at
// most N runs in at once), and the generation state machine. This folder is the only importer of node-llama-cpp.
import { stat } from "node:fs/promises";
import { availableParallelism, freemem, totalmem } from "node:os";
import { basename } from "node:path";
import {
  type ChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import type { Log } from "../core/log.js";
import { AppError } from "../core/errors.js";
import { fullCollection } from "../core/gc.js";
import { runGeneration } from "./generation.js";
import type { CompiledGrammars } from "./generation-sampling.js";
import { GrammarCache } from "./grammar-cache.js";
import { Utf8TokenGuard } from "./utf8-guard.js";
import { modelFileIdentity, WARM_START_MAX_BYTES, WARM_START_MIN_TOKENS, WarmStart, warmStartIdentity } from "./warm-start.js";
import { VisionSlot, visionOffload, type VisionEngine } from "./vision/vision-engine.js";
import { countVisionTokens, hasImages, runVisionGeneration } from "./vision/vision-generation.js";
import { cacheBreakpointOffset, renderPromptText, resolveChatWrappers, resolvePromptSyntax, type PromptSyntax } from "./prompt.js";
import { longestTokenChars, PromptTooLongError, TokenizeDeadlineError, tokenizeWithin } from "./prompt-tokens.js";
import { agentContextNeed, agentContextNote, agentContextNoteInWindow, CONTEXT_MARGIN, contextRemedy, contextTooLong, type ContextFacts } from "./context-advice.js";
import { chooseThreads, estimateContextBytes, type GpuPreference, type Offload } from "./resource-plan.js";
import { SequencePool } from "./sequence-pool.js";
import { UnpricedStepCosts } from "./step-costs.js";
import { CoreContention, DecodeThreads, libuvPoolThreads, splitThreads, usesOpenMp } from "./thread-policy.js";
import { engineBuildHint, engineBuildHintInWindow, nodeLlamaCppVersion } from "./engine-build.js";
import { samplingsQueue, SlotLoop, tokenPathsFromEnvironment, type TokenPaths } from "./slot-loop.js";
import type { SpeculationLookup } from "./speculation.js";
import { jsonQuotedText } from "./prompt-lookup.js";
import { intoHugePages, ramForWeights, transparentHugePageMode, useMmapFor, type WeightsSetting } from "./huge-pages.js";
import type { Engine, EngineEvent, EngineRequest, EngineStatus, GpuInfo, LoadedModelInfo } from "./types.js";
import { describeGpu, loadRuntime } from "./llama-runtime.js";
import { DraftModel, type DraftModelOptions } from "./draft-model.js";
import { agentTokensPerChar, planForModel } from "./model-fit.js";

export type { GpuPreference } from "./resource-plan.js";

export interface LlamaEngineOptions {
  modelPath: string;
  /** CPU threads; undefined chooses from the cores and how much of the model is on the GPU. */
  threads?: number;
  /** Parallel sequences; undefined fits as many as the free memory holds (up to 2 on a CPU, 4 on a GPU). */
  sequences?: number;
  /** Tokens per sequence; undefined sizes it to the free memory (capped by maxContextSize). */
  contextSize?: number;
  /** Layers to put on the GPU; undefined lets node-llama-cpp choose what the VRAM holds. */
  gpuLayers?: number;
  /** Cap for the automatic context size; default 131072 (and never past the model's training length). */
  maxContextSize?: number;
  gpu?: GpuPreference;
  /** Map the model file (on), read it into memory (off), or choose (auto: read in, in huge pages, on Linux with THP on the CPU when it fits; huge-pages.ts). */
  mmap?: WeightsSetting;
  /** How long reading one request's prompt into tokens may take, ms; default TOKENIZE_TIMEOUT_MS. */
  tokenizeTimeoutMs?: number;
  /** Warm start (warm-start.ts): save long shared prefixes' KV cache here and restore it after a restart. */
  warmStart?: { dir: string; maxBytes?: number; minTokens?: number };
  /**
   * The model's vision projector (an mmproj GGUF): requests with images then run on the vision engine
   * (vision/vision-engine.ts, a process of its own), the rest here as before.
   */
  projectorPath?: string;
  /** The engine build's token paths to take where the binaries have them; default: tokenPathsFromEnvironment(). */
  tokenPaths?: TokenPaths;
  /** Speculation (--speculation); undefined: as tokenPaths (or the environment) says. */
  speculation?: "prompt-lookup" | "off";
  /**
   * A draft model (--draft-model: a small GGUF with this model's vocabulary) whose guesses speculation checks
   * instead of prompt lookup's; unused when speculation is off.
   */
  draftModelPath?: string;
  log?: Log;
}

/** The conversation's characters, at most, that prompt lookup also reads as a JSON string quotes them (lookupFor). */
const QUOTED_TEXT_CHARS = 65536;

/** The token paths a load asks for: tokenPaths (or the environment's), with --speculation's choice over them. */
function speculationPaths(options: LlamaEngineOptions): TokenPaths {
  const paths = options.tokenPaths ?? tokenPathsFromEnvironment();
  return options.speculation ? { ...paths, speculation: options.speculation !== "off" } : paths;
}

/** Loads --draft-model beside the served model, saying so in the log; throws AppError where it cannot serve. */
async function loadDraftModel(
  llama: Llama,
  modelPath: string,
  target: { model: LlamaModel; context: LlamaContext },
  /** The served model's threads and their policy's inputs, which the draft's decodes share; whether its rounds may queue their samplings. */
  threads: Pick<DraftModelOptions, "threads" | "split" | "contention" | "cores" | "queuedSamplings">,
  log: LlamaEngineOptions["log"],
): Promise<DraftModel> {
  const started = performance.now();
  const draft = await DraftModel.load({ llama, modelPath, target, ...threads });
  log?.("info", `Draft model ${draft.name} loaded for speculation in ${Math.round(performance.now() - started)} ms: its guesses are checked as answers are written.`);
  return draft;
}

/**
 * Reading a prompt stops at the context size, so it takes well under a second on any machine; this only
 * bounds inputs that are pathological for the tokenizer.
 */
export const TOKENIZE_TIMEOUT_MS = 30_000;

const MiB = 1024 * 1024;

function formatMiB(bytes: number): string {
  return bytes >= 1024 * MiB ? `${(bytes / 1024 / MiB).toFixed(1)} GiB` : `${Math.round(bytes / MiB)} MiB`;
}

const QUANTIZED_KV = { experimentalKvCacheKeyType: "Q8_0", experimentalKvCacheValueType: "Q8_0", flashAttention: true } as const;

/**
 * Tests that count speculation's guesses across a server (test/e2e/speculation-surfaces.test.ts) set
 * SVC_ENGINE_TEST_KEEP_GUESSES=1: every guess is checked, as before steps priced them (step-costs.ts), so the
 * counts do not depend on how fast the machine decoded the last steps. Read once, when a model loads; unset
 * (always, outside those tests), steps price their guesses.
 */
function keepGuessesForTests(): boolean {
  return process.env.SVC_ENGINE_TEST_KEEP_GUESSES === "1";
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
  private closed = false;
  private readonly loop: SlotLoop;
  private readonly grammars: GrammarCache;
  /** Warm start, when it is on (set right after construction). */
  warm: WarmStart | null = null;

  private constructor(
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly pool: SequencePool,
    private readonly wrappers: { thinking: ChatWrapper; fast: ChatWrapper },
    private readonly syntax: PromptSyntax,
    private readonly info: LoadedModelInfo,
    /** What the advice for a prompt too long for the context is composed from. */
    private readonly contextFacts: ContextFacts,
    private readonly gpu: GpuInfo,
    private readonly tokenizeTimeoutMs: number,
    tokenPaths: TokenPaths,
    private draftModel: DraftModel | null,
    decodeThreads: DecodeThreads | null,
  ) {
    // How a token is produced is decided here, once, from the binaries, the model and the load's options.
    this.loop = new SlotLoop(context, model, tokenPaths, draftModel, keepGuessesForTests() ? new UnpricedStepCosts() : undefined, decodeThreads);
    this.grammars = new GrammarCache(llama);
    this.maxThreadsAtLoad = llama.maxThreads;
  }

  /** node-llama-cpp's thread maximum before decodes set it (slot-loop.ts `libraryEvaluate`), put back at close. */
  private readonly maxThreadsAtLoad: number;

  private vision: VisionSlot | null = null;

  static async load(options: LlamaEngineOptions): Promise<LlamaEngine> {
    const size = await stat(options.modelPath).then(
      (s) => s.size,
      () => {
        throw new AppError("unavailable", `Model file not found: ${options.modelPath}`, { code: "model_not_found" });
      },
    );
    const runtime = await loadRuntime(options.gpu ?? "auto", options.log);
    const llama = runtime.llama;
    let model: LlamaModel;
    try {
      const hugePages = transparentHugePageMode();
      const ram = ramForWeights({ freeBytes: freemem(), totalBytes: totalmem(), limitBytes: process.constrainedMemory?.(), rssBytes: process.memoryUsage.rss() });
      const useMmap = useMmapFor({
        setting: options.mmap ?? "auto",
        platform: process.platform,
        hugePages,
        onCpu: llama.gpu === false,
        modelBytes: size,
        ramFreeBytes: ram.freeBytes,
        ramTotalBytes: ram.totalBytes,
      });
      // Mapped: node-llama-cpp's default (it maps where the platform can).
      const layers = options.gpuLayers === undefined ? {} : { gpuLayers: options.gpuLayers };
      if (useMmap) model = await llama.loadModel({ modelPath: options.modelPath, ...layers });
      else {
        const loaded = await intoHugePages(() => llama.loadModel({ modelPath: options.modelPath, useMmap: false, ...layers }), size / 16, hugePages);
        model = loaded.result;
        options.log?.(
          "info",
          `Model read into memory${loaded.hugePageBytes > 0 ? `, ${formatMiB(loaded.hugePageBytes)} of it in huge pages` : ""} (--mmap on maps the file instead).`,
          `Model read into memory${loaded.hugePageBytes > 0 ? `, ${formatMiB(loaded.hugePageBytes)} of it in huge pages` : ""}.`,
        );
      }
    } catch (err) {
      throw new AppError("unavailable", `Could not load the model ${options.modelPath}: ${(err as Error).message}`, {
        code: "model_load_failed",
        cause: err,
      });
    }
    try {
      const agent = agentContextNeed(agentTokensPerChar(model));
      const draftModelPath = speculationPaths(options).speculation ? options.draftModelPath : undefined;
      const { plan, budget, onGpu, memory, automaticContextSize } = await planForModel(llama, model, { ...options, draftModelPath }, agent.contextSize);
      const totalLayers = model.fileInsights.totalLayers;
      const offload: Offload = model.gpuLayers <= 0 || llama.gpu === false ? "none" : model.gpuLayers >= totalLayers ? "full" : "partial";
      const cores = availableParallelism();
      const poolThreads = libuvPoolThreads();
      const threads = options.threads ?? chooseThreads({ cores, offload, modelBytes: size, poolThreads });
      const kvNote = plan.kvCache === "q8_0" ? ", 8-bit KV cache" : "";
      if (plan.auto.contextSize || plan.auto.sequences) {
        const sized = `Sized to ${formatMiB(budget)} of free ${onGpu ? "VRAM" : "RAM"}: ${plan.sequences} sequence(s) of ${plan.contextSize} tokens${kvNote} (about ${formatMiB(plan.estimatedBytes)})`;
        options.log?.(
          plan.fits ? "info" : "warn",
          `${sized}${plan.fits ? "" : "; this may not fit, set --context-size and --sequences lower if loading fails"}.`,
          `${sized}${plan.fits ? "" : "; this may not fit: if loading fails, set its context and answers at once lower in the model's settings (Model page)"}.`,
        );
      }
      let context: LlamaContext | undefined;
      let kvCache = plan.kvCache;
      let held = memory;
      const kvOptions = () => (kvCache === "q8_0" ? QUANTIZED_KV : {});
      try {
        context = await model.createContext({ contextSize: plan.contextSize, sequences: plan.sequences, threads, ...kvOptions() });
      } catch (err) {
        if (!plan.auto.contextSize && kvCache === "f16") throw err;
        // The estimate was off (or this backend has no 8-bit KV cache): let the library find the largest
        // context that fits, up to the planned one, with the default KV cache.
        options.log?.("warn", `A context of ${plan.contextSize} tokens${kvNote} did not load (${(err as Error).message}); trying smaller.`);
        kvCache = "f16";
        context = await model.createContext({ contextSize: { min: 512, max: plan.contextSize }, sequences: plan.sequences, threads });
        // The memory held no more than what loaded.
        held = { ...memory, budgetBytes: Math.min(budget, estimateContextBytes(memory.costs[0]!, context.contextSize, plan.sequences)) };
      }
      const split = splitThreads(threads, cores, usesOpenMp(llama.systemInfo), poolThreads);
      const capped = threads > 1;
      // One measure of the other processes' load for the served model's decodes and the draft model's.
      const contention = capped ? new CoreContention() : undefined;
      const decodeThreads = DecodeThreads.for(split, {
        cores,
        contention,
        onCapChange: (from, to, others) =>
          options.log?.("debug", `Other processes keep ${others.toFixed(1)} of ${cores} cores busy: decoding with ${to} thread(s) instead of ${from}.`),
      });
      const sequences = plan.sequences;
      const { thinking, fast } = resolveChatWrappers(model);
      const syntax = resolvePromptSyntax(model, thinking);
      // A pass over the vocabulary (about 0.15 s for 150k tokens), here rather than in the first constrained request.
      Utf8TokenGuard.for(model);
      const facts: ContextFacts = {
        contextSize: context.contextSize,
        sequences,
        trainContextSize: model.trainContextSize,
        agent,
        contextSizeGiven: !plan.auto.contextSize,
        sequencesGiven: !plan.auto.sequences,
        automaticContextSize,
        memory: held,
      };
      const info: LoadedModelInfo = {
        path: options.modelPath,
        name: model.fileInfo.metadata?.general?.name ?? basename(options.modelPath),
        sizeBytes: size,
        trainContextSize: model.trainContextSize,
        contextSize: context.contextSize,
        sequences,
        threads,
        gpuLayers: model.gpuLayers,
        totalLayers,
        maxOutputTokens: context.contextSize - CONTEXT_MARGIN,
        kvCache,
        agentContextSize: agent.contextSize,
        contextNote: agentContextNote(facts),
        warmStart: options.warmStart ? { dir: options.warmStart.dir, minTokens: options.warmStart.minTokens ?? WARM_START_MIN_TOKENS } : null,
        contextRemedy: contextRemedy(facts, agent.promptTokens),
        maxTokenChars: longestTokenChars((model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: readonly string[] } } }).tokenizer?.ggml?.tokens),
      };
      const gpu = await describeGpu(llama, runtime.skipped);
      options.log?.(
        "info",
        `Model ${info.name} loaded on ${gpu.backend}${gpu.devices.length ? ` (${gpu.devices.join(", ")})` : ""}` +
          `${gpu.backend === "cpu" ? "" : `, ${model.gpuLayers}/${totalLayers} layers offloaded, ${formatMiB(gpu.vramFreeBytes)} VRAM free`}: ` +
          `${info.sequences} sequence(s) of ${info.contextSize} tokens${kvCache === "q8_0" ? " (8-bit KV cache)" : ""}, ${info.threads} thread(s)` +
          `${split.single !== split.batch ? ` (${split.single} for a lone sequence's steps)` : ""}` +
          `${capped ? ", fewer while other processes keep cores busy" : ""}` +
          `, decoding on ${poolThreads === 1 ? "one libuv pool thread" : `a libuv pool of ${poolThreads} threads`}` +
          `, chat wrapper ${thinking.wrapperName}` +
          `${syntax.thought ? ", thoughts" : ""}${syntax.toolCall ? ", tool calls" : ""}.`,
      );
      const hint = engineBuildHint(gpu);
      if (hint) options.log?.("info", hint, engineBuildHintInWindow(gpu) ?? undefined);
      if (info.contextNote) options.log?.("warn", info.contextNote, agentContextNoteInWindow(facts) ?? undefined);
      // Building the chat wrappers filled V8's transitions from the empty object literal's map, which
      // slows every object built key by key until the next full collection: run it now (core/gc.ts).
      fullCollection();
      const paths = speculationPaths(options);
      const draft = options.draftModelPath && paths.speculation ? await loadDraftModel(llama, options.draftModelPath, { model, context }, { threads, split, contention, cores, queuedSamplings: samplingsQueue(paths) }, options.log) : null;
      const engine = new LlamaEngine(llama, model, context, new SequencePool(context, sequences), { thinking, fast }, syntax, info, facts, gpu, options.tokenizeTimeoutMs ?? TOKENIZE_TIMEOUT_MS, paths, draft, decodeThreads);
      options.log?.("debug", `Tokens are produced by ${engine.loop.describe()}.`);
      if (draft && !engine.loop.paths.speculation) {
        options.log?.("warn", `The draft model ${draft.name} is not used: this model's tokens take node-llama-cpp's own path, which checks no guesses.`);
        await engine.dropDraftModel();
      }
      if (options.draftModelPath && !paths.speculation)
        options.log?.("warn", "--draft-model is not used while --speculation is off.", "The draft model is not used while speculative decoding is off.");
      info.speculation = !engine.loop.paths.speculation ? "off" : engine.draftModelInUse ? "draft-model" : "prompt-lookup";
      info.draftModel = engine.draftModelInUse ? { name: engine.draftModelInUse.name, path: options.draftModelPath! } : null;
      if (options.projectorPath) await engine.startVision(options.projectorPath, options.log);
      if (options.warmStart)
        engine.warm = new WarmStart(
          {
            dir: options.warmStart.dir,
            maxBytes: options.warmStart.maxBytes ?? WARM_START_MAX_BYTES,
            minTokens: options.warmStart.minTokens ?? WARM_START_MIN_TOKENS,
          },
          warmStartIdentity(modelFileIdentity(options.modelPath), nodeLlamaCppVersion(), gpu, kvCache),
          options.log,
        );
      return engine;
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
      error: null,
    };
  }

  async countPromptTokens(request: EngineRequest): Promise<number> {
    if (hasImages(request)) return countVisionTokens({ model: this.model, wrapper: this.wrapperFor(request), vision: await this.visionFor(), request });
    return (await this.render(request, this.tokenizeBudget())).length;
  }

  /** Loads the model with its projector in the vision process; without it, images take the OCR path. */
  private async startVision(projectorPath: string, log: LlamaEngineOptions["log"]): Promise<void> {
    // The VRAM free now, after the text engine's context (and draft model) took theirs.
    const gpu = visionOffload(this.gpu.backend === "cpu" ? null : await describeGpu(this.llama), this.info, (await stat(projectorPath)).size);
    this.vision = await VisionSlot.open({ modelPath: this.info.path, projectorPath, contextSize: this.info.contextSize, threads: this.info.threads, ...(gpu ? { gpu } : {}) }, log);
    this.info.vision = this.vision ? { projector: projectorPath, ...this.vision.placement } : null;
  }

  private visionFor(): Promise<VisionEngine> {
    if (!this.vision) throw new AppError("invalid_request", "The loaded model cannot see images.", { code: "vision_unavailable" });
    return this.vision.engine();
  }

  private wrapperFor(request: EngineRequest): ChatWrapper {
    return request.mode === "fast" ? this.wrappers.fast : this.wrappers.thinking;
  }

  async *generate(request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent, void, void> {
    if (this.closed) throw new AppError("unavailable", "The model is being unloaded.", { retryAfter: 5 });
    if (hasImages(request)) {
      yield* runVisionGeneration({
        model: this.model,
        wrapper: this.wrapperFor(request),
        syntax: this.syntax,
        vision: await this.visionFor(),
        request,
        contextSize: this.info.contextSize,
        margin: CONTEXT_MARGIN,
        // The answer's grammar, as the text path compiles it (json-schema-grammar.ts), in GBNF for llama.cpp.
        answerGrammar: this.grammars.answerGbnf(request.output) ?? undefined,
        toolGrammars: this.grammars.toolGbnf(request, this.syntax),
        tooLong: (tokens) => contextTooLong(this.contextFacts, tokens),
        signal,
      });
      return;
    }
    const budget = this.tokenizeBudget(signal);
    let promptTokens: Token[];
    try {
      promptTokens = await this.render(request, budget);
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
    const room = this.context.contextSize - promptTokens.length - CONTEXT_MARGIN;
    if (room < 1) throw contextTooLong(this.contextFacts, promptTokens.length);
    const grammars = await this.grammars.compile(request, this.syntax);
    const breakpointEnd = request.cacheBreakpoints?.length
      ? await cacheBreakpointOffset((messages, tools) => this.render({ ...request, messages, tools }, budget), promptTokens, request.messages, request.tools, request.cacheBreakpoints)
      : 0;
    if (signal.aborted) return;
    const lease = await this.pool.acquire(promptTokens, request.sessionId);
    let warmed: { held: number; cached: number };
    try {
      warmed = this.warm ? await this.warmUp(request, promptTokens, lease, budget) : { held: lease.cachedTokens, cached: lease.cachedTokens };
    } catch (err) {
      lease.release();
      throw err;
    }
    if (signal.aborted) {
      lease.release();
      return;
    }
    const { held, cached: cachedTokens } = warmed;
    try {
      const sequence = lease.sequence;
      const lookup = this.lookupFor(request, grammars);
      const generation = runGeneration({
        model: this.model,
        syntax: this.syntax,
        request,
        promptTokens,
        cachedTokens,
        heldTokens: held,
        maxCompletionTokens: Math.min(request.maxTokens ?? Number.POSITIVE_INFINITY, room),
        grammars,
        signal,
        evaluate: (tokens, metadata, options, more) => this.loop.evaluate(sequence, tokens, metadata, options, more, signal, lookup),
      });
      if (breakpointEnd === 0) yield* generation;
      else yield* withCacheWrites(generation, Math.max(0, breakpointEnd - cachedTokens));
    } finally {
      lease.release();
    }
  }

  /**
   * What prompt lookup guesses from besides the sequence: Chat's prediction (an answer can repeat at most a
   * context of it); and, for an answer with a JSON grammar (a tool's arguments, structured output), the
   * conversation's texts as its strings quote them: not the system prompt's (instructions, seldom quoted),
   * the latest 64 KiB of characters at most (tokenizing them at the first guess takes about 10 ms on a CPU;
   * a whole coding agent's conversation would hold up the loop's step for every request).
   */
  private lookupFor(request: EngineRequest, grammars: CompiledGrammars): SpeculationLookup {
    const size = this.context.contextSize;
    const lookup: SpeculationLookup = {};
    if (request.prediction) lookup.prediction = this.model.tokenize(request.prediction.slice(0, size * 16), false).slice(0, size);
    if (grammars.answer !== null || grammars.toolArguments.size > 0) {
      let tokens: readonly Token[] | undefined;
      const texts = request.messages.flatMap((m) => (m.role === "system" ? [] : m.content.flatMap((part) => (part.type === "text" ? [part.text] : []))));
      lookup.quoted = () => (tokens ??= this.model.tokenize(jsonQuotedText(texts, Math.min(size * 4, QUOTED_TEXT_CHARS)), false).slice(-size));
    }
    return lookup;
  }

  /**
   * Warm start: a long shared prefix (before the first user message's content) that no sequence holds is
   * restored from its saved state (counted as cached), or read and saved the first time (not cached: it was
   * read now). Returns the prompt tokens the sequence holds and those served from a cache. Nothing is saved or
   * restored when less than minTokens would be (the prefix cache serves).
   */
  private async warmUp(
    request: EngineRequest,
    promptTokens: Token[],
    lease: { sequence: LlamaContextSequence; cachedTokens: number },
    budget: ReturnType<LlamaEngine["tokenizeBudget"]>,
  ): Promise<{ held: number; cached: number }> {
    const warm = this.warm!;
    const cached = lease.cachedTokens;
    const asIs = { held: cached, cached };
    if (promptTokens.length <= warm.options.minTokens || cached >= warm.options.minTokens) return asIs;
    const prefix = await this.sharedPrefixLength(request, promptTokens, budget);
    if (prefix < warm.options.minTokens || prefix <= cached) return asIs;
    const tokens = promptTokens.slice(0, prefix);
    const key = warm.keyFor(tokens);
    const sequence = lease.sequence;
    try {
      const saved = warm.find(key);
      if (saved) {
        const restored = await warm.restore(sequence, saved);
        if (restored === prefix && sequence.compareContextTokens(tokens).firstDifferentIndex === prefix) return { held: prefix, cached: prefix };
        // Not what the key promised: start the sequence afresh.
        await sequence.eraseContextTokenRanges([{ start: 0, end: sequence.nextTokenIndex }]);
        return { held: 0, cached: 0 };
      }
      await this.loop.read(sequence, promptTokens.slice(cached, prefix));
      await warm.save(sequence, key, prefix);
      return { held: prefix, cached };
    } catch (err) {
      warm.log?.("warn", `Warm start: ${(err as Error).message}`);
      // What the sequence holds of the prompt, whatever step failed.
      const held = Math.min(sequence.compareContextTokens(promptTokens).firstDifferentIndex, promptTokens.length - 1);
      if (sequence.nextTokenIndex > held) await sequence.eraseContextTokenRanges([{ start: held, end: sequence.nextTokenIndex }]);
      return { held, cached: Math.min(cached, held) };
    }
  }

  /**
   * How many of the prompt's tokens come before the first user message's content: the prompt rendered with two
   * other first user messages agrees with itself up to there. (The whole conversation is rendered: system
   * messages after the first user message may join the system prompt, before it.) 0 when something other than
   * system messages comes before it.
   */
  private async sharedPrefixLength(request: EngineRequest, promptTokens: Token[], budget: ReturnType<LlamaEngine["tokenizeBudget"]>): Promise<number> {
    const first = request.messages.findIndex((m) => m.role === "user");
    if (first < 0 || request.messages.slice(0, first).some((m) => m.role !== "system")) return 0;
    const variant = (text: string): EngineRequest => ({
      ...request,
      messages: request.messages.map((m, i): EngineRequest["messages"][number] => (i === first ? { role: "user", content: [{ type: "text", text }] } : m)),
    });
    const [a, b] = await Promise.all([this.render(variant("\u0001 warm"), budget), this.render(variant("\u0002 start"), budget)]);
    let n = 0;
    while (n < a.length && n < b.length && n < promptTokens.length && a[n] === b[n] && a[n] === promptTokens[n]) n++;
    return n;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.vision?.close();
    this.pool.close();
    await this.dropDraftModel();
    await this.context.dispose();
    await this.model.dispose();
    // A next model's context takes its count within it.
    this.llama.maxThreads = this.maxThreadsAtLoad;
  }

  /** The draft model speculation guesses with; null: prompt lookup's guesses (or none). */
  get draftModelInUse(): DraftModel | null {
    return this.draftModel;
  }

  /** Unloads the draft model (the engine closes, or its tokens take a path that checks no guesses). */
  async dropDraftModel(): Promise<void> {
    const draft = this.draftModel;
    this.draftModel = null;
    await draft?.close();
  }

  /** Limits for reading one request's prompts: the context size, the deadline, the client's signal. */
  private tokenizeBudget(signal?: AbortSignal) {
    return { maxTokens: this.context.contextSize, deadline: performance.now() + this.tokenizeTimeoutMs, signal };
  }

  /** The prompt's tokens, read under the budget (see prompt-tokens.ts); errors are the client's 400s. */
  private async render(request: EngineRequest, budget: ReturnType<LlamaEngine["tokenizeBudget"]>): Promise<Token[]> {
    const wrapper = request.mode === "fast" ? this.wrappers.fast : this.wrappers.thinking;
    try {
      return await tokenizeWithin(renderPromptText(wrapper, request.messages, request.tools), this.model.tokenizer, budget);
    } catch (err) {
      if (err instanceof PromptTooLongError) throw contextTooLong(this.contextFacts, err.estimatedTokens, err.atLeastTokens - 1);
      if (err instanceof TokenizeDeadlineError)
        throw new AppError(
          "invalid_request",
          `Reading the prompt into tokens took longer than ${Math.round(this.tokenizeTimeoutMs / 1000)} s, so it was stopped. ` +
            `Shorten the messages, or break up very long runs of one character.`,
          { code: "prompt_too_complex", param: "messages" },
        );
      throw err;
    }
  }

}
