// POST /v1/chat/completions
import type { FastifyInstance } from "fastify";
import { AppError } from "../../core/errors.js";
import { newId, nowSeconds } from "../../core/ids.js";
import { bearerKey } from "../../http/auth.js";
import type { ServerDeps } from "../../http/context.js";
import { abortOnDisconnect, sendEventStream } from "../../http/streaming.js";
import { decodeChatRequest } from "./decode.js";
import { encodeChatCompletion } from "./encode.js";
import { ChatRequestSchema, type ChatRequestBody } from "./schema.js";
import { ChatStreamEncoder } from "./stream.js";

export async function registerChatRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.post<{ Body: ChatRequestBody }>(
    "/v1/chat/completions",
    {
      schema: { body: ChatRequestSchema },
      // Authentication comes before validation: a bad key is a 401 whatever the body says.
      onRequest: async (request) => {
        request.principal = deps.keys.authenticate(bearerKey(request));
      },
    },
    async (request, reply) => {
      const decoded = decodeChatRequest(request.body);
      const envelope = { id: newId("chatcmpl-"), created: nowSeconds(), sessionId: decoded.sessionId };
      const disconnect = abortOnDisconnect(reply);
      try {
        const stream = await deps.pipeline.open(decoded.inference, disconnect.signal, { accountId: request.principal?.accountId });
        if (decoded.stream) return await sendEventStream(reply, stream, new ChatStreamEncoder(envelope));
        for await (const event of stream) if (event.type === "done") return encodeChatCompletion(event.result, envelope);
        throw new AppError("invalid_request", "The request was cancelled.", { code: "cancelled" });
      } finally {
        disconnect.dispose();
      }
    },
  );
}
