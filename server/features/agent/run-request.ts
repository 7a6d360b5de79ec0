// POST /v1/agent/run: the body (in the spirit of a Responses request) and its decoding. Input items,
// function tools and sampling are read exactly as the Responses surface reads them; the agent adds its
// built-in tools, the files the run may use, its limits and the tool-choice policy.
import { Type, type Static } from "@sinclair/typebox";
import { invalidRequest } from "../../core/errors.js";
import type { CanonicalMessage, InferenceRequest, ToolChoice, ToolDefinition } from "../../core/inference.js";
import { modelIdOfMode } from "../../core/inference.js";
import { nullable } from "../../surfaces/request-params.js";
import { MAX_INPUT_ITEMS, MAX_TOOLS } from "../../surfaces/list-limits.js";
import { decodeResponsesRequest } from "../../surfaces/responses/decode.js";
import type { ResponsesRequestBody } from "../../surfaces/responses/schema.js";
import { BUILTIN_TOOLS, builtinDefinition, isBuiltinTool, type BuiltinTool } from "./tools.js";

export const DEFAULT_MAX_STEPS = 8;
export const MAX_MAX_STEPS = 64;
export const DEFAULT_TIMEOUT_SECONDS = 300;
export const MAX_TIMEOUT_SECONDS = 3600;

const Item = Type.Object({}, { additionalProperties: true });
const Tool = Type.Object({ type: Type.String() }, { additionalProperties: true });
const ToolChoiceSchema = Type.Union([Type.String(), Type.Object({ type: Type.String() }, { additionalProperties: true })]);

export const AgentRunSchema = Type.Object(
  {
    model: Type.Optional(nullable(Type.String({ minLength: 1 }))),
    input: Type.Union([Type.String(), Type.Array(Item, { minItems: 1, maxItems: MAX_INPUT_ITEMS })]),
    instructions: Type.Optional(nullable(Type.String())),
    tools: Type.Optional(nullable(Type.Array(Tool, { maxItems: MAX_TOOLS }))),
    tool_choice: Type.Optional(Type.Union([ToolChoiceSchema, Type.Null()])),
    reset_tool_choice: Type.Optional(nullable(Type.Boolean())),
    parallel_tool_calls: Type.Optional(nullable(Type.Boolean())),
    file_ids: Type.Optional(nullable(Type.Array(Type.String({ minLength: 1 }), { maxItems: 100 }))),
    max_steps: Type.Optional(nullable(Type.Integer({ minimum: 1, maximum: MAX_MAX_STEPS }))),
    timeout_seconds: Type.Optional(nullable(Type.Number({ exclusiveMinimum: 0, maximum: MAX_TIMEOUT_SECONDS }))),
    max_output_tokens: Type.Optional(nullable(Type.Integer({ minimum: 1, maximum: 200000 }))),
    reasoning: Type.Optional(nullable(Type.Object({ effort: Type.Optional(nullable(Type.String())) }, { additionalProperties: true }))),
    temperature: Type.Optional(nullable(Type.Number({ minimum: 0, maximum: 2 }))),
    top_p: Type.Optional(nullable(Type.Number({ exclusiveMinimum: 0, maximum: 1 }))),
    seed: Type.Optional(nullable(Type.Integer({ minimum: -9223372036854775808, maximum: 9223372036854775807 }))),
    metadata: Type.Optional(nullable(Type.Object({}, { additionalProperties: Type.String({ maxLength: 512 }), maxProperties: 16 }))),
    stream: Type.Optional(nullable(Type.Boolean())),
  },
  { additionalProperties: true },
);

export type AgentRunBody = Static<typeof AgentRunSchema>;

/** A tool as the run object lists it. */
export type ToolEcho = { type: BuiltinTool } | { type: "function"; name: string; description: string | null; parameters: Record<string, unknown> | null };

export interface AgentRunRequest {
  /** svc-fast or svc-thinking: the mode every step runs in. */
  model: string;
  /** The conversation so far: the caller's instructions and input items (the agent's own prompt is added per run). */
  messages: CanonicalMessage[];
  instructions: string | null;
  builtins: BuiltinTool[];
  functions: ToolDefinition[];
  toolsEcho: ToolEcho[];
  /** The first step's tool choice; later steps use auto unless resetToolChoice is false. */
  toolChoice: ToolChoice;
  toolChoiceEcho: unknown;
  resetToolChoice: boolean;
  fileIds: string[] | null;
  maxSteps: number;
  timeoutSeconds: number;
  stream: boolean;
  metadata: Record<string, string>;
  /** Everything a step's inference needs besides messages, tools and tool choice. */
  base: Omit<InferenceRequest, "messages" | "tools" | "toolChoice">;
}

export function decodeAgentRunRequest(body: AgentRunBody): AgentRunRequest {
  const { builtins, functionTools, echo } = splitTools(body.tools ?? undefined);
  const decoded = decodeResponsesRequest({
    model: body.model,
    input: body.input,
    tools: functionTools as NonNullable<ResponsesRequestBody["tools"]>,
    tool_choice: "auto",
    parallel_tool_calls: body.parallel_tool_calls,
    reasoning: body.reasoning,
    max_output_tokens: body.max_output_tokens,
    temperature: body.temperature,
    top_p: body.top_p,
    seed: body.seed,
    metadata: body.metadata,
  });
  const functions = decoded.inference.tools;
  for (const fn of functions)
    if (isBuiltinTool(fn.name)) throw invalidRequest(`The function name '${fn.name}' is taken by a built-in tool; choose another name.`, "tools", "duplicate_tool_name");
  const { choice, echo: choiceEcho } = decodeToolChoice(body.tool_choice ?? undefined, builtins, functions);
  const { messages: _messages, tools: _tools, toolChoice: _choice, ...base } = decoded.inference;
  return {
    model: modelIdOfMode(decoded.inference.reasoning.mode),
    messages: decoded.inference.messages,
    instructions: body.instructions ?? null,
    builtins,
    functions,
    toolsEcho: echo,
    toolChoice: choice,
    toolChoiceEcho: choiceEcho,
    resetToolChoice: body.reset_tool_choice ?? true,
    fileIds: body.file_ids ? [...new Set(body.file_ids)] : null,
    maxSteps: body.max_steps ?? DEFAULT_MAX_STEPS,
    timeoutSeconds: body.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS,
    stream: body.stream === true,
    metadata: body.metadata ?? {},
    base: { ...base, surface: "agent" },
  };
}

/** Without `tools`, every built-in tool is offered; with it, exactly the listed ones. */
function splitTools(tools: AgentRunBody["tools"]): { builtins: BuiltinTool[]; functionTools: Array<Record<string, unknown>>; echo: ToolEcho[] } {
  if (tools == null) return { builtins: [...BUILTIN_TOOLS], functionTools: [], echo: BUILTIN_TOOLS.map((type) => ({ type })) };
  const builtins: BuiltinTool[] = [];
  const functionTools: Array<Record<string, unknown>> = [];
  const echo: ToolEcho[] = [];
  tools.forEach((entry, i) => {
    const tool = entry as Record<string, unknown> & { type: string };
    if (tool.type === "function") {
      functionTools.push(tool);
      echo.push({
        type: "function",
        name: String(tool.name),
        description: typeof tool.description === "string" ? tool.description : null,
        parameters: (tool.parameters as Record<string, unknown> | null | undefined) ?? null,
      });
      return;
    }
    if (!isBuiltinTool(tool.type))
      throw invalidRequest(`Unknown tool type '${tool.type}'; use function, or a built-in tool: ${BUILTIN_TOOLS.join(", ")}.`, `tools[${i}].type`, "unsupported_value");
    if (builtins.includes(tool.type)) throw invalidRequest(`The tool '${tool.type}' is listed twice.`, `tools[${i}]`, "duplicate_tool_name");
    builtins.push(tool.type);
    echo.push({ type: tool.type });
  });
  return { builtins, functionTools, echo };
}

function decodeToolChoice(choice: AgentRunBody["tool_choice"], builtins: BuiltinTool[], functions: ToolDefinition[]): { choice: ToolChoice; echo: unknown } {
  const count = builtins.length + functions.length;
  if (choice == null || choice === "auto") return { choice: { type: "auto" }, echo: "auto" };
  if (choice === "none") return { choice: { type: "none" }, echo: "none" };
  if (choice === "required") {
    if (count === 0) throw invalidRequest("tool_choice 'required' needs at least one tool.", "tool_choice");
    return { choice: { type: "required" }, echo: "required" };
  }
  if (typeof choice === "string")
    throw invalidRequest(`Invalid tool_choice '${choice}'; use none, auto, required, {type: 'function', name} or {type: '<built-in tool>'}.`, "tool_choice");
  const obj = choice as Record<string, unknown>;
  if (obj.type === "function") {
    if (typeof obj.name !== "string") throw invalidRequest("tool_choice of type function needs a name.", "tool_choice.name");
    if (!functions.some((f) => f.name === obj.name))
      throw invalidRequest(`tool_choice names '${obj.name}', which is not a function in 'tools'.`, "tool_choice.name");
    return { choice: { type: "tool", name: obj.name }, echo: { type: "function", name: obj.name } };
  }
  if (typeof obj.type === "string" && isBuiltinTool(obj.type)) {
    if (!builtins.includes(obj.type)) throw invalidRequest(`tool_choice names '${obj.type}', which is not offered in 'tools'.`, "tool_choice.type");
    return { choice: { type: "tool", name: obj.type }, echo: { type: obj.type } };
  }
  throw invalidRequest(`Invalid tool_choice type '${String(obj.type)}'.`, "tool_choice.type", "unsupported_value");
}

export function builtinDefinitions(builtins: BuiltinTool[]): ToolDefinition[] {
  return builtins.map(builtinDefinition);
}
