// /v1/messages/batches: a keyed plugin of the Messages family (Anthropic error format, the Messages
// version-header check). Create bodies are not parsed by Fastify: they can be 256 MiB, so the service reads
// the stream itself, entry by entry.
import { Readable } from "node:stream";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { AppError, invalidRequest } from "../../core/errors.js";
import type { ServerDeps } from "../server-deps.js";
import { checkVersionHeaders } from "../../surfaces/messages/routes.js";
import { encodeBatch } from "./batch-object.js";

type IdParams = { Params: { id: string } };

/** This server as the client reached it, so results_url is absolute and works from where the client is. */
export function baseUrlOf(request: FastifyRequest): string {
  const host = request.host;
  if (host) return `${request.protocol}://${host}`;
  const socket = request.raw.socket;
  const address = socket.localAddress ?? "127.0.0.1";
  return `${request.protocol}://${address.includes(":") ? `[${address}]` : address}:${socket.localPort}`;
}

function idempotencyKeyOf(request: FastifyRequest): string | undefined {
  const header = request.headers["idempotency-key"];
  if (header === undefined) return undefined;
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || !/^[\x21-\x7e]{1,255}$/.test(value))
    throw invalidRequest("The Idempotency-Key header must be 1 to 255 visible ASCII characters (a UUID is a good choice).", "Idempotency-Key", "invalid_idempotency_key");
  return value;
}

function parseLimit(value: unknown): number {
  if (value === undefined) return 20;
  const text = Array.isArray(value) ? value[0] : value;
  const n = typeof text === "string" && /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw invalidRequest("limit must be an integer from 1 to 1000.", "limit");
  return n;
}

function parseCursor(value: unknown, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value === "") throw invalidRequest(`${name} must be a message batch id.`, name);
  return value;
}

function accountOf(request: FastifyRequest): string {
  const principal = request.ctx.principal;
  if (!principal) throw new AppError("internal", "A batch route ran without authentication.");
  return principal.accountId;
}

export async function registerBatchRoutes(scope: FastifyInstance, deps: ServerDeps): Promise<void> {
  const service = deps.batches;
  if (!service) return;
  scope.addHook("onRequest", async (request) => checkVersionHeaders(request));
  // A 409 for a batch that has not ended will not change on a quick retry: tell the SDKs not to retry it.
  scope.addHook("onSend", async (request, reply, payload) => {
    if (request.ctx.errorCode === "batch_not_ended") reply.header("x-should-retry", "false");
    return payload;
  });
  // The create body reaches the handler as the raw stream, whatever its Content-Type.
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser("*", (_request, payload, done) => done(null, payload));

  scope.post("/v1/messages/batches", async (request, reply) => {
    const accountId = accountOf(request);
    const idempotencyKey = idempotencyKeyOf(request);
    const body = request.body as Readable | undefined;
    if (!body) throw invalidRequest('Send a JSON body: {"requests": [{"custom_id": "...", "params": {...a Messages request...}}]}.', "requests");
    const { batch, replayed } = await service.create({ accountId, idempotencyKey, body });
    request.ctx.batchId = batch.id;
    if (replayed) reply.header("idempotent-replayed", "true");
    return encodeBatch(batch, baseUrlOf(request));
  });

  scope.get("/v1/messages/batches", async (request) => {
    const query = request.query as Record<string, unknown>;
    const afterId = parseCursor(query.after_id, "after_id");
    const beforeId = parseCursor(query.before_id, "before_id");
    if (afterId !== undefined && beforeId !== undefined) throw invalidRequest("Send after_id or before_id, not both.", "before_id");
    const page = service.list({ accountId: accountOf(request), limit: parseLimit(query.limit), afterId, beforeId });
    const base = baseUrlOf(request);
    const data = page.rows.map((row) => encodeBatch(row, base));
    return { data, has_more: page.hasMore, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
  });

  scope.get<IdParams>("/v1/messages/batches/:id", async (request) => {
    request.ctx.batchId = request.params.id;
    return encodeBatch(service.get(accountOf(request), request.params.id), baseUrlOf(request));
  });

  scope.post<IdParams>("/v1/messages/batches/:id/cancel", async (request) => {
    request.ctx.batchId = request.params.id;
    (request.body as Readable | undefined)?.resume();
    return encodeBatch(service.cancel(accountOf(request), request.params.id), baseUrlOf(request));
  });

  scope.delete<IdParams>("/v1/messages/batches/:id", async (request) => {
    request.ctx.batchId = request.params.id;
    service.delete(accountOf(request), request.params.id);
    return { id: request.params.id, type: "message_batch_deleted" };
  });

  scope.get<IdParams>("/v1/messages/batches/:id/results", async (request, reply) => {
    request.ctx.batchId = request.params.id;
    const lines = service.results(accountOf(request), request.params.id);
    reply.type("application/x-ndjson");
    // Strings, piped with backpressure: a page is read from the database only when the client has taken the last.
    return reply.send(Readable.from(lines));
  });
}
