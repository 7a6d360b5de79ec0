// POST /v1/responses (stateless: nothing of the request or the response is kept)
import type { FastifyInstance } from "fastify";
import { AppError } from "../../core/errors.js";
import { newId, nowSeconds } from "../../core/ids.js";
import { bearerKey } from "../../http/auth.js";
import type { ServerDeps } from "../../http/context.js";
import { abortOnDisconnect, sendEventStream } from "../../http/streaming.js";
import { decodeResponsesRequest } from "./decode.js";
import { encodeResponse, type ResponsesEnvelope } from "./encode.js";
import { ResponsesRequestSchema, type ResponsesRequestBody } from "./schema.js";
import { ResponsesStreamEncoder } from "./stream.js";

export async function registerResponsesRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.post<{ Body: ResponsesRequestBody }>(
    "/v1/responses",
    {
      schema: { body: ResponsesRequestSchema },
      // Authentication comes before validation: a bad key is a 401 whatever the body says.
      onRequest: async (request) => {
        request.principal = deps.keys.authenticate(bearerKey(request));
      },
    },
    async (request, reply) => {
      const decoded = decodeResponsesRequest(request.body);
      const envelope: ResponsesEnvelope = {
        id: newId("resp_"),
        createdAt: nowSeconds(),
        trace: request.principal?.reasoningTrace === true,
        echo: decoded.echo,
      };
      const disconnect = abortOnDisconnect(reply);
      try {
        const stream = await deps.pipeline.open(decoded.inference, disconnect.signal, { accountId: request.principal?.accountId });
        if (decoded.stream) return await sendEventStream(reply, stream, new ResponsesStreamEncoder(envelope));
        for await (const event of stream) if (event.type === "done") return encodeResponse(event.result, envelope);
        throw new AppError("invalid_request", "The request was cancelled.", { code: "cancelled" });
      } finally {
        disconnect.dispose();
      }
    },
  );
}
