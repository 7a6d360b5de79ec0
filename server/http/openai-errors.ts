// The OpenAI error body ({"error": {message, type, param, code}}), shared by the Chat and Responses
// surfaces and by paths that belong to no surface.
import type { AppError, AppErrorKind } from "../core/errors.js";

export interface OpenAIErrorBody {
  /** svc_context: a context_length_exceeded error's facts (context-advice.ts, docs/api.md "Context length"). */
  error: { message: string; type: string; param: string | null; code: string | null; svc_context?: unknown };
}

const TYPE_OF_KIND: Record<AppErrorKind, string> = {
  invalid_request: "invalid_request_error",
  authentication: "authentication_error",
  permission: "permission_error",
  not_found: "invalid_request_error",
  conflict: "invalid_request_error",
  payload_too_large: "invalid_request_error",
  unprocessable: "invalid_request_error",
  rate_limit: "rate_limit_error",
  internal: "server_error",
  unavailable: "server_error",
};

const DEFAULT_CODE: Record<AppErrorKind, string> = {
  invalid_request: "invalid_request",
  authentication: "invalid_api_key",
  permission: "permission_denied",
  not_found: "not_found",
  conflict: "conflict",
  payload_too_large: "request_too_large",
  unprocessable: "unprocessable_entity",
  rate_limit: "rate_limit_exceeded",
  internal: "internal_error",
  unavailable: "service_unavailable",
};

export function encodeOpenAIError(err: AppError): OpenAIErrorBody {
  return {
    error: {
      message: err.message,
      type: TYPE_OF_KIND[err.kind],
      param: err.param ?? null,
      code: err.code ?? DEFAULT_CODE[err.kind],
      ...(err.details?.svc_context ? { svc_context: err.details.svc_context } : {}),
    },
  };
}
