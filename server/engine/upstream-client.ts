// One upstream inference server over HTTP, in llama-server's dialect (llama.cpp's tools/server/README.md):
// GET /health, GET /props (slots, context per slot, model), POST /tokenize, and POST /completion streamed as
// server-sent events with the prompt as token ids. Only what the upstream engine needs; errors are AppErrors
// that say which upstream failed and how (its own message where it gave one).
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
      const res = await fetch(`${this.url}/health`, { headers: this.headers, signal: AbortSignal.timeout(timeoutMs) });
      await res.body?.cancel();
      return res.ok;
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
    let res: Response;
    try {
      res = await fetch(`${this.url}/completion`, { method: "POST", headers: this.headers, body: JSON.stringify({ ...body, stream: true }), signal });
    } catch (err) {
      if (signal.aborted) return;
      throw this.down(err);
    }
    if (!res.ok) throw await this.failure(res);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        let read: Awaited<ReturnType<typeof reader.read>>;
        try {
          read = await reader.read();
        } catch (err) {
          if (signal.aborted) return;
          throw this.down(err);
        }
        if (read.done) {
          if (signal.aborted) return;
          throw new UpstreamDownError(this.url, `The upstream ${this.url} closed the stream before the generation ended.`);
        }
        buffer += read.value;
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
    } finally {
      await reader.cancel().catch(() => undefined);
    }
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
    let res: Response;
    try {
      res = await fetch(`${this.url}${path}`, {
        method,
        headers: this.headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(CONNECT_TIMEOUT_MS),
      });
    } catch (err) {
      throw this.down(err);
    }
    if (!res.ok) throw await this.failure(res);
    return res.json();
  }

  private down(err: unknown): UpstreamDownError {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? (err as Error).message;
    return new UpstreamDownError(this.url, `The upstream ${this.url} did not answer (${why}).`, err);
  }

  /** An HTTP error from the upstream, as the client's error where it is the request's fault. */
  private async failure(res: Response): Promise<AppError> {
    const text = await res.text().catch(() => "");
    let message = text.slice(0, 500);
    try {
      message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
    } catch {
      // Not JSON: the text as it came.
    }
    if (res.status === 401 || res.status === 403)
      return new AppError("unavailable", `The upstream ${this.url} refused this server's key (HTTP ${res.status}): check --upstream-key.`, { code: "upstream_unauthorized" });
    if (res.status === 400) return new AppError("invalid_request", `The upstream ${this.url} refused the request: ${message}`, { code: "upstream_rejected" });
    if (res.status === 404 || res.status === 501)
      return new AppError("unavailable", `The upstream ${this.url} has no such endpoint (HTTP ${res.status}: ${message}); is it a llama-server?`, { code: "upstream_unsupported" });
    return new UpstreamDownError(this.url, `The upstream ${this.url} answered HTTP ${res.status}: ${message}`);
  }
}
