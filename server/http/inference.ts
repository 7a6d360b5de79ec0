// The one way an HTTP surface runs an inference: open it on the pipeline (the scheduler admits it or says
// 429), then either collect the result into one body or stream the events through the surface's encoder.
//
// Streams commit to "200 text/event-stream" lazily: at the first event, or once the request has waited
// KEEPALIVE_MS for a sequence or for its prompt to be read, so that clients with idle timeouts see a comment
// instead of silence. Until then any failure is a plain HTTP error in the surface's format; after it, the
// encoder's error frame. A client that leaves stops the run: while waiting it leaves the queue, while
// generating it frees its sequence within a token.
import type { FastifyReply, FastifyRequest } from "fastify";
import { AppError, invalidRequest, toAppError } from "../core/errors.js";
import type { InferenceEvent, InferenceRequest, InferenceResult } from "../core/inference.js";
import type { InferenceStream } from "../pipeline/pipeline.js";
import type { RequestContext } from "../core/request-context.js";
import type { HttpDeps } from "./context.js";
import { setRateHeaders } from "./limits.js";
import { KEEPALIVE_MS, SseResponse, WRITE_TIMEOUT_MS } from "./sse.js";

export interface StreamEncoder {
  push(event: InferenceEvent): string[];
  error(err: AppError): string[];
}

export interface InferenceCall {
  inference: InferenceRequest;
  /** The model name the client sent (for the audit record). */
  model?: string;
  stream: boolean;
  /** A fresh encoder for this stream. */
  encoder: () => StreamEncoder;
  /** The non-streaming body. */
  encode: (result: InferenceResult) => unknown;
}

/** Aborts when the client closes the connection before the response is complete. */
export function abortOnDisconnect(reply: FastifyReply): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const onClose = () => {
    if (!reply.raw.writableEnded) controller.abort(new Error("client disconnected"));
  };
  reply.raw.on("close", onClose);
  return { signal: controller.signal, dispose: () => reply.raw.off("close", onClose) };
}

function headersOf(reply: FastifyReply): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) out[name] = String(value);
  return out;
}

export function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? ` (cause: ${err.cause.stack ?? err.cause.message})` : "";
  return `${err.stack ?? err.message}${cause}`;
}

function cancelled(): AppError {
  return new AppError("invalid_request", "The request was cancelled.", { code: "cancelled" });
}

/** Notes what the run did (mode, timings, usage) on the request's context; never any content. */
function observe(ctx: RequestContext, event: InferenceEvent): void {
  if (event.type === "start") ctx.inference.mode = event.mode;
  else if (event.type === "done") {
    ctx.inference.usage = event.result.usage;
    ctx.inference.stopReason = event.result.stopReason;
  } else if (ctx.inference.ttftMs === undefined) ctx.inference.ttftMs = performance.now() - ctx.startedAt;
}

/**
 * X-Image-Input (docs/api.md, "Images"): "vision" forbids the OCR fallback (a model that cannot see images
 * is then a 400); "auto", the default, lets a text-only model read images with OCR.
 */
export function parseImageInput(header: string | string[] | undefined): "vision" | "auto" {
  const value = ((Array.isArray(header) ? header[0] : header) ?? "").trim().toLowerCase();
  if (value === "" || value === "auto") return "auto";
  if (value === "vision") return "vision";
  throw invalidRequest(`The X-Image-Input header must be 'vision' or 'auto' (got '${value}').`, "X-Image-Input", "invalid_image_input");
}

export async function serveInference(request: FastifyRequest, reply: FastifyReply, deps: HttpDeps, call: InferenceCall): Promise<unknown> {
  const ctx = request.ctx;
  const principal = ctx.principal;
  if (!principal) throw new AppError("internal", "An inference route ran without authentication.");
  ctx.inference.model = call.model;
  ctx.inference.sessionId = call.inference.sessionId;
  const scheduler = deps.pipeline.scheduler;
  const disconnect = abortOnDisconnect(reply);
  const writeDeadline = {
    ms: deps.streamWriteTimeoutMs ?? WRITE_TIMEOUT_MS,
    onTimeout: () =>
      deps.log?.("warn", `${ctx.id} ${ctx.method} ${ctx.path}: the client read nothing for ${(deps.streamWriteTimeoutMs ?? WRITE_TIMEOUT_MS) / 1000} s; its stream was closed and its sequence freed.`),
  };
  const sse = call.stream
    ? new SseResponse(reply, () => {
        setRateHeaders(reply, scheduler, principal.accountId);
        return headersOf(reply);
      }, deps.sseKeepAliveMs, writeDeadline)
    : null;
  const waiting = sse ? setTimeout(() => void sse.write(": keepalive\n\n"), deps.sseKeepAliveMs ?? KEEPALIVE_MS) : null;
  try {
    let stream: InferenceStream;
    try {
      stream = await deps.pipeline.open(call.inference, {
        signal: disconnect.signal,
        accountId: principal.accountId,
        workClass: ctx.workClass,
        imageInput: parseImageInput(request.headers["x-image-input"]),
      });
    } catch (err) {
      if (!sse?.isOpen) throw err;
      return await failStream(sse, call.encoder(), ctx, err, deps);
    } finally {
      if (waiting) clearTimeout(waiting);
    }
    ctx.inference.queuedMs = stream.queuedMs;
    if (sse) return await pumpStream(sse, stream, call.encoder(), ctx, deps);
    let result: InferenceResult | null = null;
    // Read to the end, not just to `done`: the run then has given its sequence back, so the rate headers
    // sent with this body count it as finished.
    for await (const event of stream) {
      observe(ctx, event);
      if (event.type === "done") result = event.result;
    }
    if (!result) throw cancelled();
    return call.encode(result);
  } finally {
    disconnect.dispose();
  }
}

async function pumpStream(sse: SseResponse, stream: InferenceStream, encoder: StreamEncoder, ctx: RequestContext, deps: HttpDeps): Promise<void> {
  try {
    for await (const event of stream) {
      observe(ctx, event);
      for (const frame of encoder.push(event)) await sse.write(frame);
      if (sse.closed) break;
    }
  } catch (err) {
    return failStream(sse, encoder, ctx, err, deps);
  } finally {
    sse.end();
  }
}

async function failStream(sse: SseResponse, encoder: StreamEncoder, ctx: RequestContext, err: unknown, deps: HttpDeps): Promise<void> {
  const appError = toAppError(err);
  ctx.errorCode = appError.code ?? appError.kind;
  if (appError.status >= 500) deps.log?.("error", `${ctx.id} ${ctx.method} ${ctx.path}: stream failed: ${describeError(err)}`);
  for (const frame of encoder.error(appError)) await sse.write(frame);
  sse.end();
}
