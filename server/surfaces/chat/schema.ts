// The Chat Completions request body: every parameter of the spec's table with its exact range. Unknown
// fields are allowed (clients send many); message contents are checked in decode.ts, which can name the
// exact part at fault.
import { Type, type Static } from "@sinclair/typebox";
import { MAX_CONTENT_PARTS } from "../list-limits.js";
import { Glassbox, nullable } from "../request-params.js";

const StopSequence = Type.String({ minLength: 1, maxLength: 500 });

const Message = Type.Object(
  {
    role: Type.String(),
    content: Type.Optional(Type.Union([Type.String(), Type.Array(Type.Object({ type: Type.String() }), { maxItems: MAX_CONTENT_PARTS }), Type.Null()])),
  },
  { additionalProperties: true },
);

const FunctionTool = Type.Object(
  {
    type: Type.String(),
    function: Type.Optional(
      Type.Object(
        {
          name: Type.String({ pattern: "^[a-zA-Z0-9_-]{1,64}$" }),
          description: Type.Optional(Type.String()),
          parameters: Type.Optional(Type.Object({}, { additionalProperties: true })),
          strict: Type.Optional(nullable(Type.Boolean())),
        },
        { additionalProperties: true },
      ),
    ),
  },
  { additionalProperties: true },
);

const ToolChoice = Type.Union([
  Type.String(),
  Type.Object(
    {
      type: Type.String(),
      function: Type.Optional(Type.Object({ name: Type.String() }, { additionalProperties: true })),
    },
    { additionalProperties: true },
  ),
]);

const ResponseFormat = Type.Object(
  {
    type: Type.Union([Type.Literal("text"), Type.Literal("json_object"), Type.Literal("json_schema")]),
    json_schema: Type.Optional(
      Type.Object(
        {
          name: Type.Optional(Type.String({ maxLength: 64 })),
          description: Type.Optional(Type.String()),
          schema: Type.Optional(Type.Object({}, { additionalProperties: true })),
          strict: Type.Optional(nullable(Type.Boolean())),
        },
        { additionalProperties: true },
      ),
    ),
  },
  { additionalProperties: true },
);

export const ChatRequestSchema = Type.Object(
  {
    model: Type.Optional(nullable(Type.String({ minLength: 1 }))),
    messages: Type.Array(Message, { minItems: 1, maxItems: 2000 }),
    stream: Type.Optional(nullable(Type.Boolean())),
    stream_options: Type.Optional(nullable(Type.Object({ include_usage: Type.Optional(nullable(Type.Boolean())) }, { additionalProperties: true }))),
    temperature: Type.Optional(nullable(Type.Number({ minimum: 0, maximum: 2 }))),
    max_tokens: Type.Optional(nullable(Type.Integer({ minimum: 1, maximum: 200000 }))),
    max_completion_tokens: Type.Optional(nullable(Type.Integer({ minimum: 1, maximum: 200000 }))),
    top_p: Type.Optional(nullable(Type.Number({ exclusiveMinimum: 0, maximum: 1 }))),
    // Extension (as llama-server and vLLM take it; Messages has it natively).
    top_k: Type.Optional(nullable(Type.Integer({ minimum: 1 }))),
    stop: Type.Optional(Type.Union([StopSequence, Type.Array(StopSequence, { maxItems: 4 }), Type.Null()])),
    seed: Type.Optional(nullable(Type.Integer({ minimum: -9223372036854775808, maximum: 9223372036854775807 }))),
    frequency_penalty: Type.Optional(nullable(Type.Number({ minimum: -2, maximum: 2 }))),
    presence_penalty: Type.Optional(nullable(Type.Number({ minimum: -2, maximum: 2 }))),
    n: Type.Optional(nullable(Type.Integer())),
    user: Type.Optional(nullable(Type.String())),
    parallel_tool_calls: Type.Optional(nullable(Type.Boolean())),
    tools: Type.Optional(nullable(Type.Array(FunctionTool, { maxItems: 128 }))),
    tool_choice: Type.Optional(Type.Union([ToolChoice, Type.Null()])),
    response_format: Type.Optional(Type.Union([ResponseFormat, Type.Null()])),
    reasoning_effort: Type.Optional(nullable(Type.String())),
    max_reasoning_tokens: Type.Optional(nullable(Type.Integer({ minimum: 0, maximum: 200000 }))),
    session_id: Type.Optional(nullable(Type.String({ minLength: 1, maxLength: 256 }))),
    glassbox: Type.Optional(Type.Union([Glassbox, Type.Null()])),
    logprobs: Type.Optional(nullable(Type.Boolean())),
    top_logprobs: Type.Optional(nullable(Type.Integer({ minimum: 0, maximum: 20 }))),
    refusal_mode: Type.Optional(nullable(Type.Union([Type.Literal("soft"), Type.Literal("strict")]))),
    // OpenAI's Predicted Outputs: the text (or text parts) the answer is expected to repeat.
    prediction: Type.Optional(
      nullable(
        Type.Object(
          {
            type: Type.Literal("content"),
            content: Type.Union([Type.String(), Type.Array(Type.Object({ type: Type.Literal("text"), text: Type.String() }, { additionalProperties: true }), { maxItems: 1000 })]),
          },
          { additionalProperties: true },
        ),
      ),
    ),
  },
  { additionalProperties: true },
);

export type ChatRequestBody = Static<typeof ChatRequestSchema>;
