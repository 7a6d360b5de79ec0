// Turns what a failed download threw (a network error deep in a fetch, an HTTP status, a library message)
// into one sentence a person can act on. Pure.
import { AppError } from "../../core/errors.js";

const NETWORK_REASONS: Record<string, string> = {
  ENOTFOUND: "its name does not resolve",
  EAI_AGAIN: "its name could not be looked up (DNS is not answering)",
  ECONNREFUSED: "the connection was refused",
  ECONNRESET: "the connection was cut",
  EPIPE: "the connection was cut",
  ETIMEDOUT: "the connection timed out",
  ENETUNREACH: "the network is unreachable",
  EHOSTUNREACH: "the host is unreachable",
  ENETDOWN: "the network is down",
  UND_ERR_CONNECT_TIMEOUT: "the connection timed out",
  UND_ERR_SOCKET: "the connection was cut",
  UND_ERR_HEADERS_TIMEOUT: "the server did not answer in time",
  CERT_HAS_EXPIRED: "its TLS certificate has expired",
  DEPTH_ZERO_SELF_SIGNED_CERT: "its TLS certificate is self-signed",
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "its TLS certificate cannot be verified",
};

/** The first error code (ECONNREFUSED, ...) found along an error's cause chain. */
export function findErrorCode(err: unknown): string | undefined {
  for (let e = err as { code?: unknown; cause?: unknown; errors?: unknown[] } | undefined, depth = 0; e && depth < 8; depth++) {
    if (typeof e.code === "string" && e.code) return e.code;
    if (Array.isArray(e.errors)) for (const inner of e.errors) {
      const code = findErrorCode(inner);
      if (code) return code;
    }
    e = e.cause as typeof e;
  }
  return undefined;
}

function findStatusCode(err: unknown): number | undefined {
  for (let e = err as { statusCode?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 8; depth++) {
    if (typeof e.statusCode === "number") return e.statusCode;
    e = e.cause as typeof e;
  }
  return undefined;
}

export function networkError(host: string, code: string): AppError {
  const reason = NETWORK_REASONS[code] ?? `the connection failed (${code})`;
  return new AppError(
    "unavailable",
    `Cannot reach ${host}: ${reason}. Check the network connection, then run the same command again (a partial download resumes).`,
    { code: "network_unreachable", details: { host, error: code } },
  );
}

/** One readable AppError for anything a download threw. */
export function describeDownloadError(err: unknown, context: { source: string; host: string }): AppError {
  if (err instanceof AppError) return err;
  const code = findErrorCode(err);
  if (code && (code in NETWORK_REASONS || /^E[A-Z]+$/.test(code)) && code !== "ENOSPC" && code !== "EACCES" && code !== "EPERM")
    return networkError(context.host, code);
  if (code === "ENOSPC") return new AppError("internal", "The disk is full: free some space, then run the same command again to resume.", { code: "disk_full" });
  if (code === "EACCES" || code === "EPERM")
    return new AppError("internal", `Cannot write the model file (${code}): check the permissions of the data dir.`, { code: "write_failed" });
  const status = findStatusCode(err);
  if (status === 401 || status === 403)
    return new AppError(
      "permission",
      `${context.host} refused the download of ${context.source} (HTTP ${status}). A gated Hugging Face repository needs a token: accept its terms on the website and set HF_TOKEN.`,
      { code: "download_forbidden" },
    );
  if (status === 404) return new AppError("not_found", `${context.source} was not found: ${context.host} answered HTTP 404.`, { code: "model_source_not_found" });
  if (status !== undefined) return new AppError("unavailable", `${context.host} answered HTTP ${status} for ${context.source}; try again later.`, { code: "download_failed" });
  const message = (err as Error)?.message ?? String(err);
  if (/Cannot get quantization|does not exist/i.test(message))
    return new AppError("not_found", `${context.source} was not found on Hugging Face: no such repository, or no file with that quantisation.`, {
      code: "model_source_not_found",
    });
  if (/Invalid Hugging Face URI/i.test(message)) return new AppError("invalid_request", `${context.source} is not a valid hf: URI.`, { code: "invalid_model_source" });
  return new AppError("unavailable", `The download of ${context.source} failed: ${message}`, { code: "download_failed", cause: err });
}
