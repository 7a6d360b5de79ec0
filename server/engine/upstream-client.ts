// One upstream inference server over HTTP, in llama-server's dialect (llama.cpp's tools/server/README.md):
// GET /health, GET /props (slots, context per slot, model), POST /tokenize, and POST /completion streamed as
// server-sent events with the prompt as token ids. Only what the upstream engine needs; errors are AppErrors
// that say which upstream failed and how (its own message where it gave one).
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

export class UpstreamClient {
  readonly url: string;
  private readonly headers: Record<string, string>;

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
    const body = (await this.json("GET", "/props")) as {
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

  /** The upstream's tokens for text (special tokens parsed, none added). */
  async tokenize(content: string): Promise<number[]> {
    const body = (await this.json("POST", "/tokenize", { content, add_special: false, parse_special: true })) as { tokens?: number[] };
    return body.tokens ?? [];
  }

  /**
   * POST /completion with stream: true, yielding sampled tokens as they come. Ends after the chunk with the
   * stop type. Aborting `signal` (or returning early) closes the connection; llama-server then stops the task.
   */
  async *complete(body: Record<string, unknown>, signal: AbortSignal): AsyncGenerator<CompletionChunk, void, void> {
    let res: IncomingMessage;
    try {
      res = await send(`${this.url}/completion`, "POST", this.headers, JSON.stringify({ ...body, stream: true }), signal);
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
          const chunk = this.parseEvent(event);
          if (!chunk) continue;
          yield chunk;
          if (chunk.stopType !== undefined) return;
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

  private parseEvent(event: string): CompletionChunk | null {
    const data = event
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).trimStart())
      .join("\n");
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
      return new AppError("unavailable", `The upstream ${this.url} refused this server's key (HTTP ${status}): check --upstream-key.`, { code: "upstream_unauthorized" });
    if (status === 400) return new AppError("invalid_request", `The upstream ${this.url} refused the request: ${message}`, { code: "upstream_rejected" });
    if (status === 404 || status === 501)
      return new AppError("unavailable", `The upstream ${this.url} has no such endpoint (HTTP ${status}: ${message}); is it a llama-server?`, { code: "upstream_unsupported" });
    return new UpstreamDownError(this.url, `The upstream ${this.url} answered HTTP ${status}: ${message}`);
  }
}
