// Builds the Fastify app: request ids, the host check, body parsing and limits, the 404 policy, the
// keyless endpoints, and one plugin per surface (each with its own error format).
import { freemem, totalmem } from "node:os";
import { basename } from "node:path";
import cors from "@fastify/cors";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { AppError } from "../core/errors.js";
import { isLoopbackHost } from "../core/loopback.js";
import { newId } from "../core/ids.js";
import { registerFilesRoutes } from "../features/files/routes.js";
import { registerChatRoutes } from "../surfaces/chat/routes.js";
import { registerResponsesRoutes } from "../surfaces/responses/routes.js";
import { registerMessagesRoutes } from "../surfaces/messages/routes.js";
import { encodeAnthropicError } from "../surfaces/anthropic-errors.js";
import { modelObject } from "../surfaces/models.js";
import { encodeOpenAIError } from "../surfaces/openai-errors.js";
import type { ServerDeps } from "./context.js";
import { fastifyErrorToAppError } from "./fastify-errors.js";

export const BODY_LIMIT_BYTES = 50 * 1024 * 1024;

export interface AppOptions {
  /** "loopback": only Host headers naming this machine are served (DNS-rebinding guard); "any": LAN exposure. */
  allowedHosts?: "loopback" | "any";
  logger?: boolean | Record<string, unknown>;
  /** Browser origins allowed besides the default ones (see corsOriginAllowed); "*" allows every origin. */
  corsOrigins?: readonly string[];
}

function hostAllowed(hostHeader: string | undefined): boolean {
  if (!hostHeader) return true; // HTTP/1.0 clients; nothing to rebind
  let host = hostHeader.trim().toLowerCase();
  if (host.startsWith("[")) host = host.slice(0, host.indexOf("]") + 1);
  else host = host.replace(/:\d+$/, "");
  return isLoopbackHost(host);
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

/** Which error format a path speaks: the Messages surface's, or OpenAI's (everything else). */
export function sendError(request: FastifyRequest, reply: FastifyReply, error: AppError): FastifyReply {
  if (error.retryAfter !== undefined) reply.header("retry-after", String(Math.ceil(error.retryAfter)));
  reply.code(error.status).type("application/json; charset=utf-8");
  if (request.url.startsWith("/v1/messages")) return reply.send(encodeAnthropicError(error, request.id));
  return reply.send(encodeOpenAIError(error));
}

export async function buildApp(deps: ServerDeps, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: BODY_LIMIT_BYTES,
    genReqId: () => newId("req_"),
    requestIdHeader: false,
    return503OnClosing: true,
    forceCloseConnections: "idle",
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false } },
  });

  app.decorateRequest("principal", null);

  await app.register(cors, {
    origin: (origin, callback) => callback(null, origin === undefined || corsOriginAllowed(origin, options.corsOrigins)),
    methods: ["GET", "POST", "DELETE", "OPTIONS"],
    exposedHeaders: ["x-request-id", "request-id", "retry-after"],
    maxAge: 600,
    strictPreflight: false,
  });

  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
    // The Anthropic SDK reads request-id; OpenAI's reads x-request-id.
    reply.header("request-id", request.id);
    if (options.allowedHosts !== "any" && !hostAllowed(request.headers.host))
      throw new AppError("permission", `Host '${request.headers.host}' is not allowed. Use http://127.0.0.1 or http://localhost.`, {
        code: "host_not_allowed",
      });
  });

  // Clients that forget the Content-Type (curl -d sends form encoding) still send JSON; parse it as such.
  app.removeContentTypeParser("text/plain");
  app.addContentTypeParser("*", { parseAs: "string" }, (_request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text.trim() === "") return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(new AppError("invalid_request", "We could not parse the JSON body of your request. Send valid JSON.", { code: "invalid_json" }), undefined);
    }
  });

  app.setErrorHandler((error, request, reply) => {
    const appError = fastifyErrorToAppError(error as Error);
    if (appError.status >= 500) request.log.error({ err: error }, "request failed");
    return sendError(request, reply, appError);
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split("?")[0]!;
    const message =
      path.startsWith("/v1/") || path === "/health"
        ? `Unknown endpoint: ${request.method} ${path}.`
        : `Not found: only /v1/* and /health are served (got ${path}).`;
    return sendError(request, reply, new AppError("not_found", message, { code: "not_found" }));
  });

  const health = async () => {
    const status = deps.engineHost.status();
    const files = deps.engineHost.files();
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
        error: status.error,
      },
      gpu: gpu
        ? {
            backend: gpu.backend,
            devices: gpu.devices,
            vram_total_bytes: gpu.vramTotalBytes,
            vram_free_bytes: gpu.vramFreeBytes,
            skipped: gpu.skipped ?? [],
          }
        : null,
      memory: { ram_total_bytes: totalmem(), ram_free_bytes: freemem() },
      requests: { active: status.active, queued: status.queued },
    };
  };
  app.get("/health", async () => health());
  app.get("/v1/messages/_health", async () => health());
  app.get("/v1/models", async () => ({ object: "list", data: [modelObject()] }));
  app.get("/v1/models/:model", async (request) => {
    const { model } = request.params as { model: string };
    const found = modelObject();
    if (model !== found.id && model !== "svc")
      throw new AppError("not_found", `The model '${model}' does not exist.`, { code: "model_not_found", param: "model" });
    return found;
  });

  await app.register(async (scope) => registerChatRoutes(scope, deps));
  await app.register(async (scope) => registerResponsesRoutes(scope, deps));
  await app.register(async (scope) => registerMessagesRoutes(scope, deps));
  await app.register(async (scope) => registerFilesRoutes(scope, deps));
  return app;
}
