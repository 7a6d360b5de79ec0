// The one error type below the surfaces. Each surface maps `kind` to its vendor's status and body in one place.

export type AppErrorKind =
  | "invalid_request" // 400
  | "authentication" // 401
  | "permission" // 403
  | "not_found" // 404
  | "conflict" // 409
  | "payload_too_large" // 413
  | "unprocessable" // 422
  | "rate_limit" // 429
  | "internal" // 500
  | "unavailable"; // 503

export const STATUS_OF_KIND: Record<AppErrorKind, number> = {
  invalid_request: 400,
  authentication: 401,
  permission: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  unprocessable: 422,
  rate_limit: 429,
  internal: 500,
  unavailable: 503,
};

export interface AppErrorOptions {
  /** Machine-readable code, e.g. invalid_api_key, context_length_exceeded. */
  code?: string;
  /** The request parameter at fault, as the client named it (e.g. "messages[2].role"). */
  param?: string;
  /** Seconds; sent as Retry-After on 429 and 503. */
  retryAfter?: number;
  details?: Record<string, unknown>;
  cause?: unknown;
}

export class AppError extends Error {
  readonly kind: AppErrorKind;
  readonly code: string | undefined;
  readonly param: string | undefined;
  readonly retryAfter: number | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(kind: AppErrorKind, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "AppError";
    this.kind = kind;
    this.code = options.code;
    this.param = options.param;
    this.retryAfter = options.retryAfter;
    this.details = options.details;
  }

  get status(): number {
    return STATUS_OF_KIND[this.kind];
  }
}

export function invalidRequest(message: string, param?: string, code = "invalid_request"): AppError {
  return new AppError("invalid_request", message, { param, code });
}

export function isAppError(value: unknown): value is AppError {
  return value instanceof AppError;
}

/** Anything thrown below the surfaces becomes an AppError; unknown failures are internal (500). */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  return new AppError("internal", "The server had an error while processing the request.", { code: "internal_error", cause: err });
}

/** A list longer than its bound (docs/api.md, "Limits on lists"): a 400 naming the list and the limit. */
export function tooManyItems(param: string, limit: number): AppError {
  return new AppError("invalid_request", `'${param}' has more than ${limit} items, the limit.`, { param, code: "too_many_items" });
}
