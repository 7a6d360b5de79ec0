// POST /v1/chat/completions
import type { FastifyInstance } from "fastify";
import { newId, nowSeconds } from "../../core/ids.js";
import type { HttpDeps } from "../../http/context.js";
import { serveInference } from "../../http/inference.js";
import { decodeChatRequest } from "./decode.js";
import { encodeChatCompletion } from "./encode.js";
import { ChatRequestSchema, type ChatRequestBody } from "./schema.js";
import { ChatStreamEncoder } from "./stream.js";

export async function registerChatRoutes(app: FastifyInstance, deps: HttpDeps): Promise<void> {
  app.post<{ Body: ChatRequestBody }>("/v1/chat/completions", { schema: { body: ChatRequestSchema } }, async (request, reply) => {
    const decoded = decodeChatRequest(request.body);
    const envelope = { id: newId("chatcmpl-"), created: nowSeconds(), sessionId: decoded.sessionId };
    return serveInference(request, reply, deps, {
      inference: decoded.inference,
      model: request.body.model ?? "svc",
      stream: decoded.stream,
      encoder: () => new ChatStreamEncoder(envelope),
      encode: (result) => encodeChatCompletion(result, envelope),
    });
  });
}
