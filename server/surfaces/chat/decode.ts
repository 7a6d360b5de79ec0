// Chat Completions request → canonical InferenceRequest. Pure: no I/O, throws AppError naming the parameter.
import { invalidRequest } from "../../core/errors.js";
import type {
  CanonicalMessage,
  ContentPart,
  InferenceRequest,
  OutputFormat,
  ToolCall,
  ToolChoice,
  ToolDefinition,
} from "../../core/inference.js";
import { reasoningForEffort } from "../../pipeline/reasoning-policy.js";
import { resolveModelAlias } from "../models.js";
import { isObj, joinContentText, mapContentParts, partText, sourceOfUrl, textPart, type Obj } from "../content-parts.js";
import { checkListLength, MAX_TOOL_CALLS } from "../list-limits.js";
import { decodeGlassbox, sourceOfDataUrl, toSeed } from "../request-params.js";
import type { ChatRequestBody } from "./schema.js";

export interface DecodedChatRequest {
  inference: InferenceRequest;
  stream: boolean;
  sessionId?: string;
}

export function decodeChatRequest(body: ChatRequestBody): DecodedChatRequest {
  const model = resolveModelAlias(body.model ?? undefined, "model");
  if (body.n != null && body.n !== 1)
    throw invalidRequest(`Only n = 1 is supported (got ${body.n}); send one request per choice.`, "n", "unsupported_value");

  const tools = decodeTools(body.tools ?? undefined);
  const toolChoice = decodeToolChoice(body.tool_choice ?? undefined, tools);
  const effort = body.reasoning_effort ?? model.defaultEffort;
  const stop = body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
  const glassbox = decodeGlassbox(body.glassbox ?? undefined);
  if (body.top_logprobs != null && body.logprobs !== true)
    throw invalidRequest("top_logprobs needs logprobs: true.", "top_logprobs");

  const inference: InferenceRequest = {
    surface: "chat",
    messages: body.messages.map((m, i) => decodeMessage(m as Obj, i)),
    tools,
    toolChoice,
    parallelToolCalls: body.parallel_tool_calls ?? true,
    output: decodeResponseFormat(body.response_format ?? undefined),
    reasoning: reasoningForEffort(effort, body.max_reasoning_tokens ?? undefined),
    maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
    stopSequences: stop,
    sampling: {
      temperature: body.temperature ?? undefined,
      topP: body.top_p ?? undefined,
      topK: body.top_k ?? undefined,
      seed: body.seed == null ? undefined : toSeed(body.seed),
      frequencyPenalty: body.frequency_penalty ?? undefined,
      presencePenalty: body.presence_penalty ?? undefined,
    },
    glassbox,
    ...(body.logprobs === true ? { logprobs: { top: body.top_logprobs ?? 0 } } : {}),
    refusalMode: body.refusal_mode ?? undefined,
    sessionId: body.session_id ?? undefined,
    ...predictionOf(body.prediction ?? undefined),
  };
  return { inference, stream: body.stream === true, sessionId: body.session_id ?? undefined };
}

function textOfParts(content: unknown, where: string, allowRefusal = false): string {
  if (content == null) return "";
  return joinContentText(content, where, (part, at) => {
    if (part.type === "text") return partText(part, at, "A text part");
    if (allowRefusal && part.type === "refusal") return typeof part.refusal === "string" ? part.refusal : "";
    throw invalidRequest(`Content parts of type '${String(part.type)}' are not allowed in this message; use text parts.`, `${at}.type`);
  });
}

/** Predicted Outputs' content as one text (its parts joined); nothing for an empty one. */
function predictionOf(prediction: ChatRequestBody["prediction"]): { prediction?: string } {
  if (!prediction) return {};
  const text = typeof prediction.content === "string" ? prediction.content : prediction.content.map((part) => part.text).join("");
  return text === "" ? {} : { prediction: text };
}

function decodeUserContent(content: unknown, where: string): ContentPart[] {
  return mapContentParts(content, where, textPart, (part, at): ContentPart => {
    switch (part.type) {
      case "text":
        return textPart(partText(part, at, "A text part"));
      case "file": {
        const file = part.file;
        if (!isObj(file)) throw invalidRequest("A file part needs a 'file' object.", `${at}.file`);
        if (typeof file.file_id === "string") return { type: "file", source: { kind: "file_id", fileId: file.file_id }, param: `${at}.file.file_id` };
        if (typeof file.file_data === "string") {
          const source = sourceOfDataUrl(file.file_data);
          if (!source) throw invalidRequest("file_data must be a data URL: data:<media_type>;base64,<data>.", `${at}.file.file_data`);
          return {
            type: "file",
            source,
            filename: typeof file.filename === "string" ? file.filename : undefined,
            param: `${at}.file`,
          };
        }
        throw invalidRequest("A file part needs file.file_id, or file.filename with file.file_data.", `${at}.file`);
      }
      case "image_url": {
        const image = part.image_url;
        const url = isObj(image) ? image.url : undefined;
        if (typeof url !== "string") throw invalidRequest("An image_url part needs image_url.url.", `${at}.image_url.url`);
        return { type: "image", source: sourceOfUrl(url), param: `${at}.image_url` };
      }
      case "input_audio":
        throw invalidRequest("Audio input parts are not supported; upload audio through the Files API.", `${at}.type`, "unsupported_content");
      default:
        throw invalidRequest(`Unknown content part type '${String(part.type)}'.`, `${at}.type`);
    }
  });
}

function decodeToolCalls(value: unknown, where: string): ToolCall[] | undefined {
  if (value == null) return undefined;
  if (!Array.isArray(value)) throw invalidRequest("tool_calls must be an array.", where);
  checkListLength(value, MAX_TOOL_CALLS, where);
  return value.map((call: unknown, j) => {
    const at = `${where}[${j}]`;
    if (!isObj(call)) throw invalidRequest("A tool call must be an object.", at);
    if (typeof call.id !== "string" || call.id === "") throw invalidRequest("A tool call needs an id.", `${at}.id`);
    if (call.type !== undefined && call.type !== "function")
      throw invalidRequest("Only function tool calls are supported.", `${at}.type`);
    const fn = call.function;
    if (!isObj(fn) || typeof fn.name !== "string") throw invalidRequest("A tool call needs function.name.", `${at}.function.name`);
    const args = fn.arguments === undefined ? "{}" : fn.arguments;
    if (typeof args !== "string") throw invalidRequest("function.arguments must be a JSON string.", `${at}.function.arguments`);
    return { id: call.id, name: fn.name, arguments: args };
  });
}

function decodeMessage(message: Obj, index: number): CanonicalMessage {
  const where = `messages[${index}]`;
  switch (message.role) {
    case "system":
    case "developer":
      return { role: "system", content: [{ type: "text", text: textOfParts(message.content, `${where}.content`) }] };
    case "user":
      if (message.content == null) throw invalidRequest("A user message needs content.", `${where}.content`);
      return { role: "user", content: decodeUserContent(message.content, `${where}.content`) };
    case "assistant": {
      const toolCalls = decodeToolCalls(message.tool_calls, `${where}.tool_calls`);
      const text = textOfParts(message.content, `${where}.content`, true);
      if (!text && !toolCalls?.length && message.content == null)
        throw invalidRequest("An assistant message needs content or tool_calls.", `${where}.content`);
      const reasoning = typeof message.reasoning_content === "string" ? message.reasoning_content : undefined;
      return { role: "assistant", content: text ? [{ type: "text", text }] : [], reasoning, toolCalls };
    }
    case "tool":
      if (typeof message.tool_call_id !== "string" || message.tool_call_id === "")
        throw invalidRequest("A tool message needs tool_call_id.", `${where}.tool_call_id`);
      return {
        role: "tool",
        toolCallId: message.tool_call_id,
        content: [{ type: "text", text: textOfParts(message.content, `${where}.content`) }],
      };
    case "function":
      throw invalidRequest("The 'function' role is deprecated and not supported; use 'tool' messages.", `${where}.role`);
    default:
      throw invalidRequest(
        `Invalid role '${String(message.role)}'; use system, developer, user, assistant or tool.`,
        `${where}.role`,
      );
  }
}

function decodeTools(tools: ChatRequestBody["tools"]): ToolDefinition[] {
  if (!tools) return [];
  const seen = new Set<string>();
  return tools.map((tool, i) => {
    const where = `tools[${i}]`;
    if (tool.type !== "function")
      throw invalidRequest(`Only tools of type 'function' are supported (got '${tool.type}').`, `${where}.type`);
    if (!tool.function) throw invalidRequest("A function tool needs a 'function' object.", `${where}.function`);
    const name = tool.function.name;
    if (seen.has(name)) throw invalidRequest(`Duplicate tool name '${name}'.`, `${where}.function.name`);
    seen.add(name);
    return {
      name,
      description: tool.function.description,
      parameters: tool.function.parameters ?? { type: "object", properties: {} },
      param: `${where}.function.parameters`,
      ...(tool.function.strict === true ? { strict: true } : {}),
    };
  });
}

function decodeToolChoice(choice: ChatRequestBody["tool_choice"], tools: ToolDefinition[]): ToolChoice {
  if (choice == null) return { type: "auto" };
  if (typeof choice === "string") {
    if (choice === "auto" || choice === "none") return { type: choice };
    if (choice === "required") {
      if (tools.length === 0) throw invalidRequest("tool_choice 'required' needs at least one tool in 'tools'.", "tool_choice");
      return { type: "required" };
    }
    throw invalidRequest(`Invalid tool_choice '${choice}'; use none, auto, required or a function.`, "tool_choice");
  }
  if (choice.type === "function" && choice.function && typeof choice.function.name === "string") {
    const name = choice.function.name;
    if (!tools.some((t) => t.name === name)) throw invalidRequest(`tool_choice names '${name}', which is not in 'tools'.`, "tool_choice.function.name");
    return { type: "tool", name };
  }
  throw invalidRequest("tool_choice must be none, auto, required or {type: 'function', function: {name}}.", "tool_choice");
}

function decodeResponseFormat(format: ChatRequestBody["response_format"]): OutputFormat {
  if (!format || format.type === "text") return { type: "text" };
  if (format.type === "json_object") return { type: "json_object" };
  const spec = format.json_schema;
  if (!spec) throw invalidRequest("response_format of type json_schema needs a json_schema object.", "response_format.json_schema");
  if (spec.schema === undefined) return { type: "json_object" };
  return {
    type: "json_schema",
    name: spec.name,
    schema: spec.schema,
    strict: spec.strict ?? undefined,
    param: "response_format.json_schema.schema",
  };
}

