// The Engine on inference servers we do not run (llama-server, with RPC workers or not; several replicas):
// prompts are rendered, tokenized and parsed here exactly as on the LlamaEngine, by the same modules
// (prompt.ts, grammar-cache.ts, generation.ts's state machine); only the sampling of each token happens on
// the upstream, through its raw-prompt /completion endpoint with the prompt as token ids.
//
// That needs the model's tokenizer and chat template here: the same GGUF the upstream serves, loaded with its
// vocabulary only (no weights are read). At load the two tokenizers are compared on a probe text through the
// upstream's /tokenize, so a different model behind the URL is an error at start, not garbled answers.
//
// Each phase of a generation (thought, answer, tool name, tool arguments) is one streamed /completion on the
// slot the generation leases (upstream-pool.ts), with that phase's grammar (GBNF text), banned tokens
// (logit_bias false) and cache_prompt: the next phase's request finds the prompt and everything sampled so far
// in the slot's KV cache, so a phase change costs one round trip, not a re-read of the prompt.
import { stat } from "node:fs/promises";
import { basename } from "node:path";
import type { ChatWrapper, LlamaModel, Token } from "node-llama-cpp";
import { AppError } from "../core/errors.js";
import { CONTEXT_MARGIN } from "./context-advice.js";
import { runGeneration, type PhaseConstraints } from "./generation.js";
import { GrammarCache } from "./grammar-cache.js";
import { loadRuntime } from "./llama-runtime.js";
import { cacheBreakpointOffset, renderPromptText, resolveChatWrappers, resolvePromptSyntax, type PromptSyntax } from "./prompt.js";
import { longestTokenChars, PromptTooLongError, TokenizeDeadlineError, tokenizeWithin } from "./prompt-tokens.js";
import type { SampledToken, TokenMetadata } from "./token-probabilities.js";
import type { Engine, EngineEvent, EngineRequest, EngineStatus, LoadedModelInfo } from "./types.js";
import { ReplicaPool, type SlotLease } from "./upstream-pool.js";
import { UpstreamDownError, type UpstreamTarget } from "./upstream-client.js";
import type { SequenceEvaluateOptions } from "node-llama-cpp";

export type { UpstreamTarget } from "./upstream-client.js";

export interface UpstreamEngineOptions {
  /** The GGUF the upstreams serve (or one with the same tokenizer and template): read for its vocabulary only. */
  modelPath: string;
  upstreams: UpstreamTarget[];
  /** Prefix affinity across slots and replicas (default on); off: round-robin. */
  affinity?: boolean;
  tokenizeTimeoutMs?: number;
  log?: (level: "debug" | "info" | "warn" | "error", message: string) => void;
}

/** Text whose tokens must agree here and upstream (words, digits, punctuation, a multi-byte character). */
const TOKENIZER_PROBE = "Hello, world! The quick brown fox: 12345 {\"a\": [1, 2]} éà 日本";
const TOKENIZE_TIMEOUT_MS = 30_000;

/** The token a stream that ended on an end-of-generation token stands for (generation.ts ends the phase on it). */
function endToken(model: LlamaModel): Token {
  const t = model.tokens.eos ?? model.tokens.eot;
  if (t == null) throw new AppError("unavailable", "The model has no end-of-generation token.", { code: "model_load_failed" });
  return t;
}

export class UpstreamEngine implements Engine {
  private closed = false;
  private readonly eog: Token;

  private constructor(
    private readonly model: LlamaModel,
    private readonly wrappers: { thinking: ChatWrapper; fast: ChatWrapper },
    private readonly syntax: PromptSyntax,
    private readonly grammars: GrammarCache,
    readonly pool: ReplicaPool,
    private readonly options: UpstreamEngineOptions,
    private readonly sizeBytes: number,
  ) {
    this.eog = endToken(model);
  }

  static async load(options: UpstreamEngineOptions): Promise<UpstreamEngine> {
    if (options.upstreams.length === 0) throw new AppError("invalid_request", "No upstream given.", { code: "upstream_unavailable" });
    const size = await stat(options.modelPath).then(
      (s) => s.size,
      () => {
        throw new AppError("unavailable", `Model file not found: ${options.modelPath} (the upstream engine reads its tokenizer and chat template).`, { code: "model_not_found" });
      },
    );
    const pool = new ReplicaPool(options.upstreams, { affinity: options.affinity, log: options.log });
    await pool.start();
    const runtime = await loadRuntime("cpu", options.log);
    let model: LlamaModel;
    try {
      model = await runtime.llama.loadModel({ modelPath: options.modelPath, vocabOnly: true });
    } catch (err) {
      pool.close();
      throw new AppError("unavailable", `Could not read the tokenizer of ${options.modelPath}: ${(err as Error).message}`, { code: "model_load_failed", cause: err });
    }
    try {
      // The same tokenizer here and upstream, or every prompt and parse would be wrong.
      const local = model.tokenize(TOKENIZER_PROBE, true);
      for (const replica of pool.replicas.filter((r) => r.healthy)) {
        const remote = await replica.client.tokenize(TOKENIZER_PROBE);
        if (remote.length !== local.length || remote.some((t, i) => t !== local[i]))
          throw new AppError(
            "unavailable",
            `The upstream ${replica.client.url} serves a model with another tokenizer than ${options.modelPath} (it serves ${replica.modelPath || "an unnamed model"}). ` +
              `Give --model the GGUF the upstream serves.`,
            { code: "upstream_model_mismatch" },
          );
      }
      const wrappers = resolveChatWrappers(model);
      const syntax = resolvePromptSyntax(model, wrappers.thinking);
      const engine = new UpstreamEngine(model, wrappers, syntax, new GrammarCache(runtime.llama), pool, options, size);
      options.log?.(
        "info",
        `Upstream engine: ${pool.replicas.map((r) => `${r.client.url} (${r.healthy ? `${r.slots} slot(s) of ${r.contextSize} tokens` : `down: ${r.error}`})`).join(", ")}; ` +
          `prompts rendered here with ${wrappers.thinking.wrapperName}${syntax.thought ? ", thoughts" : ""}${syntax.toolCall ? ", tool calls" : ""}.`,
      );
      return engine;
    } catch (err) {
      pool.close();
      await model.dispose().catch(() => undefined);
      throw err;
    }
  }

  status(): EngineStatus {
    if (this.closed) return { state: "no_model", model: null, gpu: null, error: null };
    const contextSize = this.pool.contextSize();
    const first = this.pool.replicas.find((r) => r.healthy) ?? this.pool.replicas[0]!;
    const info: LoadedModelInfo = {
      path: this.options.modelPath,
      name: this.model.fileInfo.metadata?.general?.name ?? basename(first.modelPath || this.options.modelPath),
      sizeBytes: this.sizeBytes,
      trainContextSize: this.model.trainContextSize,
      contextSize,
      sequences: this.pool.capacity(),
      threads: 0,
      maxOutputTokens: contextSize - CONTEXT_MARGIN,
      maxTokenChars: longestTokenChars((this.model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: readonly string[] } } }).tokenizer?.ggml?.tokens),
      upstreams: this.pool.replicas.map((r) => ({ url: r.client.url, healthy: r.healthy, slots: r.slots, contextSize: r.contextSize, model: r.modelPath, error: r.error })),
    };
    return { state: "ready", model: info, gpu: null, error: null };
  }

  onCapacityChange(listener: () => void): () => void {
    return this.pool.onChange(listener);
  }

  async countPromptTokens(request: EngineRequest): Promise<number> {
    return (await this.render(request, this.budget())).length;
  }

  async *generate(request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent, void, void> {
    if (this.closed) throw new AppError("unavailable", "The upstream engine is closing.", { retryAfter: 5 });
    const budget = this.budget(signal);
    let promptTokens: Token[];
    try {
      promptTokens = await this.render(request, budget);
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
    const contextSize = this.pool.contextSize();
    const room = contextSize - promptTokens.length - CONTEXT_MARGIN;
    if (room < 1) throw contextTooLong(contextSize, promptTokens.length);
    const grammars = await this.grammars.compile(request, this.syntax);
    if (request.tokenProbabilities && (grammars.answer || grammars.toolNames))
      // llama-server reports probabilities before its grammar and bans (n_probs): under a grammar they would
      // not be what the local engine reports (the probability among the tokens allowed), so they are refused.
      throw new AppError(
        "invalid_request",
        "Token probabilities (logprobs, confidence, refusal_mode) with constrained output (json_schema, json_object or callable tools) " +
          "are not available on this server's upstream engine: llama-server reports probabilities before its grammar. Ask for one or the other.",
        { code: "upstream_unsupported" },
      );
    const breakpointEnd = request.cacheBreakpoints?.length
      ? await cacheBreakpointOffset((messages, tools) => this.render({ ...request, messages, tools }, budget), promptTokens, request.messages, request.tools, request.cacheBreakpoints)
      : 0;
    if (signal.aborted) return;
    const lease = await this.pool.acquire(promptTokens, request.sessionId, signal);
    /** What the slot holds of this generation: the prompt, and every token fed or sampled since. */
    const held: Token[] = [];
    const cache = { tokens: 0, known: false };
    const both = AbortSignal.any([signal, lease.signal]);
    try {
      const generation = runGeneration({
        model: this.model,
        syntax: this.syntax,
        request,
        promptTokens,
        cachedTokens: 0,
        heldTokens: 0,
        maxCompletionTokens: Math.min(request.maxTokens ?? Number.POSITIVE_INFINITY, room),
        grammars,
        signal: both,
        evaluate: (tokens, metadata, options, more, constraints) => this.phase(lease, held, tokens, metadata, options, more, constraints, request, cache, both, promptTokens.length),
      });
      for await (const event of generation) {
        // The upstream says how much of the prompt its cache held (before the first token comes).
        if (event.type === "start") yield { ...event, cachedTokens: cache.tokens, ...(breakpointEnd > 0 ? { cacheWriteTokens: Math.max(0, breakpointEnd - cache.tokens) } : {}) };
        else if (event.type === "done") {
          const usage = { ...event.outcome.usage, cachedTokens: cache.tokens, ...(breakpointEnd > 0 ? { cacheWriteTokens: Math.max(0, breakpointEnd - cache.tokens) } : {}) };
          yield { ...event, outcome: { ...event.outcome, usage } };
        } else yield event;
      }
      if (lease.signal.aborted && !signal.aborted) throw lease.signal.reason as Error;
    } catch (err) {
      if (err instanceof UpstreamDownError) this.pool.drain(lease.replica, err.message);
      if (lease.signal.aborted && !signal.aborted) throw lease.signal.reason as Error;
      throw err;
    } finally {
      lease.release(held);
    }
  }

  /** One phase: the fed tokens appended, then the upstream's sampled tokens until the state machine stops reading. */
  private async *phase(
    lease: SlotLease,
    held: Token[],
    feed: Token[],
    metadata: TokenMetadata,
    options: SequenceEvaluateOptions,
    more: () => number,
    constraints: PhaseConstraints,
    request: EngineRequest,
    cache: { tokens: number; known: boolean },
    signal: AbortSignal,
    promptLength: number,
  ): AsyncGenerator<SampledToken, void, unknown> {
    held.push(...feed);
    const first = !cache.known;
    const penalties = options.repeatPenalty || undefined;
    const scoring = metadata.confidence === true;
    const body: Record<string, unknown> = {
      prompt: held,
      id_slot: lease.slot,
      cache_prompt: true,
      return_tokens: true,
      return_progress: first,
      // No cap: the state machine stops reading at its budget and the connection closes (llama-server then
      // cancels the task). A cap would end a grammar phase early, and a grammar cannot resume mid-phase.
      n_predict: -1,
      // node-llama-cpp's sampling defaults, so an answer is the same here and on the local engine.
      temperature: options.temperature ?? 0,
      top_k: options.topK ?? 40,
      top_p: options.topP ?? 0.95,
      min_p: 0,
      typical_p: 1,
      repeat_penalty: 1,
      repeat_last_n: penalties ? 256 : 0,
      frequency_penalty: penalties ? penalties.frequencyPenalty : 0,
      presence_penalty: penalties ? penalties.presencePenalty : 0,
      dry_multiplier: 0,
      xtc_probability: 0,
      // Greedy (temperature 0) takes the first of equal logits in token order, as llama.cpp's greedy sampler does
      // on the local engine: nothing may sort the candidates before it (top_k would, and ties would then differ).
      samplers: [...(penalties ? ["penalties"] : []), ...((options.temperature ?? 0) > 0 ? ["top_k", "top_p", "min_p", "temperature"] : ["temperature"])],
      ...(options.seed !== undefined ? { seed: options.seed } : {}),
      ...(constraints.grammar ? { grammar: constraints.grammar.grammar } : {}),
      ...(constraints.banned.size > 0 ? { logit_bias: [...constraints.banned].map((t) => [t, false]) } : {}),
      // The model's own log-probabilities (temperature 1, before the sampler chain), as token-probabilities.ts reports them.
      ...(scoring ? { n_probs: Math.max(1, Math.min(20, request.tokenProbabilities?.top ?? 0)), post_sampling_probs: false } : {}),
    };
    const controller = new AbortController();
    const onAbort = () => controller.abort();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      // A request the upstream ended at its own cap (llama-server --n-predict) goes on with another on the same
      // slot, for free text; a grammar cannot resume mid-phase, so there the phase ends.
      for (;;) {
        let sampled = 0;
        let stop: string | undefined;
        // As on a local sequence, a sampled token is evaluated (held) once the next is asked for: the last one
        // a phase reads is not, and the state machine feeds it again where it belongs (a closing marker, a call's
        // trigger) or not at all (an end-of-generation token).
        let unheld: Token | null = null;
        for await (const chunk of lease.replica.client.complete({ ...body, prompt: held }, controller.signal)) {
          // llama-server reports it before the first token; vLLM in the usage chunk at the end (when the phase runs to it).
          if (chunk.cached !== undefined && first && !cache.known) {
            // What it reports held counts forced tokens after the prompt too, and llama-server evaluates the
            // prompt's last token again however much it holds (as the local engine does): the rest was cached.
            cache.tokens = Math.max(0, Math.min(chunk.cached, promptLength - 1));
            cache.known = true;
          }
          for (const [i, id] of chunk.tokens.entries()) {
            const token = id as Token;
            if (unheld !== null) held.push(unheld);
            unheld = token;
            sampled++;
            const p = chunk.probs?.[i];
            yield p ? { token, score: { logprob: p.logprob, top: p.top.map((t) => ({ token: t.id as Token, logprob: t.logprob })) } } : { token };
          }
          if (chunk.stopType !== undefined) stop = chunk.stopType;
        }
        // llama-server streams the end-of-generation token itself; where it did not, it stands in.
        if (stop === "eos" && (unheld === null || !this.model.isEogToken(unheld))) yield { token: this.eog };
        if (stop !== "limit" || sampled === 0 || signal.aborted || constraints.grammar || more() <= 0) return;
        if (unheld !== null) held.push(unheld);
        body.return_progress = false;
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      controller.abort();
      cache.known = true;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.pool.close();
    await this.model.dispose();
  }

  private budget(signal?: AbortSignal) {
    return { maxTokens: this.pool.contextSize(), deadline: performance.now() + (this.options.tokenizeTimeoutMs ?? TOKENIZE_TIMEOUT_MS), signal };
  }

  private async render(request: EngineRequest, budget: ReturnType<UpstreamEngine["budget"]>): Promise<Token[]> {
    const wrapper = request.mode === "fast" ? this.wrappers.fast : this.wrappers.thinking;
    try {
      return await tokenizeWithin(renderPromptText(wrapper, request.messages, request.tools), this.model.tokenizer, budget);
    } catch (err) {
      if (err instanceof PromptTooLongError) throw contextTooLong(budget.maxTokens, err.estimatedTokens);
      if (err instanceof TokenizeDeadlineError)
        throw new AppError("invalid_request", "Reading the prompt into tokens took too long, so it was stopped. Shorten the messages.", {
          code: "prompt_too_complex",
          param: "messages",
        });
      throw err;
    }
  }
}

function contextTooLong(contextSize: number, promptTokens: number): AppError {
  return new AppError(
    "invalid_request",
    `The upstream's context is ${contextSize} tokens per slot, but the prompt is ${promptTokens} tokens. Nothing is truncated: shorten the conversation, or start the upstream with a longer context per slot (llama-server -c is shared by its --parallel slots).`,
    { code: "context_length_exceeded", param: "messages", details: { context_size: contextSize, prompt_tokens: promptTokens } },
  );
}
