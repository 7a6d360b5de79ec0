// The Anthropic error body ({"type": "error", "error": {type, message}, "request_id"}) for the Messages surface.
import type { AppError, AppErrorKind } from "../core/errors.js";

export interface AnthropicErrorBody {
  type: "error";
  error: { type: string; message: string };
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

export function encodeAnthropicError(err: AppError, requestId: string): AnthropicErrorBody {
  const message = err.param && !err.message.includes(err.param) ? `${err.param}: ${err.message}` : err.message;
  return { type: "error", error: { type: TYPE_OF_KIND[err.kind], message }, request_id: requestId };
}
