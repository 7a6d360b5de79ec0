// Shared by every surface's routes: cancel generation when the client goes, and pump canonical events
// through a surface's stream encoder into SSE.
import type { FastifyReply } from "fastify";
import { toAppError, type AppError } from "../core/errors.js";
import type { InferenceEvent } from "../core/inference.js";
import type { InferenceStream } from "../pipeline/pipeline.js";
import { SseResponse } from "./sse.js";

export interface StreamEncoder {
  push(event: InferenceEvent): string[];
  error(err: AppError): string[];
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

/**
 * Sends a started run as SSE. Errors after the first byte go out through the encoder (an error frame /
 * event); a client that leaves stops the run.
 */
export async function sendEventStream(reply: FastifyReply, stream: InferenceStream, encoder: StreamEncoder): Promise<void> {
  const sse = new SseResponse(reply, headersOf(reply));
  sse.open();
  try {
    for await (const event of stream) {
      for (const frame of encoder.push(event)) await sse.write(frame);
      if (sse.closed) break;
    }
  } catch (err) {
    const appError = toAppError(err);
    if (appError.status >= 500) reply.log.error({ err }, "stream failed");
    for (const frame of encoder.error(appError)) await sse.write(frame);
  } finally {
    sse.end();
  }
}
