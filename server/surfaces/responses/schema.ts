// The Responses request body: the spec's fields with their ranges, and the stateful fields the service
// refuses (checked in decode.ts so the error can say why). Unknown fields are allowed: clients such as
// Codex send many (include, prompt_cache_key, client_metadata, ...). Input items, tools and formats are
// checked in decode.ts, which can name the exact item at fault.
import { Type, type Static } from "@sinclair/typebox";
import { MAX_INPUT_ITEMS, MAX_TOOLS } from "../list-limits.js";
import { Glassbox, nullable } from "../request-params.js";

const Item = Type.Object({}, { additionalProperties: true });

const Tool = Type.Object({ type: Type.String() }, { additionalProperties: true });

const ToolChoice = Type.Union([Type.String(), Type.Object({ type: Type.String() }, { additionalProperties: true })]);

const Reasoning = Type.Object(
  {
    effort: Type.Optional(nullable(Type.String())),
    summary: Type.Optional(nullable(Type.String())),
  },
  { additionalProperties: true },
);

const TextFormat = Type.Object(
  {
    type: Type.String(),
    name: Type.Optional(Type.String({ maxLength: 64 })),
    description: Type.Optional(Type.String()),
    schema: Type.Optional(Type.Object({}, { additionalProperties: true })),
    strict: Type.Optional(nullable(Type.Boolean())),
  },
  { additionalProperties: true },
);

const Text = Type.Object(
  {
    format: Type.Optional(nullable(TextFormat)),
    verbosity: Type.Optional(nullable(Type.String())),
  },
  { additionalProperties: true },
);

export const ResponsesRequestSchema = Type.Object(
  {
    model: Type.Optional(nullable(Type.String({ minLength: 1 }))),
    input: Type.Union([Type.String(), Type.Array(Item, { minItems: 1, maxItems: MAX_INPUT_ITEMS })]),
    instructions: Type.Optional(nullable(Type.String())),
    tools: Type.Optional(nullable(Type.Array(Tool, { maxItems: MAX_TOOLS }))),
    tool_choice: Type.Optional(Type.Union([ToolChoice, Type.Null()])),
    parallel_tool_calls: Type.Optional(nullable(Type.Boolean())),
    reasoning: Type.Optional(nullable(Reasoning)),
    text: Type.Optional(nullable(Text)),
    max_output_tokens: Type.Optional(nullable(Type.Integer({ minimum: 1, maximum: 200000 }))),
    temperature: Type.Optional(nullable(Type.Number({ minimum: 0, maximum: 2 }))),
    top_p: Type.Optional(nullable(Type.Number({ exclusiveMinimum: 0, maximum: 1 }))),
    // Extension (as on the Chat surface).
    top_k: Type.Optional(nullable(Type.Integer({ minimum: 1 }))),
    stream: Type.Optional(nullable(Type.Boolean())),
    // Extension (as on the Chat surface): reproducible sampling.
    seed: Type.Optional(nullable(Type.Integer({ minimum: -9223372036854775808, maximum: 9223372036854775807 }))),
    metadata: Type.Optional(nullable(Type.Object({}, { additionalProperties: Type.String({ maxLength: 512 }), maxProperties: 16 }))),
    include: Type.Optional(nullable(Type.Array(Type.String()))),
    top_logprobs: Type.Optional(nullable(Type.Integer({ minimum: 0, maximum: 20 }))),
    // Extensions (as on the Chat surface): docs/api.md, "Glassbox".
    glassbox: Type.Optional(Type.Union([Glassbox, Type.Null()])),
    refusal_mode: Type.Optional(nullable(Type.Union([Type.Literal("soft"), Type.Literal("strict")]))),
    session_id: Type.Optional(nullable(Type.String({ minLength: 1, maxLength: 256 }))),
    truncation: Type.Optional(nullable(Type.Union([Type.Literal("auto"), Type.Literal("disabled")]))),
    // Stateful features: only their "off" values are accepted (decode.ts).
    store: Type.Optional(nullable(Type.Boolean())),
    background: Type.Optional(nullable(Type.Boolean())),
    previous_response_id: Type.Optional(Type.Unknown()),
    conversation: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: true },
);

export type ResponsesRequestBody = Static<typeof ResponsesRequestSchema>;
