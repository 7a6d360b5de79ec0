// POST /v1/messages and POST /v1/messages/count_tokens. Errors take the Anthropic shape through the app's
// error handler (sendError picks it for /v1/messages paths).
import type { FastifyInstance, FastifyRequest } from "fastify";
import { AppError, invalidRequest } from "../../core/errors.js";
import { newId } from "../../core/ids.js";
import { anthropicKey } from "../../http/auth.js";
import type { ServerDeps } from "../../http/context.js";
import { abortOnDisconnect, sendEventStream } from "../../http/streaming.js";
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

export async function registerMessagesRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  // Authentication comes before validation: a bad key is a 401 whatever the body says.
  const authenticate = async (request: FastifyRequest) => {
    request.principal = deps.keys.authenticate(anthropicKey(request));
    checkVersionHeaders(request);
  };

  app.post<{ Body: MessagesRequestBody }>(
    "/v1/messages",
    { schema: { body: MessagesRequestSchema }, onRequest: authenticate },
    async (request, reply) => {
      const decoded = decodeMessagesRequest(request.body);
      const envelope = { id: newId("msg_"), model: decoded.model, thinkingDisplay: decoded.thinkingDisplay };
      const disconnect = abortOnDisconnect(reply);
      try {
        const stream = await deps.pipeline.open(decoded.inference, disconnect.signal, { accountId: request.principal?.accountId });
        if (decoded.stream) return await sendEventStream(reply, stream, new MessagesStreamEncoder(envelope, request.id));
        for await (const event of stream) if (event.type === "done") return encodeMessagesResponse(event.result, envelope);
        throw new AppError("invalid_request", "The request was cancelled.", { code: "cancelled" });
      } finally {
        disconnect.dispose();
      }
    },
  );

  app.post<{ Body: CountTokensRequestBody }>(
    "/v1/messages/count_tokens",
    { schema: { body: CountTokensRequestSchema }, onRequest: authenticate },
    async (request) => ({ input_tokens: await deps.pipeline.estimateInputTokens(decodeCountTokensRequest(request.body), { accountId: request.principal?.accountId }) }),
  );
}
