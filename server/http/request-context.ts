// The first hook of every request: its context (id, area, timing), the id headers, the Host check, and the
// one place that tells observers (the audit) how each request ended, streams cut by the client included.
import type { FastifyInstance } from "fastify";
import { AppError } from "../core/errors.js";
import { isLoopbackHost } from "../core/loopback.js";
import type { ApiArea, RequestContext, RequestObserver } from "../core/request-context.js";
import { hostAllowedOn, type MachineNames } from "./lan.js";
import { CLIENT_CLOSED_REQUEST, noteRequestId, rawAnswerOf } from "./raw-answers.js";

const AREAS: Array<[prefix: string, area: ApiArea]> = [
  ["/v1/chat/", "chat"],
  ["/v1/responses", "responses"],
  ["/v1/messages/batches", "batches"],
  ["/v1/messages", "messages"],
  ["/v1/files", "files"],
  ["/v1/audit", "audit"],
  ["/v1/agent/", "agent"],
  ["/v1/models", "models"],
  ["/v1/console", "console"],
  ["/health", "health"],
];

export function areaOf(path: string): ApiArea {
  for (const [prefix, area] of AREAS) if (path === prefix || path.startsWith(prefix)) return area;
  return "other";
}

export function hostAllowed(hostHeader: string | undefined): boolean {
  if (!hostHeader) return true; // HTTP/1.0 clients; nothing to rebind
  let host = hostHeader.trim().toLowerCase();
  if (host.startsWith("[")) host = host.slice(0, host.indexOf("]") + 1);
  else host = host.replace(/:\d+$/, "");
  return isLoopbackHost(host);
}

export interface RequestContextOptions {
  /**
   * Host headers served (the DNS-rebinding guard): loopback names only, or with LAN exposure also this
   * machine's own names and addresses (see lan.ts).
   */
  allowedHosts: "loopback" | MachineNames;
  observers: readonly RequestObserver[];
  onObserverError: (err: unknown) => void;
}

export function requestContext(app: FastifyInstance, options: RequestContextOptions): void {
  app.decorateRequest("ctx", null as unknown as RequestContext);

  // A callback hook, not an async one: every request passes it, and an async hook costs a promise and a
  // microtask turn each (GET /v1/models: docs/performance.md, section 19).
  app.addHook("onRequest", (request, reply, done) => {
    const path = request.url.split("?")[0]!;
    const ctx: RequestContext = {
      id: request.id,
      receivedAt: Date.now(),
      startedAt: performance.now(),
      method: request.method,
      path,
      route: request.routeOptions.url,
      area: areaOf(path),
      principal: null,
      timezone: "UTC",
      workClass: "interactive",
      inference: {},
    };
    request.ctx = ctx;
    reply.header("x-request-id", request.id);
    // The Anthropic SDK reads request-id; OpenAI's reads x-request-id.
    reply.header("request-id", request.id);

    noteRequestId(reply.raw, request.id);

    if (options.observers.length > 0) {
      let finished = false;
      reply.raw.once("finish", () => (finished = true));
      // "close" follows "finish" on a complete response and comes alone when the connection ended first: the
      // client cut it short (after the status was sent, or before: 499), or a deadline answered it on the
      // socket (the 408 of connection-limits.ts, which is what the client got).
      reply.raw.once("close", () => {
        const answered = rawAnswerOf(reply.raw);
        let statusCode = reply.raw.statusCode;
        if (answered) {
          statusCode = answered.status;
          ctx.errorCode = answered.code;
        } else if (!finished && !reply.raw.headersSent) {
          statusCode = CLIENT_CLOSED_REQUEST;
          ctx.errorCode = "client_closed_request";
        }
        const outcome = { statusCode, durationMs: performance.now() - ctx.startedAt, aborted: !finished && !answered };
        for (const observe of options.observers) {
          try {
            observe(ctx, outcome);
          } catch (err) {
            options.onObserverError(err);
          }
        }
      });
    }

    const machine = options.allowedHosts === "loopback" ? null : options.allowedHosts;
    if (!hostAllowedOn(request.headers.host, machine))
      return done(
        new AppError(
          "permission",
          machine
            ? `Host '${request.headers.host}' is not allowed. Use this machine's name or address, or start the server with --allowed-hosts naming it.`
            : `Host '${request.headers.host}' is not allowed. Use http://127.0.0.1 or http://localhost.`,
          { code: "host_not_allowed" },
        ),
      );
    done();
  });
}
