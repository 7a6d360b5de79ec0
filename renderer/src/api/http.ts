// The API as the window calls it, like any client: over HTTP with the window's own key (asked of the main
// process; a key revoked elsewhere is replaced once, here and nowhere else), errors read into one type.
import type { AnthropicErrorBody, ContextErrorFacts, OpenAIErrorBody } from "../../../server/features/console/wire";
import { ConsoleCallError, consoleApi } from "../console-client";

/** An error answer of the API (or no answer: status 0), with the facts the window puts in its own words. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | null,
    readonly context: ContextErrorFacts | null = null,
    readonly requestId: string | null = null,
  ) {
    super(message);
  }
}

/** Reads an error body in either format (OpenAI's on most paths, Anthropic's under /v1/messages). */
export function apiErrorOf(status: number, body: string, requestId: string | null = null): ApiError {
  try {
    const parsed = JSON.parse(body) as Partial<OpenAIErrorBody> & Partial<AnthropicErrorBody>;
    const error = parsed.error as (OpenAIErrorBody["error"] & AnthropicErrorBody["error"]) | undefined;
    if (error?.message) {
      const code = error.code ?? error.details?.error_code ?? null;
      const context = error.svc_context ?? error.details?.svc_context ?? null;
      return new ApiError(error.message, status, code, context, parsed.request_id ?? requestId);
    }
  } catch {
    // not JSON
  }
  return new ApiError(status === 0 ? "The server could not be reached." : `The server answered ${status}.`, status, null, null, requestId);
}

/**
 * Calls the API with the window's key. A 401 means the key was revoked outside the window: the main process
 * makes a new one and the call runs once more. While the window's account is disabled, the main process
 * refuses a key (ConsoleCallError, code window_account_disabled).
 */
export async function withWindowKey<T>(call: (key: string) => Promise<T>, refused: (err: unknown) => boolean = (err) => err instanceof ApiError && err.status === 401): Promise<T> {
  try {
    return await call(await consoleApi.windowKey());
  } catch (err) {
    if (!refused(err)) throw err;
    return call(await consoleApi.windowKey());
  }
}

export function isWindowAccountDisabled(err: unknown): boolean {
  return err instanceof ConsoleCallError && err.code === "window_account_disabled";
}

export const LOCAL_TIMEZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

/** A JSON call to `url` (the server's base address plus the path) with the window's key. */
export async function apiJson<T>(url: string, init: RequestInit = {}): Promise<T> {
  return withWindowKey(async (key) => {
    let res: Response;
    try {
      res = await fetch(url, {
        ...init,
        headers: { authorization: `Bearer ${key}`, "x-api-key": key, "anthropic-version": "2023-06-01", "x-timezone": LOCAL_TIMEZONE, ...init.headers },
      });
    } catch {
      throw apiErrorOf(0, "");
    }
    const body = await res.text();
    if (!res.ok) throw apiErrorOf(res.status, body, res.headers.get("x-request-id"));
    return (body ? JSON.parse(body) : null) as T;
  });
}
