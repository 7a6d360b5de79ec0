// What the HTTP layer and the surfaces' routes need from the rest of the server: the pipeline, the key check,
// the engine's host and the stream settings. The features' own services join these in ServerDeps
// (server/features/server-deps.ts), which the composition root (server/index.ts) builds. The request's own
// context (RequestContext) lives in server/core/request-context.ts, where every layer may see it.
import type { Log } from "../core/log.js";
import type { Principal, RequestContext, RequestObserver } from "../core/request-context.js";
import type { EngineHost } from "../engine/engine-host.js";
import type { InferencePipeline } from "../pipeline/pipeline.js";

/** Checks a presented API key: the principal it belongs to, or an authentication AppError. */
export interface KeyCheck {
  authenticate(presented: string | undefined): Principal;
}

export interface HttpDeps {
  pipeline: InferencePipeline;
  keys: KeyCheck;
  engineHost: EngineHost;
  version: string;
  /** Sees every finished request: the audit feature records key requests here. */
  observers?: RequestObserver[];
  /** How long a stream may wait (queue, prompt) before its first keep-alive comment; default KEEPALIVE_MS. */
  sseKeepAliveMs?: number;
  /** A stream whose client reads nothing for this long is closed, freeing its sequence; default WRITE_TIMEOUT_MS. */
  streamWriteTimeoutMs?: number;
  /** The server's log; every 5xx is written here with its request id. */
  log?: Log;
}

declare module "fastify" {
  interface FastifyRequest {
    ctx: RequestContext;
  }
}
