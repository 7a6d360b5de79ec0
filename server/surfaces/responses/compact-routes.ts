// POST /v1/responses/compact: OpenAI's compaction endpoint, stateless. The input items are summarised by the
// model; the answer is the conversation's user messages followed by one compaction item holding the summary
// (see compaction.ts). Nothing of it is kept.
import type { FastifyInstance } from "fastify";
import { Type, type Static } from "@sinclair/typebox";
import { invalidRequest } from "../../core/errors.js";
import { newId, nowSeconds } from "../../core/ids.js";
import type { HttpDeps } from "../../http/context.js";
import { serveInference } from "../../http/inference.js";
import { MAX_INPUT_ITEMS } from "../list-limits.js";
import { nullable } from "../request-params.js";
import { compactionItem } from "./compaction.js";
import { decodeResponsesRequest } from "./decode.js";
import { compactionSummaryOf, encodeUsage } from "./encode.js";
import type { ResponsesRequestBody } from "./schema.js";

const CompactRequestSchema = Type.Object(
  {
    model: Type.Optional(nullable(Type.String({ minLength: 1 }))),
    input: Type.Union([Type.String(), Type.Array(Type.Object({}, { additionalProperties: true }), { minItems: 1, maxItems: MAX_INPUT_ITEMS })]),
    instructions: Type.Optional(nullable(Type.String())),
    previous_response_id: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: true },
);
type CompactRequestBody = Static<typeof CompactRequestSchema>;

type Obj = Record<string, unknown>;

/** The user messages of the input, as output items (OpenAI's compacted output keeps them, in order). */
function userMessages(input: CompactRequestBody["input"]) {
  const items = typeof input === "string" ? [{ role: "user", content: input }] : (input as Obj[]);
  return items
    .filter((item) => item.role === "user" && (item.type === undefined || item.type === "message"))
    .map((item) => ({
      id: typeof item.id === "string" ? item.id : newId("msg_"),
      type: "message" as const,
      role: "user" as const,
      status: "completed" as const,
      content: typeof item.content === "string" ? [{ type: "input_text", text: item.content }] : item.content,
    }));
}

export async function registerResponsesCompactRoutes(app: FastifyInstance, deps: HttpDeps): Promise<void> {
  app.post<{ Body: CompactRequestBody }>(
    "/v1/responses/compact",
    { schema: { body: CompactRequestSchema } },
    async (request, reply) => {
      const body = request.body;
      if (body.previous_response_id != null)
        throw invalidRequest(
          "previous_response_id is not supported: this server is stateless and keeps no responses. Send the whole conversation in 'input'.",
          "previous_response_id",
          "unsupported_parameter",
        );
      const items = typeof body.input === "string" ? [{ role: "user", content: body.input }] : body.input;
      const decoded = decodeResponsesRequest({
        model: body.model,
        input: [...items, { type: "compaction_trigger" }],
        instructions: body.instructions,
      } as ResponsesRequestBody);
      return serveInference(request, reply, deps, {
        inference: decoded.inference,
        model: typeof body.model === "string" ? body.model : "svc",
        stream: false,
        encoder: () => {
          throw new Error("compaction is never streamed");
        },
        encode: (result) => ({
          id: newId("resp_"),
          object: "response.compaction" as const,
          created_at: nowSeconds(),
          output: [...userMessages(body.input), compactionItem(compactionSummaryOf(result))],
          usage: encodeUsage(result),
        }),
      });
    },
  );
}
