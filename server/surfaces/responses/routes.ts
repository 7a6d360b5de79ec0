// POST /v1/responses (stateless: nothing of the request or the response is kept)
import type { FastifyInstance } from "fastify";
import { newId, nowSeconds } from "../../core/ids.js";
import type { HttpDeps } from "../../http/context.js";
import { serveInference } from "../../http/inference.js";
import { decodeResponsesRequest } from "./decode.js";
import { encodeResponse, type ResponsesEnvelope } from "./encode.js";
import { ResponsesRequestSchema, type ResponsesRequestBody } from "./schema.js";
import { ResponsesStreamEncoder } from "./stream.js";

export async function registerResponsesRoutes(app: FastifyInstance, deps: HttpDeps): Promise<void> {
  app.post<{ Body: ResponsesRequestBody }>("/v1/responses", { schema: { body: ResponsesRequestSchema } }, async (request, reply) => {
    const decoded = decodeResponsesRequest(request.body);
    const envelope: ResponsesEnvelope = {
      id: newId("resp_"),
      createdAt: nowSeconds(),
      trace: request.ctx.principal?.reasoningTrace === true,
      echo: decoded.echo,
    };
    return serveInference(request, reply, deps, {
      inference: decoded.inference,
      model: typeof request.body.model === "string" ? request.body.model : "svc",
      stream: decoded.stream,
      encoder: () => new ResponsesStreamEncoder(envelope),
      encode: (result) => encodeResponse(result, envelope),
    });
  });
}
