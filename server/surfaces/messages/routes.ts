// POST /v1/messages and POST /v1/messages/count_tokens.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { invalidRequest } from "../../core/errors.js";
import { newId } from "../../core/ids.js";
import type { HttpDeps } from "../../http/context.js";
import { serveInference } from "../../http/inference.js";
import { decodeCountTokensRequest, decodeMessagesRequest } from "./decode.js";
import { encodeMessagesResponse } from "./encode.js";
import { CountTokensRequestSchema, MessagesRequestSchema, type CountTokensRequestBody, type MessagesRequestBody } from "./schema.js";
import { MessagesStreamEncoder } from "./stream.js";

/** Date-formatted API version headers clients send. Neither is required; one behaviour serves every date. */
const VERSION_HEADERS = ["anthropic-version", "svc-version"] as const;

function isCalendarDate(value: string): boolean {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!match) return false;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

export function checkVersionHeaders(request: FastifyRequest): void {
  for (const name of VERSION_HEADERS) {
    const value = request.headers[name];
    if (value === undefined) continue;
    if (typeof value !== "string" || !isCalendarDate(value.trim()))
      throw invalidRequest(`The ${name} header must be a date, YYYY-MM-DD (e.g. 2023-06-01); got '${String(value)}'.`, name, "invalid_version");
  }
}

export async function registerMessagesRoutes(app: FastifyInstance, deps: HttpDeps): Promise<void> {
  // After the key check (a hook of the key scope), before the body is validated.
  app.addHook("onRequest", async (request) => checkVersionHeaders(request));

  app.post<{ Body: MessagesRequestBody }>("/v1/messages", { schema: { body: MessagesRequestSchema } }, async (request, reply) => {
    const decoded = decodeMessagesRequest(request.body);
    const envelope = { id: newId("msg_"), model: decoded.model, thinkingDisplay: decoded.thinkingDisplay };
    return serveInference(request, reply, deps, {
      inference: decoded.inference,
      model: decoded.model,
      stream: decoded.stream,
      encoder: () => new MessagesStreamEncoder(envelope, request.id),
      encode: (result) => encodeMessagesResponse(result, envelope),
    });
  });

  app.post<{ Body: CountTokensRequestBody }>("/v1/messages/count_tokens", { schema: { body: CountTokensRequestSchema } }, async (request) => ({
    input_tokens: await deps.pipeline.estimateInputTokens(decodeCountTokensRequest(request.body), { accountId: request.ctx.principal?.accountId }),
  }));
}
