// Why one file (over 400 lines): it is the one decoder of one request body, the Messages request, and its
// sections follow that body's fields (system, messages and their blocks, thinking, tools, tool_choice,
// output format) and share its block helpers (cache_control marks, sources, text blocks). The Responses
// decoder split off its tools because they are a sub-language of their own (namespaces, allowed_tools);
// the Messages tools part here is some 60 lines and would not earn a module.
// Messages request → canonical InferenceRequest. Pure: no I/O, throws AppError naming the parameter as the
// client wrote it (messages[1].content[0].tool_use_id).
import { invalidRequest } from "../../core/errors.js";
import type {
  CanonicalMessage,
  ContentPart,
  FileSource,
  InferenceRequest,
  OutputFormat,
  ReasoningRequest,
  ToolCall,
  ToolChoice,
  ToolDefinition,
} from "../../core/inference.js";
import { reasoningForMessages } from "./reasoning.js";
import { checkListLength, MAX_CONTENT_PARTS } from "../list-limits.js";
import type { CountTokensRequestBody, MessagesRequestBody } from "./schema.js";

export type ThinkingDisplay = "summarized" | "omitted";

export interface DecodedMessagesRequest {
  inference: InferenceRequest;
  stream: boolean;
  /** Echoed in the response, whatever it is. */
  model: string;
  /** thinking.display: "omitted" sends thinking blocks with their signature but without their text. */
  thinkingDisplay: ThinkingDisplay;
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,128}$/;

export function decodeMessagesRequest(body: MessagesRequestBody): DecodedMessagesRequest {
  const { messages, tools, toolChoice, parallelToolCalls } = decodeConversation(body);
  const { reasoning, display } = decodeThinking(body.thinking ?? undefined, body.model, body.max_tokens);
  const inference: InferenceRequest = {
    surface: "messages",
    messages,
    tools,
    toolChoice,
    parallelToolCalls,
    output: decodeOutputFormat(body),
    reasoning,
    maxTokens: body.max_tokens,
    stopSequences: body.stop_sequences ?? [],
    sampling: {
      temperature: body.temperature ?? undefined,
      topP: body.top_p ?? undefined,
      topK: body.top_k ?? undefined,
    },
    metadata: body.metadata ?? undefined,
    ...(body.session_id != null ? { sessionId: body.session_id } : {}),
    ...(body.refusal_mode != null ? { refusalMode: body.refusal_mode } : {}),
  };
  return { inference, stream: body.stream === true, model: body.model, thinkingDisplay: display };
}

/** count_tokens: the same conversation fields, without max_tokens (so budget_tokens is not compared to it). */
export function decodeCountTokensRequest(body: CountTokensRequestBody): InferenceRequest {
  const { messages, tools, toolChoice, parallelToolCalls } = decodeConversation(body);
  const { reasoning } = decodeThinking(body.thinking ?? undefined, body.model, undefined);
  return { surface: "messages", messages, tools, toolChoice, parallelToolCalls, output: decodeOutputFormat(body), reasoning, stopSequences: [], sampling: {} };
}

/**
 * Structured outputs: `output_config.format` or the older `output_format` (the SDKs' beta field), each
 * `{type: "json_schema", schema}`. The answer is then generated under the schema's grammar and checked
 * against it, exactly as Chat's `response_format: json_schema`; a schema the grammar cannot express is a
 * 400 invalid_schema naming `<field>.schema` (pipeline checkSchemas). Always strict: Anthropic's structured
 * outputs guarantee the schema and have no opt-out, so a keyword the grammar cannot hold is refused too.
 */
function decodeOutputFormat(body: CountTokensRequestBody): OutputFormat {
  const config = body.output_config?.format ?? undefined;
  const beta = body.output_format ?? undefined;
  if (config && beta)
    throw invalidRequest("The output format is given twice, here and in output_config.format; send it once (this field is the deprecated spelling).", "output_format");
  const format = config ?? beta;
  if (!format) return { type: "text" };
  const where = config ? "output_config.format" : "output_format";
  if (format.type !== "json_schema")
    throw invalidRequest(`Invalid output format type '${format.type}'; the one format is json_schema (with a schema).`, `${where}.type`);
  const schema = (format as Obj).schema;
  if (!isObj(schema)) throw invalidRequest("An output format of type json_schema needs a 'schema' object (a JSON schema).", `${where}.schema`);
  return { type: "json_schema", schema, strict: true, param: `${where}.schema` };
}

function decodeConversation(body: CountTokensRequestBody) {
  const tools = decodeTools(body.tools ?? undefined);
  const { toolChoice, parallelToolCalls } = decodeToolChoice(body.tool_choice ?? undefined, tools);
  const system = decodeSystem(body.system ?? undefined);
  const conversation: CanonicalMessage[] = [];
  body.messages.forEach((message, i) => {
    const where = `messages[${i}]`;
    switch (message.role) {
      case "user":
        conversation.push(...decodeUserMessage(message.content, `${where}.content`));
        break;
      case "assistant":
        conversation.push(decodeAssistantMessage(message.content, `${where}.content`));
        break;
      case "system": {
        // Claude Code sends system messages among the messages (its environment block, later reminders).
        // They stay where they stand, so that the prompt's start does not change from turn to turn; the
        // engine decides how the chat template renders them (see placeSystemMessages in engine/prompt.ts).
        const content = decodeTextBlocks(message.content, `${where}.content`);
        if (content.length > 0) conversation.push({ role: "system", content });
        break;
      }
      default:
        throw invalidRequest(`Invalid role '${String(message.role)}'; use user or assistant.`, `${where}.role`);
    }
  });
  if (!conversation.some((m) => m.role !== "system")) throw invalidRequest("At least one user or assistant message is required.", "messages");
  checkToolPairs(body.messages);
  const messages: CanonicalMessage[] = system.length > 0 ? [{ role: "system", content: system }, ...conversation] : conversation;
  const topLevel = (body as { cache_control?: unknown }).cache_control;
  if (decodeCacheControl(topLevel, "cache_control")) markLastBlock(messages);
  return { messages, tools, toolChoice, parallelToolCalls };
}

function decodeThinking(
  thinking: MessagesRequestBody["thinking"] | undefined,
  model: string,
  maxTokens: number | undefined,
): { reasoning: ReasoningRequest; display: ThinkingDisplay } {
  const display = thinking?.display ?? "summarized";
  switch (thinking?.type) {
    case undefined:
    case "adaptive":
    case "between_tools":
      // The model decides: the mode and budget its name gives.
      return { reasoning: reasoningForMessages(model, undefined), display };
    case "disabled":
      return { reasoning: reasoningForMessages(model, { type: "disabled" }), display };
    case "enabled": {
      const budget = thinking.budget_tokens;
      if (budget === undefined) throw invalidRequest("thinking of type 'enabled' needs budget_tokens.", "thinking.budget_tokens");
      if (maxTokens !== undefined && budget >= maxTokens)
        throw invalidRequest(
          `thinking.budget_tokens (${budget}) must be less than max_tokens (${maxTokens}): max_tokens bounds thinking plus answer.`,
          "thinking.budget_tokens",
        );
      return { reasoning: reasoningForMessages(model, { type: "enabled", budget_tokens: budget }), display };
    }
    default:
      throw invalidRequest(
        `Invalid thinking type '${thinking!.type}'; use enabled (with budget_tokens), disabled or adaptive.`,
        "thinking.type",
      );
  }
}

/** true when a valid cache_control is set; null and absent mean none. */
function decodeCacheControl(value: unknown, where: string): boolean {
  if (value == null) return false;
  if (!isObj(value) || value.type !== "ephemeral")
    throw invalidRequest("cache_control must be {\"type\": \"ephemeral\"} (optionally with ttl \"5m\" or \"1h\").", where);
  if (value.ttl != null && value.ttl !== "5m" && value.ttl !== "1h") throw invalidRequest("cache_control.ttl must be \"5m\" or \"1h\".", `${where}.ttl`);
  return true;
}

/** A breakpoint mark, only where one is set (keeps canonical parts free of `cacheBreakpoint: false`). */
function mark(block: Obj, where: string): { cacheBreakpoint?: true } {
  return decodeCacheControl(block.cache_control, `${where}.cache_control`) ? { cacheBreakpoint: true } : {};
}

/**
 * Claude Code's attribution block, first in `system`: `x-anthropic-billing-header: cc_version=…; …`. It is
 * metadata for the vendor's billing, not an instruction, and its suffix changes with every prompt: shown to
 * the model it would end the cached prefix at the prompt's first line. It is left out.
 */
export const BILLING_HEADER_PREFIX = "x-anthropic-billing-header:";

export function isBillingHeader(part: ContentPart): boolean {
  return part.type === "text" && part.text.trimStart().startsWith(BILLING_HEADER_PREFIX);
}

function decodeSystem(system: MessagesRequestBody["system"] | undefined): ContentPart[] {
  if (system === undefined || system === "") return [];
  return decodeTextBlocks(system, "system").filter((part) => !isBillingHeader(part));
}

/** System content: a string or text blocks. */
function decodeTextBlocks(content: unknown, where: string): ContentPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  if (!Array.isArray(content)) throw invalidRequest("Expected a string or an array of text blocks.", where);
  return content.map((block: unknown, j): ContentPart => {
    const at = `${where}[${j}]`;
    if (!isObj(block)) throw invalidRequest("A content block must be an object.", at);
    if (block.type !== "text") throw invalidRequest(`Only text blocks are allowed here (got '${String(block.type)}').`, `${at}.type`);
    return { type: "text", text: textOf(block, at), ...mark(block, at) };
  });
}

function textOf(block: Obj, at: string): string {
  if (typeof block.text !== "string") throw invalidRequest("A text block needs a string 'text'.", `${at}.text`);
  return block.text;
}

function decodeSource(source: unknown, at: string, kind: "image" | "document"): FileSource {
  if (!isObj(source)) throw invalidRequest(`An ${kind} block needs a 'source' object.`, `${at}.source`);
  const field = (name: string) => {
    const value = source[name];
    if (typeof value !== "string") throw invalidRequest(`A ${String(source.type)} source needs a string '${name}'.`, `${at}.source.${name}`);
    return value;
  };
  switch (source.type) {
    case "base64":
      return { kind: "base64", mediaType: field("media_type"), data: field("data") };
    case "url":
      return { kind: "url", url: field("url") };
    case "file":
      return { kind: "file_id", fileId: field("file_id") };
    case "text":
      if (kind === "document") return { kind: "text", mediaType: typeof source.media_type === "string" ? source.media_type : "text/plain", text: field("data") };
      break;
  }
  const allowed = kind === "image" ? "base64, url or file" : "base64, text, content, url or file";
  throw invalidRequest(`Unknown ${kind} source type '${String(source.type)}'; use ${allowed}.`, `${at}.source.type`);
}

/** A document block: one file part, preceded by its `context` when it has one. */
function decodeDocument(block: Obj, at: string): ContentPart[] {
  const title = typeof block.title === "string" ? block.title : undefined;
  const breakpoint = mark(block, at);
  const context: ContentPart[] = typeof block.context === "string" && block.context !== "" ? [{ type: "text", text: block.context }] : [];
  const source = block.source;
  if (isObj(source) && source.type === "content") {
    // Inline content: its text blocks form one text document; images inside go the image path.
    const inner = typeof source.content === "string" ? [{ type: "text", text: source.content }] : source.content;
    if (!Array.isArray(inner)) throw invalidRequest("A content source needs 'content': a string or blocks.", `${at}.source.content`);
    checkListLength(inner, MAX_CONTENT_PARTS, `${at}.source.content`);
    const texts: string[] = [];
    const images: ContentPart[] = [];
    inner.forEach((b: unknown, k) => {
      const where = `${at}.source.content[${k}]`;
      if (!isObj(b)) throw invalidRequest("A content block must be an object.", where);
      if (b.type === "text") texts.push(textOf(b, where));
      else if (b.type === "image") images.push({ type: "image", source: decodeSource(b.source, where, "image"), param: where });
      else throw invalidRequest(`A document's content may hold text and image blocks (got '${String(b.type)}').`, `${where}.type`);
    });
    const file: ContentPart = { type: "file", source: { kind: "text", mediaType: "text/plain", text: texts.join("\n\n") }, title, param: at };
    return [...context, file, ...images].map((part, k, all) => (k === all.length - 1 ? { ...part, ...breakpoint } : part));
  }
  return [...context, { type: "file", source: decodeSource(source, at, "document"), title, param: at, ...breakpoint }];
}

/** Blocks a user message (or a tool_result's content) may hold, apart from tool_result itself. */
function decodeUserBlock(block: Obj, at: string): ContentPart[] {
  switch (block.type) {
    case "text":
      return [{ type: "text", text: textOf(block, at), ...mark(block, at) }];
    case "image":
      return [{ type: "image", source: decodeSource(block.source, at, "image"), param: at, ...mark(block, at) }];
    case "document":
      return decodeDocument(block, at);
    case "thinking":
    case "redacted_thinking":
      return [];
    default:
      throw invalidRequest(
        `Content blocks of type '${String(block.type)}' are not supported here; use text, image, document or tool_result.`,
        `${at}.type`,
      );
  }
}

/**
 * A user turn: each tool_result becomes a tool message (in order), then the other blocks form one user
 * message. Clients put tool results first, as the API requires.
 */
function decodeUserMessage(content: unknown, where: string): CanonicalMessage[] {
  if (typeof content === "string") return [{ role: "user", content: [{ type: "text", text: content }] }];
  const blocks = content as unknown[];
  if (blocks.length === 0) throw invalidRequest("A user message needs at least one content block.", where);
  const out: CanonicalMessage[] = [];
  const parts: ContentPart[] = [];
  blocks.forEach((block, j) => {
    const at = `${where}[${j}]`;
    if (!isObj(block)) throw invalidRequest("A content block must be an object.", at);
    if (block.type === "tool_result") out.push(decodeToolResult(block, at));
    else parts.push(...decodeUserBlock(block, at));
  });
  if (parts.length > 0) out.push({ role: "user", content: parts });
  return out;
}

function decodeToolResult(block: Obj, at: string): CanonicalMessage {
  if (typeof block.tool_use_id !== "string" || block.tool_use_id === "")
    throw invalidRequest("A tool_result block needs the tool_use_id it answers.", `${at}.tool_use_id`);
  if (block.is_error != null && typeof block.is_error !== "boolean") throw invalidRequest("is_error must be a boolean.", `${at}.is_error`);
  let content: ContentPart[];
  if (block.content == null) content = [];
  else if (typeof block.content === "string") content = [{ type: "text", text: block.content }];
  else if (Array.isArray(block.content)) {
    checkListLength(block.content, MAX_CONTENT_PARTS, `${at}.content`);
    content = block.content.flatMap((inner: unknown, k) => {
      const where = `${at}.content[${k}]`;
      if (!isObj(inner)) throw invalidRequest("A content block must be an object.", where);
      if (inner.type !== "text" && inner.type !== "image" && inner.type !== "document")
        throw invalidRequest(`A tool_result may hold text, image and document blocks (got '${String(inner.type)}').`, `${where}.type`);
      return decodeUserBlock(inner, where);
    });
  } else throw invalidRequest("tool_result content must be a string or an array of blocks.", `${at}.content`);
  if (content.length === 0) content = [{ type: "text", text: "" }];
  if (mark(block, at).cacheBreakpoint) content[content.length - 1] = { ...content[content.length - 1]!, cacheBreakpoint: true };
  return { role: "tool", toolCallId: block.tool_use_id, content, ...(block.is_error === true ? { isError: true } : {}) };
}

function decodeAssistantMessage(content: unknown, where: string): CanonicalMessage {
  if (typeof content === "string") return { role: "assistant", content: content ? [{ type: "text", text: content }] : [] };
  const parts: ContentPart[] = [];
  const toolCalls: ToolCall[] = [];
  (content as unknown[]).forEach((block, j) => {
    const at = `${where}[${j}]`;
    if (!isObj(block)) throw invalidRequest("A content block must be an object.", at);
    switch (block.type) {
      case "text":
        // Text the model wrote after a call still renders before the calls: the chat template has one slot.
        parts.push({ type: "text", text: textOf(block, at), ...mark(block, at) });
        break;
      case "tool_use": {
        if (typeof block.id !== "string" || block.id === "") throw invalidRequest("A tool_use block needs an id.", `${at}.id`);
        if (typeof block.name !== "string" || block.name === "") throw invalidRequest("A tool_use block needs a name.", `${at}.name`);
        const input = block.input ?? {};
        if (!isObj(input)) throw invalidRequest("tool_use input must be an object.", `${at}.input`);
        toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(input), ...mark(block, at) });
        break;
      }
      case "thinking":
      case "redacted_thinking":
        // Earlier thoughts are dropped (spec); their signatures are not checked.
        break;
      default:
        throw invalidRequest(
          `Content blocks of type '${String(block.type)}' are not supported in assistant messages; use text and tool_use.`,
          `${at}.type`,
        );
    }
  });
  return { role: "assistant", content: parts, ...(toolCalls.length > 0 ? { toolCalls } : {}) };
}

/** Every tool_use is answered by a later tool_result, and every tool_result answers an earlier tool_use. */
function checkToolPairs(messages: MessagesRequestBody["messages"]): void {
  const open = new Map<string, string>();
  const seen = new Set<string>();
  messages.forEach((message, i) => {
    if (typeof message.content === "string") return;
    message.content.forEach((block, j) => {
      const at = `messages[${i}].content[${j}]`;
      const b = block as Obj;
      if (message.role === "assistant" && b.type === "tool_use") {
        const id = b.id as string;
        if (seen.has(id)) throw invalidRequest(`Duplicate tool_use id '${id}'.`, `${at}.id`);
        seen.add(id);
        open.set(id, at);
      } else if (message.role === "user" && b.type === "tool_result") {
        const id = b.tool_use_id as string;
        if (!open.delete(id))
          throw invalidRequest(
            `tool_result answers '${id}', but no earlier tool_use block has that id (or it was answered already).`,
            `${at}.tool_use_id`,
          );
      }
    });
  });
  for (const [id, at] of open)
    throw invalidRequest(`The tool_use '${id}' has no tool_result; answer every tool_use in a following user message.`, at);
}

/** Top-level cache_control: a breakpoint after the last block of the conversation. */
function markLastBlock(messages: CanonicalMessage[]): void {
  const last = messages.at(-1);
  if (!last) return;
  if (last.role === "assistant" && last.toolCalls?.length) {
    const calls = last.toolCalls;
    calls[calls.length - 1] = { ...calls[calls.length - 1]!, cacheBreakpoint: true };
  } else if (last.content.length > 0) {
    last.content[last.content.length - 1] = { ...last.content[last.content.length - 1]!, cacheBreakpoint: true };
  }
}

/**
 * Custom tools. A tool with `defer_loading: true` (a tool the client would load on demand through tool
 * search, such as Claude Code's placeholder) is checked like the others but not shown to the model.
 */
function decodeTools(tools: MessagesRequestBody["tools"] | undefined): ToolDefinition[] {
  if (!tools) return [];
  const seen = new Set<string>();
  return tools.flatMap((tool, i): ToolDefinition[] => {
    const where = `tools[${i}]`;
    const t = tool as Obj;
    if (t.type != null && t.type !== "custom")
      throw invalidRequest(
        `Server tools (type '${String(t.type)}') are not available on this server; define tools with name and input_schema.`,
        `${where}.type`,
        "unsupported_value",
      );
    if (!TOOL_NAME.test(tool.name)) throw invalidRequest("Tool names must match ^[a-zA-Z0-9_-]{1,128}$.", `${where}.name`);
    if (seen.has(tool.name)) throw invalidRequest(`Duplicate tool name '${tool.name}'.`, `${where}.name`);
    seen.add(tool.name);
    if (!isObj(t.input_schema)) throw invalidRequest("A tool needs an input_schema object (a JSON schema).", `${where}.input_schema`);
    if (t.input_schema.type !== undefined && t.input_schema.type !== "object")
      throw invalidRequest("input_schema must describe an object (type: \"object\").", `${where}.input_schema.type`);
    if (t.description != null && typeof t.description !== "string") throw invalidRequest("description must be a string.", `${where}.description`);
    if (t.defer_loading != null && typeof t.defer_loading !== "boolean") throw invalidRequest("defer_loading must be a boolean.", `${where}.defer_loading`);
    if (t.strict != null && typeof t.strict !== "boolean") throw invalidRequest("strict must be a boolean.", `${where}.strict`);
    const breakpoint = mark(t, where);
    if (t.defer_loading === true) return [];
    return [
      {
        name: tool.name,
        ...(typeof t.description === "string" ? { description: t.description } : {}),
        parameters: t.input_schema,
        param: `${where}.input_schema`,
        // Anthropic's strict tool use: the inputs always match the schema, which must be one that can be held.
        ...(t.strict === true ? { strict: true } : {}),
        ...breakpoint,
      },
    ];
  });
}

function decodeToolChoice(
  choice: MessagesRequestBody["tool_choice"] | undefined,
  tools: ToolDefinition[],
): { toolChoice: ToolChoice; parallelToolCalls: boolean } {
  const parallelToolCalls = choice?.disable_parallel_tool_use !== true;
  switch (choice?.type) {
    case undefined:
    case "auto":
      return { toolChoice: { type: "auto" }, parallelToolCalls };
    case "none":
      return { toolChoice: { type: "none" }, parallelToolCalls };
    case "any":
      if (tools.length === 0) throw invalidRequest("tool_choice 'any' needs at least one tool in 'tools'.", "tool_choice.type");
      return { toolChoice: { type: "required" }, parallelToolCalls };
    case "tool": {
      const name = choice.name;
      if (typeof name !== "string" || name === "") throw invalidRequest("tool_choice of type 'tool' needs the tool's name.", "tool_choice.name");
      if (!tools.some((t) => t.name === name)) throw invalidRequest(`tool_choice names '${name}', which is not in 'tools'.`, "tool_choice.name");
      return { toolChoice: { type: "tool", name }, parallelToolCalls };
    }
    default:
      throw invalidRequest(`Invalid tool_choice type '${choice!.type}'; use auto, any, tool or none.`, "tool_choice.type");
  }
}
