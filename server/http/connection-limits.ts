// Deadlines and a cap for connections, whatever the key: a client that sends its headers or body too
// slowly, that never finishes its body, or that keeps an idle connection, is cut off, and errors at this
// level (before a request exists) still get a JSON error body. How the cap is shared out among clients is
// in connection-guard.ts; stream write deadlines are in sse.ts.
import type { IncomingMessage, ServerOptions, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { FastifyServerOptions } from "fastify";
import { AppError } from "../core/errors.js";
import { encodeOpenAIError } from "./openai-errors.js";
import { noteRawAnswer, requestIdOf } from "./raw-answers.js";

export interface ConnectionLimits {
  /** To receive the request line and headers. */
  headersTimeoutMs: number;
  /** To receive the whole request, body included (a stream's response may then take as long as it needs). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** Connections at once, all clients together (connection-guard.ts shares them out). */
  maxConnections: number;
  /** Connections one client (an address; this machine is one) may hold that serve every request; default a quarter of maxConnections. */
  perClientConnections: number;
  /** Idle keep-alive connections one client may keep. */
  idleConnectionsPerClient: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 30_000,
  requestTimeoutMs: 60_000,
  keepAliveTimeoutMs: 30_000,
  maxConnections: 1024,
  perClientConnections: 256,
  idleConnectionsPerClient: 64,
};

/** The defaults, with the values given (unset and undefined ones keep their default). */
export function resolveConnectionLimits(given: Partial<ConnectionLimits> = {}): ConnectionLimits {
  const out = { ...DEFAULT_CONNECTION_LIMITS };
  for (const key of Object.keys(out) as Array<keyof ConnectionLimits>) if (given[key] !== undefined) out[key] = given[key];
  if (given.perClientConnections === undefined) out.perClientConnections = Math.max(1, Math.floor(out.maxConnections / 4));
  return out;
}

/** Where a request cut at the connection level is said (the server's log). */
export type CutLog = (level: "info", message: string) => void;

/** The Fastify (and node:http) options that enforce the limits; node checks the deadlines every `interval`. */
export function connectionOptions(
  limits: ConnectionLimits,
  log?: CutLog,
): Pick<FastifyServerOptions, "requestTimeout" | "keepAliveTimeout" | "clientErrorHandler"> & { http: ServerOptions } {
  const headersTimeout = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  const interval = Math.max(100, Math.min(2000, Math.round(headersTimeout / 10)));
  return {
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    http: { headersTimeout, requestTimeout: limits.requestTimeoutMs, connectionsCheckingInterval: interval },
    clientErrorHandler: (err, socket) => answerClientError(err as NodeJS.ErrnoException, socket, limits, log),
  };
}

/** Fastify's default answer to errors before a request exists, with an OpenAI-shape body that says why. */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket, limits: ConnectionLimits, log?: CutLog): void {
  // The client left (a reset, or the end of its side of the connection before its request was complete):
  // there is nobody to answer, and the request context records the request as the client's abort.
  if (err.code === "ECONNRESET" || err.code === "HPE_INVALID_EOF_STATE" || socket.destroyed) {
    socket.destroy();
    return;
  }
  let status = 400;
  let error: AppError;
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    status = 408;
    error = new AppError(
      "invalid_request",
      `The request was not received in full within ${Math.round(limits.requestTimeoutMs / 1000)} s (or its headers within ` +
        `${Math.round(Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 1000)} s), so the connection was closed.`,
      { code: "request_timeout" },
    );
  } else if (err.code === "HPE_HEADER_OVERFLOW") {
    status = 431;
    error = new AppError("invalid_request", "The request headers are too large.", { code: "headers_too_large" });
  } else error = new AppError("invalid_request", "The request is not valid HTTP.", { code: "bad_request" });
  // The response of a request whose headers arrived (its body did not): the audit records this answer, and
  // the answer carries the request's id. One already under way (the client never finished the body of a
  // request answered early, such as a 401): only close.
  const res = (socket as Socket & { _httpMessage?: ServerResponse & { req?: IncomingMessage } })._httpMessage;
  const started = res?.headersSent === true;
  const id = res ? requestIdOf(res) : undefined;
  if (res && !started) {
    noteRawAnswer(res, status, error.code ?? "invalid_request");
    if (id) log?.("info", `${id} ${res.req?.method ?? ""} ${res.req?.url?.split("?")[0] ?? ""} → ${status}: ${error.message}`);
  }
  if (socket.writable && !started) {
    const body = JSON.stringify(encodeOpenAIError(error));
    socket.write(
      `HTTP/1.1 ${status} ${status === 408 ? "Request Timeout" : status === 431 ? "Request Header Fields Too Large" : "Bad Request"}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        (id ? `X-Request-Id: ${id}\r\nRequest-Id: ${id}\r\n` : "") +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
