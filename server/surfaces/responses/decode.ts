// Responses request → canonical InferenceRequest. Pure: no I/O, throws AppError naming the parameter.
//
// The service is stateless, so everything the model sees comes in the request: `instructions` and the
// `input` items. Items of tools the service cannot run, and tools it cannot run, are left out of what the
// model sees rather than refused, so a coding client's own tool list never fails a request.
import { extname } from "node:path";
import { invalidRequest } from "../../core/errors.js";
import type { CanonicalMessage, ContentPart, InferenceRequest, ToolCall } from "../../core/inference.js";
import { DEFAULT_SAMPLING } from "../../pipeline/pipeline.js";
import { reasoningForEffort } from "../../pipeline/reasoning-policy.js";
import { resolveModelAlias } from "../models.js";
import { isObj, joinContentText, mapContentParts, partText, sourceOfUrl, textPart, type Obj } from "../content-parts.js";
import { checkListLength, MAX_CONTENT_PARTS } from "../list-limits.js";
import { decodeGlassbox, sourceOfDataUrl, toSeed } from "../request-params.js";
import { decodeTextFormat, decodeToolChoice, decodeTools, NAMESPACE_SEPARATOR, type FunctionToolEcho, type NamespacedName } from "./decode-tools.js";
import { COMPACTION_INSTRUCTION, decodeCompactionContent, summaryMessage } from "./compaction.js";
import type { ResponsesRequestBody } from "./schema.js";

/** Request settings the response object reports back (its required-nullable fields). */
export interface ResponseEcho {
  instructions: string | null;
  metadata: Record<string, string>;
  maxOutputTokens: number | null;
  temperature: number;
  topP: number;
  parallelToolCalls: boolean;
  toolChoice: unknown;
  tools: FunctionToolEcho[];
  reasoning: { effort: string | null; summary: string | null };
  textFormat: Record<string, unknown>;
  /** Model-visible names of namespace functions (`multi_agent_v1.spawn_agent`) → their namespace and name. */
  namespaced: Map<string, NamespacedName>;
  /**
   * The request ended with a compaction_trigger item (Codex's remote compaction): the output is one
   * compaction item holding a summary of the conversation, not a message.
   */
  compaction: boolean;
  /** truncation: "auto" drops the oldest turns when the input does not fit the context. */
  truncation: "auto" | "disabled";
}

export interface DecodedResponsesRequest {
  inference: InferenceRequest;
  stream: boolean;
  echo: ResponseEcho;
}

type AssistantMessage = Extract<CanonicalMessage, { role: "assistant" }>;

/** Output items of hosted tools (web search, computer use, shells, MCP, ...) that only another service could have produced. */
const FOREIGN_ITEM_TYPES = new Set([
  "web_search_call",
  "file_search_call",
  "computer_call",
  "computer_call_output",
  "local_shell_call",
  "local_shell_call_output",
  "shell_call",
  "shell_call_output",
  "apply_patch_call",
  "apply_patch_call_output",
  "code_interpreter_call",
  "image_generation_call",
  "mcp_list_tools",
  "mcp_approval_request",
  "mcp_approval_response",
  "mcp_call",
  "tool_search_call",
  "tool_search_output",
]);

/** The `include` value that asks for the answer's token log-probabilities. */
export const LOGPROBS_INCLUDE = "message.output_text.logprobs";

export function decodeResponsesRequest(body: ResponsesRequestBody): DecodedResponsesRequest {
  rejectStatefulFeatures(body);
  const model = resolveModelAlias(body.model ?? undefined, "model");
  const declared = decodeTools(body.tools ?? undefined);
  const { tools, toolChoice, echo: toolChoiceEcho } = decodeToolChoice(body.tool_choice ?? undefined, declared);
  const effort = body.reasoning?.effort ?? model.defaultEffort;
  const { format, echo: formatEcho } = decodeTextFormat(body.text?.format ?? undefined);

  const input = decodeInput(body.input);
  // Not push(...): a spread of a long list passes every item as an argument, and the stack runs out.
  const messages: CanonicalMessage[] = body.instructions
    ? [{ role: "system", content: [{ type: "text", text: body.instructions }] }, ...input.messages]
    : input.messages;
  const compaction = input.compactionTrigger;
  // A compaction writes a summary: the tools stay described (the prompt's start is then the one the
  // conversation's turns share, and comes from the cache), but the model may not call them.
  if (compaction) messages.push({ role: "user", content: [{ type: "text", text: COMPACTION_INSTRUCTION }] });
  const truncation = compaction || body.truncation === "auto" ? "auto" : "disabled";
  const reasoning = reasoningForEffort(effort);

  const inference: InferenceRequest = {
    surface: "responses",
    messages,
    tools,
    toolChoice: compaction ? { type: "none" } : toolChoice,
    parallelToolCalls: body.parallel_tool_calls ?? true,
    output: compaction ? { type: "text" } : format,
    reasoning,
    maxTokens: body.max_output_tokens ?? undefined,
    ...(truncation === "auto" ? { truncation: "auto" as const } : {}),
    stopSequences: [],
    sampling: {
      temperature: body.temperature ?? undefined,
      topP: body.top_p ?? undefined,
      topK: body.top_k ?? undefined,
      seed: body.seed == null ? undefined : toSeed(body.seed),
    },
    metadata: body.metadata ?? undefined,
    glassbox: decodeGlassbox(body.glassbox ?? undefined),
    ...(body.include?.includes(LOGPROBS_INCLUDE) ? { logprobs: { top: body.top_logprobs ?? 0 } } : {}),
    refusalMode: body.refusal_mode ?? undefined,
    sessionId: body.session_id ?? undefined,
  };
  const echo: ResponseEcho = {
    instructions: body.instructions ?? null,
    metadata: body.metadata ?? {},
    maxOutputTokens: body.max_output_tokens ?? null,
    temperature: body.temperature ?? DEFAULT_SAMPLING.temperature,
    topP: body.top_p ?? DEFAULT_SAMPLING.topP,
    parallelToolCalls: body.parallel_tool_calls ?? true,
    toolChoice: toolChoiceEcho,
    tools: tools.map((t) => declared.echo.get(t.name)!),
    // The effort that ran (the documented default, medium, when none was sent), so a client sees it.
    reasoning: { effort: reasoning.effort, summary: body.reasoning?.summary ?? null },
    textFormat: formatEcho,
    namespaced: declared.namespaced,
    compaction,
    truncation,
  };
  return { inference, stream: body.stream === true, echo };
}

/** Stateless rule: nothing of a conversation is kept, so nothing can be stored, referenced or resumed. */
function rejectStatefulFeatures(body: ResponsesRequestBody): void {
  if (body.store === true)
    throw invalidRequest("This server is stateless and never stores responses: send store false, or leave it out.", "store", "unsupported_value");
  if (body.previous_response_id != null)
    throw invalidRequest(
      "previous_response_id is not supported: this server is stateless and keeps no responses. Send the whole conversation in 'input'.",
      "previous_response_id",
      "unsupported_parameter",
    );
  if (body.background === true)
    throw invalidRequest("Background responses are not supported (they would have to be stored): send background false, or leave it out.", "background", "unsupported_value");
  if (body.conversation != null)
    throw invalidRequest(
      "conversation is not supported: this server is stateless and keeps no conversations. Send the whole conversation in 'input'.",
      "conversation",
      "unsupported_parameter",
    );
}

// ---------------------------------------------------------------------------------------------------
// Input items

/**
 * Items → canonical messages. Consecutive assistant items (text, function calls) form one assistant turn,
 * and a reasoning item right before them becomes that turn's thought, as Chat's reasoning_content does.
 * Every function call must be answered by a function_call_output, and every output must answer a call, except
 * a function_call_output with a name and no call_id, which stands for its own call (decodeInput's case).
 */
function decodeInput(input: ResponsesRequestBody["input"]): { messages: CanonicalMessage[]; compactionTrigger: boolean } {
  if (typeof input === "string") return { messages: [{ role: "user", content: [{ type: "text", text: input }] }], compactionTrigger: false };
  let compactionTrigger = false;
  const messages: CanonicalMessage[] = [];
  let turn: AssistantMessage | null = null;
  let thought: string | undefined;
  const calls = new Map<string, { where: string; answered: boolean }>();

  const assistantTurn = (): AssistantMessage => {
    if (turn) return turn;
    turn = { role: "assistant", content: [], ...(thought ? { reasoning: thought } : {}) };
    thought = undefined;
    messages.push(turn);
    return turn;
  };
  const addCall = (call: ToolCall, where: string) => {
    if (calls.has(call.id)) throw invalidRequest(`Duplicate call_id '${call.id}'.`, `${where}.call_id`);
    calls.set(call.id, { where, answered: false });
    const t = assistantTurn();
    (t.toolCalls ??= []).push(call);
  };
  const addOutput = (callId: unknown, output: unknown, where: string) => {
    if (typeof callId !== "string" || callId === "") throw invalidRequest("A tool output item needs a call_id.", `${where}.call_id`);
    const call = calls.get(callId);
    if (!call || call.answered)
      throw invalidRequest(`No earlier function call with call_id '${callId}' is waiting for this output.`, `${where}.call_id`);
    call.answered = true;
    turn = null;
    messages.push({ role: "tool", toolCallId: callId, content: decodeToolOutput(output, `${where}.output`) });
  };

  input.forEach((raw, i) => {
    const where = `input[${i}]`;
    const item = raw as Obj;
    const type = item.type ?? (item.role !== undefined ? "message" : undefined);
    switch (type) {
      case "message": {
        const role = item.role;
        if (role === "assistant") {
          // An assistant message after calls starts a new turn; its text comes before any calls of its own.
          if (turn?.toolCalls?.length) turn = null;
          const t = assistantTurn();
          const text = decodeAssistantContent(item.content, `${where}.content`);
          if (text) t.content.push({ type: "text", text });
          break;
        }
        turn = null;
        thought = undefined;
        if (role === "user") messages.push({ role: "user", content: decodeInputContent(item.content, `${where}.content`) });
        else if (role === "system" || role === "developer")
          messages.push({ role: "system", content: decodeInputContent(item.content, `${where}.content`) });
        else throw invalidRequest(`Invalid role '${String(role)}'; use user, assistant, system or developer.`, `${where}.role`);
        break;
      }
      case "function_call": {
        addCall(decodeFunctionCall(item, where), where);
        break;
      }
      case "compaction": {
        // A summary this server wrote when the conversation was compacted: the model reads it as a user
        // message. Compaction items of other services cannot be read and are left out.
        turn = null;
        thought = undefined;
        const summary = decodeCompactionContent(item.encrypted_content);
        if (summary !== null) messages.push(summaryMessage(summary));
        break;
      }
      case "compaction_trigger":
        if (i !== input.length - 1)
          throw invalidRequest("A compaction_trigger item must be the last input item.", `${where}.type`);
        compactionTrigger = true;
        break;
      case "custom_tool_call": {
        // A call of a custom (free-text) tool from an earlier turn: shown to the model as a call with {input}.
        if (typeof item.call_id !== "string" || item.call_id === "") throw invalidRequest("A custom_tool_call needs a call_id.", `${where}.call_id`);
        if (typeof item.name !== "string" || item.name === "") throw invalidRequest("A custom_tool_call needs a name.", `${where}.name`);
        addCall({ id: item.call_id, name: item.name, arguments: JSON.stringify({ input: typeof item.input === "string" ? item.input : "" }) }, where);
        break;
      }
      case "function_call_output":
        if (item.call_id === undefined && typeof item.name === "string" && item.name !== "") {
          // A tool result the client wrote without a call of the model's: Codex keeps the thread's goal in its
          // history as {type, id, name: "goal_objective", namespace: "agent", output}, with no call_id. The
          // model reads it as the call of that tool (no arguments) and its result.
          const callId = `uncalled_${typeof item.id === "string" && item.id !== "" ? item.id : i}`;
          addCall(decodeFunctionCall({ call_id: callId, name: item.name, namespace: item.namespace, arguments: "{}" }, where), where);
          addOutput(callId, item.output, where);
          break;
        }
        addOutput(item.call_id, item.output, where);
        break;
      case "custom_tool_call_output":
        addOutput(item.call_id, item.output, where);
        break;
      case "reasoning": {
        // Given back as the thought of the assistant turn that follows it; dropped when none follows.
        turn = null;
        const text = reasoningTextOf(item, where);
        thought = thought && text ? `${thought}\n\n${text}` : thought || text || undefined;
        break;
      }
      case "item_reference":
        throw invalidRequest(
          "item_reference needs stored responses, and this server is stateless: send the item itself. " +
            "(With the Vercel AI SDK, set providerOptions.openai.store to false.)",
          where,
          "unsupported_parameter",
        );
      default:
        if (typeof type === "string" && FOREIGN_ITEM_TYPES.has(type)) break;
        throw invalidRequest(
          `Unknown input item type '${String(type)}'; use message, function_call, function_call_output or reasoning items.`,
          `${where}.type`,
        );
    }
  });

  for (const [id, call] of calls)
    if (!call.answered) throw invalidRequest(`The function call '${id}' has no function_call_output; send one for every call.`, call.where);
  return { messages, compactionTrigger };
}

function decodeFunctionCall(item: Obj, where: string): ToolCall {
  if (typeof item.call_id !== "string" || item.call_id === "") throw invalidRequest("A function_call item needs a call_id.", `${where}.call_id`);
  if (typeof item.name !== "string" || item.name === "") throw invalidRequest("A function_call item needs a name.", `${where}.name`);
  const args = item.arguments ?? "{}";
  if (typeof args !== "string") throw invalidRequest("function_call arguments must be a JSON string.", `${where}.arguments`);
  // A call of a namespace function: the model wrote it under its namespaced name, and reads it so again.
  const name = typeof item.namespace === "string" && item.namespace !== "" ? `${item.namespace}${NAMESPACE_SEPARATOR}${item.name}` : item.name;
  return { id: item.call_id, name, arguments: args };
}

function reasoningTextOf(item: Obj, where: string): string {
  checkListLength(item.content, MAX_CONTENT_PARTS, `${where}.content`);
  checkListLength(item.summary, MAX_CONTENT_PARTS, `${where}.summary`);
  const texts = (list: unknown) =>
    Array.isArray(list) ? list.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).filter(Boolean) : [];
  // Full reasoning text where a client sends it, else the summary (what this server returns).
  const content = texts(item.content);
  return (content.length ? content : texts(item.summary)).join("\n\n");
}

function decodeAssistantContent(content: unknown, where: string): string {
  return joinContentText(content, where, (part, at) => {
    if (part.type === "output_text" || part.type === "input_text") return partText(part, at);
    if (part.type === "refusal") return typeof part.refusal === "string" ? part.refusal : "";
    throw invalidRequest(`Assistant content parts of type '${String(part.type)}' are not accepted; use output_text.`, `${at}.type`);
  });
}

function decodeToolOutput(output: unknown, where: string): ContentPart[] {
  if (typeof output === "string") return [textPart(output)];
  if (Array.isArray(output)) return decodeInputContent(output, where);
  throw invalidRequest("A tool output must be a string or an array of input_text, input_image or input_file parts.", where);
}

function decodeInputContent(content: unknown, where: string): ContentPart[] {
  return mapContentParts(content, where, textPart, (part, at): ContentPart => {
    switch (part.type) {
      case "input_text":
        return textPart(partText(part, at));
      case "input_image": {
        if (typeof part.image_url === "string") return { type: "image", source: sourceOfUrl(part.image_url), param: at };
        if (typeof part.file_id === "string") return { type: "image", source: { kind: "file_id", fileId: part.file_id }, param: at };
        throw invalidRequest("An input_image part needs image_url or file_id.", `${at}.image_url`);
      }
      case "input_file":
        return decodeInputFile(part, at);
      default:
        throw invalidRequest(`Unknown content part type '${String(part.type)}'; use input_text, input_image or input_file.`, `${at}.type`);
    }
  });
}

const MEDIA_TYPE_OF_EXTENSION: Record<string, string> = {
  ".pdf": "application/pdf",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
};

function decodeInputFile(part: Obj, at: string): ContentPart {
  const filename = typeof part.filename === "string" && part.filename !== "" ? part.filename : undefined;
  if (typeof part.file_data === "string") {
    const source = sourceOfDataUrl(part.file_data);
    if (source) return { type: "file", source, filename, param: at };
    // Plain base64: the filename's extension tells the type (ingest reads text and code files by extension).
    if (!filename)
      throw invalidRequest("input_file with plain base64 file_data needs a filename; or send a data URL (data:<media_type>;base64,<data>).", `${at}.filename`);
    const mediaType = MEDIA_TYPE_OF_EXTENSION[extname(filename).toLowerCase()] ?? "application/octet-stream";
    return { type: "file", source: { kind: "base64", mediaType, data: part.file_data }, filename, param: at };
  }
  if (typeof part.file_id === "string") return { type: "file", source: { kind: "file_id", fileId: part.file_id }, filename, param: at };
  if (typeof part.file_url === "string") return { type: "file", source: { kind: "url", url: part.file_url }, filename, param: at };
  throw invalidRequest("An input_file part needs file_data (with a filename), file_id or file_url.", `${at}.file_data`);
}
