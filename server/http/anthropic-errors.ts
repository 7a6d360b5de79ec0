// The Anthropic error body for the Messages surface:
// {"type": "error", "error": {type, message, details: {error_code, param?}}, "request_id"}.
import type { AppError, AppErrorKind } from "../core/errors.js";

export interface AnthropicErrorBody {
  type: "error";
  error: { type: string; message: string; details?: { error_code: string; param?: string; errors?: unknown[]; svc_context?: unknown } };
  request_id: string;
}

const TYPE_OF_KIND: Record<AppErrorKind, string> = {
  invalid_request: "invalid_request_error",
  authentication: "authentication_error",
  permission: "permission_error",
  not_found: "not_found_error",
  conflict: "invalid_request_error",
  payload_too_large: "request_too_large",
  unprocessable: "invalid_request_error",
  rate_limit: "rate_limit_error",
  internal: "api_error",
  unavailable: "overloaded_error",
};

/**
 * The message names the parameter at fault (Anthropic bodies have no `param` field); `details.error_code`
 * carries our machine-readable code, which the 1.x SDK exposes as `err.errorCode` (codes it does not know
 * leave the error class chosen by status).
 */
export function encodeAnthropicError(err: AppError, requestId: string): AnthropicErrorBody {
  const message = err.param && !err.message.includes(err.param) ? `${err.param}: ${err.message}` : err.message;
  // details.errors: one entry per bad item when a request fails for several (a batch's invalid requests).
  const errors = Array.isArray(err.details?.errors) ? { errors: err.details.errors as unknown[] } : {};
  const context = err.details?.svc_context ? { svc_context: err.details.svc_context } : {};
  const details = err.code ? { error_code: err.code, ...(err.param ? { param: err.param } : {}), ...errors, ...context } : undefined;
  return { type: "error", error: { type: TYPE_OF_KIND[err.kind], message, ...(details ? { details } : {}) }, request_id: requestId };
}
