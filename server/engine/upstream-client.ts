// One upstream inference server over HTTP, in one of two dialects, found at start (props()):
// - llama-server (llama.cpp's tools/server/README.md): GET /health, GET /props (slots, context per slot, model),
//   POST /tokenize, and POST /completion streamed with the prompt as token ids, `grammar`, `n_probs`, `id_slot`.
// - vLLM (its OpenAI-compatible server): GET /health, GET /v1/models (max_model_len), POST /tokenize, and
//   POST /v1/completions streamed with the prompt as token ids, `structured_outputs.grammar`, `logprobs` with
//   `return_tokens_as_token_ids`, and `prompt_tokens_details.cached_tokens` in the usage chunk.
// The engine speaks llama-server's body; complete() translates it for vLLM. Errors are AppErrors that say which
// upstream failed and how (its own message where it gave one).
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { AppError } from "../core/errors.js";

export interface UpstreamTarget {
  /** Base URL, e.g. http://10.0.0.5:8080 (no trailing slash needed). */
  url: string;
  /** Sent as `Authorization: Bearer KEY` (llama-server's --api-key). */
  key?: string;
}

export interface UpstreamProps {
  /** Parallel slots (--parallel). */
  slots: number;
  /** Context per slot, tokens. */
  contextSize: number;
  /** The model file the upstream serves, as it names it. */
  modelPath: string;
  build: string;
}

/** One streamed step of /completion: sampled tokens (with log-probabilities when asked), or the end. */
export interface CompletionChunk {
  tokens: number[];
  /** Per token, when n_probs > 0: its log-probability and the most likely alternatives'. */
  probs?: Array<{ id: number; logprob: number; top: Array<{ id: number; logprob: number }> }>;
  /** Prompt tokens served from the slot's cache (from the progress report or the final timings). */
  cached?: number;
  /** Set on the last chunk: eos (end of generation token), limit (n_predict), word (a stop string). */
  stopType?: "eos" | "limit" | "word" | "none";
}

/** The upstream could not be reached or broke off: the replica is suspect (upstream-pool.ts drains it). */
export class UpstreamDownError extends AppError {
  constructor(
    readonly url: string,
    message: string,
    cause?: unknown,
  ) {
    super("unavailable", message, { code: "upstream_unavailable", retryAfter: 2, cause });
  }
}

const CONNECT_TIMEOUT_MS = 10_000;

/**
 * One HTTP request on a connection of its own (Connection: close). fetch's pooled keep-alive connections were
 * seen to stall llama-server: a stream request on a connection a finished /props had left idle was taken as
 * closed by it, cancelled at once, and never answered, while its HTTP threads waited on the idle ones.
 */
function send(url: string, method: "GET" | "POST", headers: Record<string, string>, body: string | undefined, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const request = (url.startsWith("https:") ? httpsRequest : httpRequest)(url, {
      method,
      headers: { ...headers, connection: "close", ...(body !== undefined ? { "content-length": Buffer.byteLength(body) } : {}) },
      agent: false,
      signal,
    });
    request.once("response", resolve);
    request.once("error", reject);
    request.end(body);
  });
}

async function readAll(res: IncomingMessage): Promise<string> {
  let text = "";
  res.setEncoding("utf8");
  for await (const piece of res) text += piece as string;
  return text;
}

export type UpstreamDialect = "llama-server" | "vllm";

/**
 * Generations a vLLM replica is given at once: vLLM batches far more (its --max-num-seqs, 256 by default) but
 * does not publish the figure, so this is ours to bound (docs/scale-out.md).
 */
export const VLLM_SLOTS = 8;

export class UpstreamClient {
  readonly url: string;
  private readonly headers: Record<string, string>;
  dialect: UpstreamDialect = "llama-server";
  /** vLLM: the served model's name (requests must name it) and its context. */
  private served = { model: "", contextSize: 0 };

  constructor(target: UpstreamTarget) {
    this.url = target.url.replace(/\/+$/, "");
    this.headers = { "content-type": "application/json", ...(target.key ? { authorization: `Bearer ${target.key}` } : {}) };
  }

  /** Whether it answers /health with 200 (a model loaded) within the timeout. */
  async healthy(timeoutMs = 2000): Promise<boolean> {
    try {
      const res = await send(`${this.url}/health`, "GET", this.headers, undefined, AbortSignal.timeout(timeoutMs));
      res.resume();
      return res.statusCode === 200;
    } catch {
      return false;
    }
  }

  async props(): Promise<UpstreamProps> {
    let raw: unknown;
    try {
      raw = await this.json("GET", "/props");
    } catch (err) {
      // No /props: a vLLM server answers /v1/models with the context it serves.
      if (err instanceof AppError && err.code === "upstream_unsupported") return this.vllmProps();
      throw err;
    }
    this.dialect = "llama-server";
    const body = raw as {
      total_slots?: number;
      model_path?: string;
      build_info?: string;
      default_generation_settings?: { n_ctx?: number };
    };
    const slots = body.total_slots ?? 1;
    const contextSize = body.default_generation_settings?.n_ctx;
    if (typeof contextSize !== "number") throw new AppError("unavailable", `${this.url}/props does not say the context size: is it a llama-server?`, { code: "upstream_unsupported" });
    return { slots, contextSize, modelPath: body.model_path ?? "", build: body.build_info ?? "" };
  }

  private async vllmProps(): Promise<UpstreamProps> {
    const body = (await this.json("GET", "/v1/models")) as { data?: Array<{ id?: string; max_model_len?: number; root?: string }> };
    const model = body.data?.[0];
    if (!model?.id || typeof model.max_model_len !== "number")
      throw new AppError("unavailable", `${this.url} has neither llama-server's /props nor vLLM's /v1/models with max_model_len.`, { code: "upstream_unsupported" });
    this.dialect = "vllm";
    this.served = { model: model.id, contextSize: model.max_model_len };
    return { slots: VLLM_SLOTS, contextSize: model.max_model_len, modelPath: model.root ?? model.id, build: "vllm" };
  }

  /** The upstream's tokens for text (special tokens parsed, none added). */
  async tokenize(content: string): Promise<number[]> {
    if (this.dialect === "vllm") {
      const body = (await this.json("POST", "/tokenize", { model: this.served.model, prompt: content, add_special_tokens: false })) as { tokens?: number[] };
      return body.tokens ?? [];
    }
    const body = (await this.json("POST", "/tokenize", { content, add_special: false, parse_special: true })) as { tokens?: number[] };
    return body.tokens ?? [];
  }

  /**
   * POST /completion with stream: true, yielding sampled tokens as they come. Ends after the chunk with the
   * stop type. Aborting `signal` (or returning early) closes the connection; llama-server then stops the task.
   */
  async *complete(body: Record<string, unknown>, signal: AbortSignal): AsyncGenerator<CompletionChunk, void, void> {
    const vllm = this.dialect === "vllm";
    const path = vllm ? "/v1/completions" : "/completion";
    const payload = vllm ? this.vllmBody(body) : { ...body, stream: true };
    let res: IncomingMessage;
    try {
      res = await send(`${this.url}${path}`, "POST", this.headers, JSON.stringify(payload), signal);
    } catch (err) {
      if (signal.aborted) return;
      throw this.down(err);
    }
    if (res.statusCode !== 200) throw await this.failure(res);
    res.setEncoding("utf8");
    let buffer = "";
    try {
      for await (const piece of res) {
        buffer += piece as string;
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          // vLLM's stream ends with [DONE], after the usage chunk that follows the finish.
          if (vllm && /^data: \[DONE\]/m.test(event)) return;
          const chunk = vllm ? this.parseVllmEvent(event) : this.parseEvent(event);
          if (!chunk) continue;
          yield chunk;
          if (chunk.stopType !== undefined && !vllm) return;
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof AppError) throw err;
      throw this.down(err);
    } finally {
      res.destroy();
    }
    if (signal.aborted) return;
    throw new UpstreamDownError(this.url, `The upstream ${this.url} closed the stream before the generation ended.`);
  }

  /** llama-server's /completion body as vLLM's /v1/completions takes it. */
  private vllmBody(body: Record<string, unknown>): Record<string, unknown> {
    const prompt = body.prompt as number[];
    const temperature = (body.temperature as number | undefined) ?? 0;
    const bans = (body.logit_bias as Array<[number, false]> | undefined) ?? [];
    return {
      model: this.served.model,
      prompt,
      stream: true,
      stream_options: { include_usage: true },
      // No cap of its own (the engine stops reading at its budget): what the context leaves.
      max_tokens: Math.max(1, this.served.contextSize - prompt.length),
      temperature,
      top_p: temperature > 0 ? body.top_p : 1,
      top_k: temperature > 0 ? body.top_k : -1,
      min_p: 0,
      repetition_penalty: 1,
      frequency_penalty: body.frequency_penalty ?? 0,
      presence_penalty: body.presence_penalty ?? 0,
      ...(body.seed !== undefined ? { seed: body.seed } : {}),
      // Token ids, not text: the sampled tokens come back as "token_id:N" in the log-probabilities.
      logprobs: Math.max(0, (body.n_probs as number | undefined) ?? 0),
      return_tokens_as_token_ids: true,
      skip_special_tokens: false,
      spaces_between_special_tokens: false,
      ...(bans.length > 0 ? { logit_bias: Object.fromEntries(bans.map(([t]) => [String(t), -100])) } : {}),
      ...(body.grammar ? { structured_outputs: { grammar: body.grammar } } : {}),
    };
  }

  private parseVllmEvent(event: string): CompletionChunk | null {
    const data = sseData(event);
    if (!data) return null;
    const raw = JSON.parse(data) as {
      error?: { message?: string; code?: number };
      choices?: Array<{
        finish_reason?: string | null;
        stop_reason?: number | string | null;
        logprobs?: { tokens?: string[]; token_logprobs?: Array<number | null>; top_logprobs?: Array<Record<string, number> | null> } | null;
      }>;
      usage?: { prompt_tokens_details?: { cached_tokens?: number } | null } | null;
    };
    if (raw.error) throw new AppError(raw.error.code === 400 ? "invalid_request" : "unavailable", `The upstream ${this.url} failed the generation: ${raw.error.message ?? "no reason given"}`, { code: "upstream_error" });
    const idOf = (token: string): number => {
      const m = /^token_id:(\d+)$/.exec(token);
      if (!m) throw new AppError("unavailable", `The upstream ${this.url} sent a token as text ('${token}'), not as its id: it must support return_tokens_as_token_ids (vLLM 0.6 or later).`, { code: "upstream_unsupported" });
      return Number(m[1]);
    };
    const chunk: CompletionChunk = { tokens: [] };
    const choice = raw.choices?.[0];
    const lp = choice?.logprobs;
    if (lp?.tokens) {
      chunk.tokens = lp.tokens.map(idOf);
      chunk.probs = lp.tokens.map((t, i) => ({
        id: chunk.tokens[i]!,
        logprob: lp.token_logprobs?.[i] ?? 0,
        top: Object.entries(lp.top_logprobs?.[i] ?? {})
          .map(([k, v]) => ({ id: idOf(k), logprob: v }))
          .sort((a, b) => b.logprob - a.logprob),
      }));
    }
    const cached = raw.usage?.prompt_tokens_details?.cached_tokens;
    if (typeof cached === "number") chunk.cached = cached;
    // The end of generation: "stop" with no stop string is the model's end-of-sequence token.
    if (choice?.finish_reason) chunk.stopType = choice.finish_reason === "length" ? "limit" : choice.finish_reason === "stop" && choice.stop_reason == null ? "eos" : "word";
    return chunk.tokens.length > 0 || chunk.cached !== undefined || chunk.stopType ? chunk : null;
  }

  private parseEvent(event: string): CompletionChunk | null {
    const data = sseData(event);
    if (!data) return null;
    const raw = JSON.parse(data) as {
      error?: { message?: string; code?: number };
      tokens?: number[];
      stop?: boolean;
      stop_type?: CompletionChunk["stopType"];
      prompt_progress?: { cache?: number };
      completion_probabilities?: Array<{ id: number; logprob: number; top_logprobs?: Array<{ id: number; logprob: number }> }>;
      timings?: { cache_n?: number };
    };
    if (raw.error) throw new AppError(raw.error.code === 400 ? "invalid_request" : "unavailable", `The upstream ${this.url} failed the generation: ${raw.error.message ?? "no reason given"}`, { code: "upstream_error" });
    // Progress reports carry no sampled token (their `tokens` is a placeholder).
    if (raw.prompt_progress) return { tokens: [], cached: raw.prompt_progress.cache };
    const chunk: CompletionChunk = { tokens: raw.stop ? [] : (raw.tokens ?? []) };
    if (raw.completion_probabilities)
      chunk.probs = raw.completion_probabilities.map((p) => ({ id: p.id, logprob: p.logprob, top: (p.top_logprobs ?? []).map((t) => ({ id: t.id, logprob: t.logprob })) }));
    if (raw.stop) {
      chunk.stopType = raw.stop_type ?? "none";
      if (raw.timings?.cache_n !== undefined) chunk.cached = raw.timings.cache_n;
    }
    return chunk;
  }

  private async json(method: "GET" | "POST", path: string, body?: unknown): Promise<unknown> {
    let res: IncomingMessage;
    let text: string;
    try {
      res = await send(`${this.url}${path}`, method, this.headers, body === undefined ? undefined : JSON.stringify(body), AbortSignal.timeout(CONNECT_TIMEOUT_MS));
      if (res.statusCode !== 200) throw await this.failure(res);
      text = await readAll(res);
    } catch (err) {
      if (err instanceof AppError) throw err;
      throw this.down(err);
    }
    return JSON.parse(text);
  }

  private down(err: unknown): UpstreamDownError {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? (err as Error).message;
    return new UpstreamDownError(this.url, `The upstream ${this.url} did not answer (${why}).`, err);
  }

  /** An HTTP error from the upstream, as the client's error where it is the request's fault. */
  private async failure(res: IncomingMessage): Promise<AppError> {
    const text = await readAll(res).catch(() => "");
    const status = res.statusCode ?? 0;
    let message = text.slice(0, 500);
    try {
      message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
    } catch {
      // Not JSON: the text as it came.
    }
    if (status === 401 || status === 403)
      // Read by API clients and shown in the window (Server › Upstream engines, where the key is set): it names
      // the key's setting, not a flag of one of the ways to set it.
      return new AppError(
        "unavailable",
        `The upstream ${this.url} refused this server's key (HTTP ${status}): set the key it was started with in the upstream engines' settings.`,
        { code: "upstream_unauthorized" },
      );
    if (status === 400) return new AppError("invalid_request", `The upstream ${this.url} refused the request: ${message}`, { code: "upstream_rejected" });
    if (status === 404 || status === 501)
      return new AppError("unavailable", `The upstream ${this.url} has no such endpoint (HTTP ${status}: ${message}); is it a llama-server?`, { code: "upstream_unsupported" });
    return new UpstreamDownError(this.url, `The upstream ${this.url} answered HTTP ${status}: ${message}`);
  }
}

/** The data of one server-sent event (its `data:` lines joined). */
function sseData(event: string): string {
  return event
    .split("\n")
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(5).trimStart())
    .join("\n");
}
