// Builds the Fastify app as plugins in a fixed order:
//   1. CORS (browsers on this machine and the desktop window),
//   2. the request context (id, area, timing, Host check, observers such as the audit),
//   3. body parsing and the 404 policy,
//   4. the keyless endpoints (/health, /v1/messages/_health, /v1/models), and the account holders' console
//      (/v1/console: a session cookie of its own, never an API key),
//   5. the key scope: one auth hook (key per surface, X-Timezone), the rate headers, then one plugin per
//      surface or feature, each with its own error format.
import { freemem, totalmem } from "node:os";
import { basename } from "node:path";
import cors from "@fastify/cors";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { listWarmPrefixes } from "./engine/warm-start.js";
import { AppError } from "./core/errors.js";
import { newId } from "./core/ids.js";
import { hasConsoleSession, registerConsoleRoutes } from "./features/accounts/console-routes.js";
import { registerAgentRoutes } from "./features/agent/routes.js";
import { registerAuditRoutes } from "./features/audit/audit-routes.js";
import { registerBatchRoutes } from "./features/batches/routes.js";
import { registerFilesRoutes } from "./features/files/routes.js";
import { CHAT_PARAMS } from "./surfaces/chat/params.js";
import { registerChatRoutes } from "./surfaces/chat/routes.js";
import { MESSAGES_PARAMS } from "./surfaces/messages/params.js";
import { RESPONSES_PARAMS } from "./surfaces/responses/params.js";
import { registerResponsesCompactRoutes } from "./surfaces/responses/compact-routes.js";
import { registerMessagesRoutes } from "./surfaces/messages/routes.js";
import { modelObject } from "./surfaces/models.js";
import { registerResponsesRoutes } from "./surfaces/responses/routes.js";
import { keyIsValid, requireKey } from "./http/auth.js";
import { bodyWasRefused, readJsonBody } from "./http/body-limits.js";
import { ConnectionGuard } from "./http/connection-guard.js";
import { connectionOptions, resolveConnectionLimits, type ConnectionLimits } from "./http/connection-limits.js";
import type { ServerDeps } from "./features/server-deps.js";
import { errorFormatOf, errorHandler, notFound, useErrorFormat, type ErrorLog, type WireParams } from "./http/errors.js";
import { describeError } from "./http/inference.js";
import { rateHeaders } from "./http/limits.js";
import { isLoopbackAddress, MachineNames } from "./http/lan.js";
import { LARGE_BODY_BYTES, releaseAfterLargeBody } from "./http/memory.js";
import { hostAllowed, requestContext } from "./http/request-context.js";
import type { SpeculationCounts } from "./engine/types.js";

export const BODY_LIMIT_BYTES = 50 * 1024 * 1024;

export interface AppOptions {
  /**
   * "loopback": only Host headers naming this machine by a loopback name are served (DNS-rebinding guard);
   * "lan": LAN exposure, where this machine's own names and addresses (and `extraHosts`) are served too.
   */
  allowedHosts?: "loopback" | "lan";
  /** With "lan": further host names clients use for this machine (--allowed-hosts). */
  extraHosts?: readonly string[];
  logger?: boolean | Record<string, unknown>;
  /** Browser origins allowed besides the default ones (see corsOriginAllowed); "*" allows every origin. */
  corsOrigins?: readonly string[];
  /** Connection deadlines, cap and shares; unset ones take DEFAULT_CONNECTION_LIMITS. */
  connections?: Partial<ConnectionLimits>;
}

/**
 * Which web pages may call the API from a browser. By default: pages served from this machine (localhost,
 * 127.x, [::1], *.localhost, any port) and the desktop app's own window (app://). A page elsewhere still
 * needs a key, but without CORS it cannot even try; SVC_CORS_ORIGINS adds origins, "*" allows all.
 */
export function corsOriginAllowed(origin: string, extra: readonly string[] = []): boolean {
  if (extra.includes("*") || extra.includes(origin)) return true;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  if (url.protocol === "app:") return true;
  if (url.protocol !== "http:" && url.protocol !== "https:") return false;
  return hostAllowed(url.host);
}

/** A plugin registered inside the key scope, answering errors in the given format. */
export type KeyedPlugin = (scope: FastifyInstance, deps: ServerDeps) => Promise<void>;

export async function buildApp(deps: ServerDeps, options: AppOptions = {}): Promise<FastifyInstance> {
  const limits = resolveConnectionLimits(options.connections);
  const app = Fastify({
    ...connectionOptions(limits, deps.log),
    logger: options.logger ?? false,
    bodyLimit: BODY_LIMIT_BYTES,
    genReqId: () => newId("req_"),
    requestIdHeader: false,
    // Requests that arrive while the server closes get our 503 (below): the surface's format, and logged.
    return503OnClosing: false,
    forceCloseConnections: "idle",
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false } },
  });
  // The cap is shared out per client, keeping room for /health and key holders (connection-guard.ts).
  const guard = new ConnectionGuard(
    { maxConnections: limits.maxConnections, perClient: limits.perClientConnections, idlePerClient: limits.idleConnectionsPerClient },
    deps.log,
  );
  guard.attach(app.server);

  const logError: ErrorLog = (request: FastifyRequest, error: unknown, appError: AppError) => {
    const line = `${request.id} ${request.method} ${request.url.split("?")[0]} → ${appError.status}: ${describeError(error)}`;
    if (deps.log) deps.log("error", line);
    else request.log.error({ err: error }, "request failed");
  };

  // 1. CORS
  await app.register(cors, {
    origin: (origin, callback) => callback(null, origin === undefined || corsOriginAllowed(origin, options.corsOrigins)),
    methods: ["GET", "POST", "DELETE", "OPTIONS"],
    exposedHeaders: ["x-request-id", "request-id", "retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-run-id"],
    maxAge: 600,
    strictPreflight: false,
  });

  // 2. Request context
  const machine = options.allowedHosts === "lan" ? new MachineNames(options.extraHosts) : null;
  requestContext(app, {
    allowedHosts: machine ?? "loopback",
    observers: deps.observers ?? [],
    onObserverError: (err) => deps.log?.("error", `A request observer failed: ${describeError(err)}`),
  });
  // A connection beyond its client's share serves /health, key holders and console sessions only.
  app.addHook("onRequest", (request, reply, done) => {
    const socket = request.raw.socket;
    if (!guard.isOverShare(socket)) return done();
    const path = request.ctx.path;
    if (path === "/health" || path === "/v1/messages/_health") return done();
    if (keyIsValid(request, deps) || (request.ctx.area === "console" && hasConsoleSession(request, deps.accounts))) {
      guard.trust(socket);
      return done();
    }
    reply.header("connection", "close");
    done(guard.turnAway(socket));
  });
  let closing = false;
  app.addHook("preClose", async () => void (closing = true));
  app.addHook("onRequest", (request, reply, done) => {
    if (closing) return done(new AppError("unavailable", "The server is shutting down; retry in a moment.", { code: "shutting_down", retryAfter: 5 }));
    // A large body's memory is given back once such requests stop coming (memory.ts); one refused by its
    // bytes was never put together, and leaves nothing for a full collection to free.
    const length = Number(request.headers["content-length"]);
    if (length >= LARGE_BODY_BYTES) reply.raw.once("close", () => bodyWasRefused(request) || releaseAfterLargeBody(length));
    done();
  });

  // 3. Parsing and the 404 policy. Every JSON body's bytes are checked for its depth and its number of values
  // as they arrive, before it is parsed (body-limits.ts). Clients that forget the Content-Type (curl -d sends
  // form encoding) still send JSON; parse it as such.
  const parseJson = app.getDefaultJsonParser("error", "error");
  const limitOf = (request: FastifyRequest) => request.routeOptions.bodyLimit ?? BODY_LIMIT_BYTES;
  app.removeContentTypeParser(["application/json", "text/plain"]);
  app.addContentTypeParser("application/json", (request, payload, done) =>
    readJsonBody(request, payload, limitOf(request), (text, parsed) => parseJson(request, text, parsed), done),
  );
  app.addContentTypeParser("*", (request, payload, done) =>
    readJsonBody(
      request,
      payload,
      limitOf(request),
      (text, parsed) => {
        if (text.trim() === "") return parsed(null, undefined);
        try {
          parsed(null, JSON.parse(text));
        } catch {
          parsed(new AppError("invalid_request", "We could not parse the JSON body of your request. Send valid JSON.", { code: "invalid_json" }), undefined);
        }
      },
      done,
    ),
  );
  // Errors outside any surface plugin (the Host check on a keyless path, CORS): the path's format.
  app.setErrorHandler(errorHandler((request) => errorFormatOf(request.url), logError));
  app.setNotFoundHandler(notFound);

  // 4. Keyless endpoints
  const health = async () => {
    const status = deps.engineHost.status();
    const files = deps.engineHost.files();
    const queue = deps.pipeline.scheduler.stats();
    // Free memory as of now (the model's own status holds the figures from when it loaded).
    const gpu = await deps.engineHost.gpuNow();
    return {
      status: "ok",
      version: deps.version,
      model: {
        state: status.state,
        name: status.model?.name ?? null,
        // Only the file name: the probe needs no key, and the path would show the user's folders.
        file: files.current ? basename(files.current) : null,
        loading_file: files.pending ? basename(files.pending) : null,
        context_size: status.model?.contextSize ?? null,
        sequences: status.model?.sequences ?? null,
        threads: status.model?.threads ?? null,
        gpu_layers: status.model?.gpuLayers ?? null,
        kv_cache: status.model?.kvCache ?? null,
        // The vision process (a model with a projector): where it runs; null for a text-only model.
        vision: status.model?.vision
          ? {
              projector: basename(status.model.vision.projector),
              devices: status.model.vision.devices,
              gpu_layers: status.model.vision.gpuLayers,
              note: status.model.vision.note ?? null,
            }
          : null,
        // Why coding agents' requests will not fit, and what would help (null when they fit).
        context_note: status.model?.contextNote ?? null,
        // With --upstream: each inference server, whether it serves now, its slots, and why it is drained.
        ...(status.model?.upstreams ? { upstreams: status.model.upstreams } : {}),
        error: status.error,
      },
      // Warm start (opt-in): which prompt prefixes are saved, to be restored after a restart.
      warm_start: status.model?.warmStart
        ? {
            enabled: true,
            min_tokens: status.model.warmStart.minTokens,
            prefixes: listWarmPrefixes(status.model.warmStart.dir).map((p) => ({ tokens: p.tokens, bytes: p.bytes, last_used: Math.floor(p.lastUsed / 1000) })),
          }
        : { enabled: false },
      gpu: gpu
        ? {
            backend: gpu.backend,
            devices: gpu.devices,
            vram_total_bytes: gpu.vramTotalBytes,
            vram_free_bytes: gpu.vramFreeBytes,
            skipped: gpu.skipped ?? [],
            build: gpu.build ?? null,
            // Which build of ours, with "local": "full" (llama.cpp compiled here) or "addon" (our addon alone).
            local_build: gpu.localBuild ?? null,
          }
        : null,
      // Prompt lookup's guesses since the server started (docs/api.md, "Speculation"); null without a model of
      // the built-in engine's.
      speculation: speculationBody(deps.engineHost.speculation()),
      memory: { ram_total_bytes: totalmem(), ram_free_bytes: freemem() },
      requests: {
        active: queue.running,
        queued: queue.waiting,
        by_class: queue.byClass,
        account_limit: deps.pipeline.scheduler.accountLimit(),
        queue_limit: deps.pipeline.scheduler.maxQueue,
      },
    };
  };
  // Other machines (LAN exposure) learn only whether the model serves, unless they show a key.
  const probe = async (request: FastifyRequest) => {
    if (isLoopbackAddress(request.ip) || keyIsValid(request, deps)) return health();
    return { status: deps.engineHost.status().state === "ready" ? "ok" : "loading" };
  };
  app.get("/health", probe);
  app.get("/v1/messages/_health", probe);
  const loadedModel = () => modelObject(deps.engineHost.status().model);
  app.get("/v1/models", async () => ({ object: "list", data: [loadedModel()] }));
  app.get("/v1/models/:model", async (request) => {
    const { model } = request.params as { model: string };
    const found = loadedModel();
    if (model !== found.id && model !== "svc")
      throw new AppError("not_found", `The model '${model}' does not exist.`, { code: "model_not_found", param: "model" });
    return found;
  });

  await app.register(async (scope) => registerConsoleRoutes(scope, deps, logError));

  // 5. Key endpoints
  // Each surface names the internal request's fields in its own words (its WireParams); the agent takes
  // Responses' input, batches hold Messages requests.
  const surfaces: Array<[KeyedPlugin, "openai" | "anthropic", WireParams?]> = [
    [registerChatRoutes, "openai", CHAT_PARAMS],
    [registerResponsesRoutes, "openai", RESPONSES_PARAMS],
    [registerResponsesCompactRoutes, "openai", RESPONSES_PARAMS],
    [registerMessagesRoutes, "anthropic", MESSAGES_PARAMS],
    [registerAuditRoutes, "openai"],
    [registerBatchRoutes, "anthropic", MESSAGES_PARAMS],
    [registerFilesRoutes, "openai"],
    [registerAgentRoutes, "openai", RESPONSES_PARAMS],
  ];
  await app.register(async (keyed) => {
    requireKey(keyed, deps);
    rateHeaders(keyed, deps.pipeline.scheduler);
    for (const [plugin, format, params] of surfaces)
      await keyed.register(async (scope) => {
        useErrorFormat(scope, format, logError, params);
        await plugin(scope, deps);
      });
  });
  return app;
}

/** /health's `speculation` (docs/api.md, "Health"): EngineHost.speculation() in the wire's names. */
function speculationBody(counts: SpeculationCounts | null) {
  if (!counts) return null;
  const { mode, draftModel, draftedTokens, acceptedTokens, acceptanceRate } = counts;
  return { mode, draft_model: draftModel, drafted_tokens: draftedTokens, accepted_tokens: acceptedTokens, acceptance_rate: acceptanceRate };
}
