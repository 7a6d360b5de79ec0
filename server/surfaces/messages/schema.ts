// The Messages request body (POST /v1/messages) and the count_tokens body: the spec's table with its exact
// ranges. Unknown fields are allowed (clients send many: service_tier, container, inference_geo, ...);
// content blocks, tools and tool_choice are checked in decode.ts, which can name the exact block at fault.
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { MAX_CONTENT_PARTS, MAX_TOOLS } from "../list-limits.js";

/** A field sent as null counts as not sent. */
function nullable<T extends TSchema>(schema: T) {
  const type = (schema as { type?: string }).type;
  if (type === undefined) return Type.Union([schema, Type.Null()]);
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [type, "null"] });
}

const Block = Type.Object({ type: Type.String() }, { additionalProperties: true });

const Message = Type.Object(
  {
    role: Type.String(),
    content: Type.Union([Type.String(), Type.Array(Block, { maxItems: MAX_CONTENT_PARTS })]),
  },
  { additionalProperties: true },
);

const Tool = Type.Object({ name: Type.String() }, { additionalProperties: true });

const ToolChoice = Type.Object(
  {
    type: Type.String(),
    name: Type.Optional(Type.String()),
    disable_parallel_tool_use: Type.Optional(nullable(Type.Boolean())),
  },
  { additionalProperties: true },
);

const Thinking = Type.Object(
  {
    type: Type.String(),
    budget_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 200000 })),
    display: Type.Optional(nullable(Type.Union([Type.Literal("summarized"), Type.Literal("omitted")]))),
  },
  { additionalProperties: true },
);

/** Structured outputs: {type: "json_schema", schema}; the type and the schema are checked in decode.ts. */
const OutputFormat = Type.Object({ type: Type.String() }, { additionalProperties: true });

/** Fields shared by a messages request and a count_tokens request. */
const common = {
  model: Type.String({ minLength: 1 }),
  messages: Type.Array(Message, { minItems: 1, maxItems: 200 }),
  system: Type.Optional(nullable(Type.Union([Type.String(), Type.Array(Block, { maxItems: MAX_CONTENT_PARTS })]))),
  tools: Type.Optional(nullable(Type.Array(Tool, { maxItems: MAX_TOOLS }))),
  tool_choice: Type.Optional(nullable(ToolChoice)),
  thinking: Type.Optional(nullable(Thinking)),
  // The answer's format: output_config.format, or output_format (the structured-outputs beta's field, which
  // the SDKs mark deprecated). output_config's other fields (effort, task_budget) are not read.
  output_config: Type.Optional(nullable(Type.Object({ format: Type.Optional(nullable(OutputFormat)) }, { additionalProperties: true }))),
  output_format: Type.Optional(nullable(OutputFormat)),
};

export const MessagesRequestSchema = Type.Object(
  {
    ...common,
    max_tokens: Type.Integer({ minimum: 1, maximum: 200000 }),
    metadata: Type.Optional(nullable(Type.Object({ user_id: Type.Optional(nullable(Type.String())) }, { additionalProperties: true }))),
    stop_sequences: Type.Optional(nullable(Type.Array(Type.String({ minLength: 1, maxLength: 500 }), { maxItems: 8 }))),
    stream: Type.Optional(nullable(Type.Boolean())),
    temperature: Type.Optional(nullable(Type.Number({ minimum: 0, maximum: 2 }))),
    top_p: Type.Optional(nullable(Type.Number({ exclusiveMinimum: 0, maximum: 1 }))),
    top_k: Type.Optional(nullable(Type.Integer({ minimum: 1 }))),
    // Extensions (docs/api.md, "Glassbox"): cache affinity per session, and the refusal mode.
    session_id: Type.Optional(nullable(Type.String({ minLength: 1, maxLength: 256 }))),
    refusal_mode: Type.Optional(nullable(Type.Union([Type.Literal("soft"), Type.Literal("strict")]))),
  },
  { additionalProperties: true },
);

export const CountTokensRequestSchema = Type.Object(common, { additionalProperties: true });

export type MessagesRequestBody = Static<typeof MessagesRequestSchema>;
export type CountTokensRequestBody = Static<typeof CountTokensRequestSchema>;
