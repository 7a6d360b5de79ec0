// One place where an AppError becomes a response: each surface plugin installs the handler for its own
// vendor's error format (Fastify error handlers are encapsulated per plugin), and the 404 policy picks the
// format from the path. The pipeline and the engine name the fields of the internal request in their errors
// (INTERNAL_PARAMS); each surface gives its own names for them (WireParams), put in the error here and in its
// stream encoder, so an error names the field of the surface that was called.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { AppError } from "../core/errors.js";
import { encodeAnthropicError } from "./anthropic-errors.js";
import { encodeOpenAIError } from "./openai-errors.js";
import { fastifyErrorToAppError } from "./fastify-errors.js";

export type ErrorFormat = "openai" | "anthropic";

/**
 * The field names the pipeline and the engine put in an error's `param`: the conversation, the output's
 * schema, and a tool's parameter schema (`tools[i].schema`, i the tool's index).
 */
export const INTERNAL_PARAMS = { input: "messages", outputSchema: "output_schema", toolSchema: "tools[i].schema" } as const;

/** A surface's names for the internal params (keys: INTERNAL_PARAMS' values; `[i]` stands for any index). */
export type WireParams = Readonly<Record<(typeof INTERNAL_PARAMS)[keyof typeof INTERNAL_PARAMS], string>>;

/** The error with its param in the surface's words; an error naming anything else is returned as it is. */
export function withWireParam(error: AppError, params: WireParams | undefined): AppError {
  if (params === undefined || error.param === undefined) return error;
  const index = /\[(\d+)\]/.exec(error.param)?.[1];
  const key = index === undefined ? error.param : error.param.replace(`[${index}]`, "[i]");
  if (!Object.hasOwn(params, key)) return error;
  const param = params[key as keyof WireParams].replace("[i]", `[${index}]`);
  if (param === error.param) return error;
  return new AppError(error.kind, error.message, { code: error.code, param, details: error.details, retryAfter: error.retryAfter, cause: error });
}

/** Paths under /v1/messages speak Anthropic's error format; every other path OpenAI's. */
export function errorFormatOf(path: string): ErrorFormat {
  return path === "/v1/messages" || path.startsWith("/v1/messages/") ? "anthropic" : "openai";
}

export type ErrorLog = (request: FastifyRequest, error: unknown, appError: AppError) => void;

export function sendError(request: FastifyRequest, reply: FastifyReply, error: AppError, format: ErrorFormat): FastifyReply {
  if (error.retryAfter !== undefined) reply.header("retry-after", String(Math.max(1, Math.ceil(error.retryAfter))));
  if (request.ctx) request.ctx.errorCode = error.code ?? error.kind;
  reply.code(error.status).type("application/json; charset=utf-8");
  return reply.send(format === "anthropic" ? encodeAnthropicError(error, request.id) : encodeOpenAIError(error));
}

/** An error handler answering in one format (with a surface's param names), or in the format the request's path picks. */
export function errorHandler(format: ErrorFormat | ((request: FastifyRequest) => ErrorFormat), log: ErrorLog, params?: WireParams) {
  return (error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const appError = fastifyErrorToAppError(error);
    // The connection is gone (the client left, or a deadline answered and closed it): nobody reads this
    // answer, and a stream cut short (an upload's "aborted") is no fault of the server's: not a 5xx.
    if (appError.status >= 500 && !request.raw.socket?.destroyed) log(request, error, appError);
    return sendError(request, reply, withWireParam(appError, params), typeof format === "function" ? format(request) : format);
  };
}

/** Installs the error handler of one surface (or feature) plugin; `params`: the surface's names for internal params. */
export function useErrorFormat(scope: FastifyInstance, format: ErrorFormat, log: ErrorLog, params?: WireParams): void {
  scope.setErrorHandler(errorHandler(format, log, params));
}

export function notFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const path = request.url.split("?")[0]!;
  const message =
    path.startsWith("/v1/") || path === "/health"
      ? `Unknown endpoint: ${request.method} ${path}.`
      : `Not found: only /v1/* and /health are served (got ${path}).`;
  return sendError(request, reply, new AppError("not_found", message, { code: "not_found" }), errorFormatOf(path));
}
