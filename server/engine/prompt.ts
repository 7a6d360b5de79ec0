// Canonical conversation → node-llama-cpp chat history → prompt tokens, rendered by the chat wrapper that
// node-llama-cpp resolves for the loaded model (its own Jinja template, or a specialised wrapper). The
// wrapper also tells us the model's markers for thoughts and tool calls; generation.ts drives them.
import {
  JinjaTemplateChatWrapper,
  LlamaText,
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatModelFunctionCall,
  type ChatModelFunctions,
  type ChatModelResponse,
  type ChatWrapper,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { invalidRequest } from "../core/errors.js";
import { nestsDeeperThan } from "../core/json-depth.js";
import type { CanonicalMessage, ContentPart, ToolDefinition } from "../core/inference.js";
import { chatWrapperMemoKey, knownJinjaOnly, rememberJinjaOnly } from "./chat-wrapper-memo.js";
import type { CacheBreakpoint } from "./types.js";

export interface ToolCallSyntax {
  /** Text that starts a call in the model's output (a special token where the model has one). */
  trigger: string;
  /** Tokens that complete the call prefix after the trigger, up to where the function name begins. */
  prefixRest: Token[];
  /** The full prefix, for forced calls. */
  prefix: Token[];
  /** Between the function name and the arguments object. */
  paramsPrefix: Token[];
  /** After the arguments object. */
  suffix: Token[];
  /** Tokens to ban when calls are not allowed (only when the trigger is a single special token). */
  triggerTokens: Token[];
}

export interface ThoughtSyntax {
  /** Marker text that opens a thought in the model's output, e.g. "<think>". */
  open: string;
  /** Tokens forced to open a thought (the special token alone where there is one). */
  openTokens: Token[];
  /** Marker text that closes it, e.g. "</think>". */
  close: string;
  /** Tokens forced to close a thought when the budget runs out. */
  closeTokens: Token[];
  /** Tokens to ban in fast mode. */
  banTokens: Token[];
}

export interface PromptSyntax {
  thought: ThoughtSyntax | null;
  toolCall: ToolCallSyntax | null;
}

function valueText(value: string | LlamaText | undefined | null | object): LlamaText | null {
  if (value == null) return null;
  if (typeof value === "string") return LlamaText(value);
  if (LlamaText.isLlamaText(value)) return value;
  return null; // e.g. {type: "openedOnStart"}
}

/** Leading special token of a marker, or the whole marker when it starts with ordinary text. */
function leadingMarker(model: LlamaModel, text: LlamaText): { marker: string; tokens: Token[]; special: boolean } {
  const tokens = text.tokenize(model.tokenizer);
  const first = tokens[0];
  if (first !== undefined) {
    const attrs = model.getTokenAttributes(first);
    if (attrs.control || attrs.userDefined) return { marker: model.detokenize([first], true), tokens: [first], special: true };
  }
  return { marker: text.toString(), tokens, special: false };
}

/**
 * The model's chat wrappers: as it thinks, and for fast mode (the same where the template has no switch).
 * node-llama-cpp's automatic resolution renders the model's template against each specialised wrapper it
 * knows, about a second on 2 cores where none matches (the test model's template, many fine-tunes'); fast
 * mode's wrapper is then the same Jinja template with reasoning off, asked for by type: the scan once a load,
 * and not at all once a template is known to match none.
 */
export function resolveChatWrappers(model: LlamaModel): { thinking: ChatWrapper; fast: ChatWrapper } {
  // A template that matched no specialised wrapper before is asked for by type (chat-wrapper-memo.ts).
  const key = chatWrapperMemoKey(model);
  const known = key !== null && knownJinjaOnly(key);
  const thinking = resolveChatWrapper(model, known ? { type: "jinjaTemplate" } : {});
  if (key !== null && !known && thinking instanceof JinjaTemplateChatWrapper) rememberJinjaOnly(key);
  // A Jinja template renders fast mode with enable_thinking=false (an empty thought, as the model was trained).
  const fast =
    thinking instanceof JinjaTemplateChatWrapper
      ? (resolveChatWrapper(model, { type: "jinjaTemplate", customWrapperSettings: { jinjaTemplate: { reasoning: false } } }) ?? thinking)
      : thinking;
  return { thinking, fast };
}

export function resolvePromptSyntax(model: LlamaModel, wrapper: ChatWrapper): PromptSyntax {
  let thought: ThoughtSyntax | null = null;
  const thoughtSettings = wrapper.settings.segments?.thought;
  const thoughtPrefix = valueText(thoughtSettings?.prefix);
  const thoughtSuffix = valueText(thoughtSettings?.suffix);
  if (thoughtPrefix && thoughtSuffix && thoughtPrefix.toString().trim() && thoughtSuffix.toString().trim()) {
    const open = leadingMarker(model, LlamaText(thoughtPrefix.toString().trimStart()));
    const closeText = thoughtSuffix.toString().trim();
    thought = {
      open: open.marker.trim() || open.marker,
      openTokens: open.tokens,
      close: closeText,
      closeTokens: LlamaText(thoughtSuffix.toString().trimEnd()).tokenize(model.tokenizer),
      banTokens: open.special ? open.tokens : [],
    };
  }

  let toolCall: ToolCallSyntax | null = null;
  const call = wrapper.settings.functions?.call;
  const callPrefix = valueText(call?.prefix);
  if (call && callPrefix && callPrefix.toString().trim()) {
    const prefixTokens = callPrefix.tokenize(model.tokenizer);
    const lead = leadingMarker(model, callPrefix);
    const triggerTokenCount = lead.special ? 1 : prefixTokens.length;
    toolCall = {
      trigger: lead.marker,
      prefixRest: prefixTokens.slice(triggerTokenCount),
      prefix: prefixTokens,
      paramsPrefix: (valueText(call.paramsPrefix) ?? LlamaText("")).tokenize(model.tokenizer),
      suffix: (valueText(call.suffix) ?? LlamaText("")).tokenize(model.tokenizer),
      triggerTokens: lead.special ? lead.tokens : [],
    };
  }
  return { thought, toolCall };
}

function partsToText(parts: ContentPart[], where: string): string {
  return parts
    .map((part, i) => {
      if (part.type === "text") return part.text;
      // Files and images are turned into text by the ingest step before the engine; anything left is a bug
      // in the caller, reported as the client's error so it is never a 500.
      throw invalidRequest(`Content of type ${part.type} is not supported here.`, `${where}.content[${i}]`);
    })
    .join("\n\n");
}

/** Arguments nested deeper than this are shown to the template as their text (its JSON walk recurses). */
const MAX_ARGUMENTS_DEPTH = 256;

function parseArguments(text: string): unknown {
  try {
    const value: unknown = JSON.parse(text);
    return nestsDeeperThan(value, MAX_ARGUMENTS_DEPTH) ? text : value;
  } catch {
    return text;
  }
}

/**
 * Builds node-llama-cpp's chat history. Assistant tool calls pair with the tool messages that answer them
 * (node-llama-cpp keeps a call and its result together inside the model response), and the last item is
 * the model response that generation continues.
 */
export function toChatHistory(messages: CanonicalMessage[], tools: ToolDefinition[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  const descriptions = new Map(tools.map((t) => [t.name, t.description]));
  const pendingCalls = new Map<string, { call: ChatModelFunctionCall; index: number }>();
  let currentModel: ChatModelResponse | null = null;

  messages.forEach((message, index) => {
    const where = `messages[${index}]`;
    switch (message.role) {
      case "system":
        currentModel = null;
        history.push({ type: "system", text: partsToText(message.content, where) });
        break;
      case "user":
        currentModel = null;
        history.push({ type: "user", text: partsToText(message.content, where) });
        break;
      case "assistant": {
        // An assistant turn continues across tool results until the next user or system message.
        if (currentModel === null) {
          currentModel = { type: "model", response: [] };
          history.push(currentModel);
        }
        const text = partsToText(message.content, where);
        if (message.reasoning) currentModel.response.push({ type: "segment", segmentType: "thought", text: message.reasoning, ended: true });
        if (text) currentModel.response.push(text);
        (message.toolCalls ?? []).forEach((tc, i) => {
          const call: ChatModelFunctionCall = {
            type: "functionCall",
            name: tc.name,
            description: descriptions.get(tc.name),
            params: parseArguments(tc.arguments),
            result: undefined,
            startsNewChunk: i === 0,
          };
          currentModel!.response.push(call);
          pendingCalls.set(tc.id, { call, index });
        });
        break;
      }
      case "tool": {
        const pending = pendingCalls.get(message.toolCallId);
        if (!pending)
          throw invalidRequest(
            `No assistant tool call with id '${message.toolCallId}' precedes this tool result.`,
            `${where}.tool_call_id`,
          );
        const text = partsToText(message.content, where);
        pending.call.result = message.isError ? `Error: ${text}` : text;
        pendingCalls.delete(message.toolCallId);
        break;
      }
    }
  });
  for (const [id, { index }] of pendingCalls)
    throw invalidRequest(`The tool call '${id}' has no tool result; send one for every tool call.`, `messages[${index}]`);

  const last = history.at(-1);
  if (last === undefined || last.type !== "model") history.push({ type: "model", response: [] });
  return history;
}

export function toFunctions(tools: ToolDefinition[]): ChatModelFunctions | undefined {
  if (tools.length === 0) return undefined;
  const out: Record<string, { description?: string; params?: any }> = {};
  for (const tool of tools) out[tool.name] = { description: tool.description, params: tool.parameters };
  return out;
}

/**
 * Where system messages go in the prompt. Those before the first model turn (the leading ones, and any the
 * client put among the first turn's messages, such as Claude Code's environment block after the user's
 * prompt) form the system prompt at the start: that part never changes once the conversation goes on, and
 * the user's prompt then comes last, so a new prompt reuses everything before it from the cache. System
 * messages after the first model turn stay where they stand: moving them to the start would change the
 * prompt's beginning, and so invalidate the whole cache, each time one is added. With `hoistAll`, every
 * system message joins the system prompt (for chat templates that refuse system messages elsewhere).
 */
export function placeSystemMessages(history: ChatHistoryItem[], hoistAll = false): ChatHistoryItem[] {
  const firstModel = history.findIndex((item) => item.type === "model");
  const end = hoistAll || firstModel < 0 ? history.length : firstModel;
  const joins = (item: ChatHistoryItem, i: number) => item.type === "system" && i < end;
  return [...history.filter(joins), ...history.filter((item, i) => !joins(item, i))];
}

/** Set by node-llama-cpp's Jinja wrapper when the template made it render system messages as user messages. */
function systemTurnedToUser(state: object): boolean {
  return (state as { transformedSystemMessagesToUserMessages?: boolean }).transformedSystemMessagesToUserMessages === true;
}

/** The prompt as the chat wrapper renders it, before tokenizing (see prompt-tokens.ts for that). */
export function renderPromptText(wrapper: ChatWrapper, messages: CanonicalMessage[], tools: ToolDefinition[]): LlamaText {
  const history = toChatHistory(messages, tools);
  const render = (chatHistory: ChatHistoryItem[]) =>
    wrapper.generateContextState({ chatHistory, availableFunctions: toFunctions(tools), documentFunctionParams: true });
  const placed = placeSystemMessages(history);
  let state = render(placed);
  const lateSystem = placed.some((item, i) => item.type === "system" && placed.slice(0, i).some((before) => before.type !== "system"));
  if (systemTurnedToUser(state) && lateSystem) {
    // The template refused a system message after the start and node-llama-cpp turned every system message
    // into a user message; with all of them in the system prompt the template may take them as they are.
    const hoisted = render(placeSystemMessages(history, true));
    if (!systemTurnedToUser(hoisted)) state = hoisted;
  }
  return state.contextText;
}

/** renderPromptText, tokenized at once (for callers with a prompt of known, modest size). */
export function renderPrompt(model: LlamaModel, wrapper: ChatWrapper, messages: CanonicalMessage[], tools: ToolDefinition[]): Token[] {
  return renderPromptText(wrapper, messages, tools).tokenize(model.tokenizer);
}


/** Text and tool name for the probe continuations below; any content works, only where it starts matters. */
const PROBE = "svc_cache_probe";

type Render = (messages: CanonicalMessage[], tools: ToolDefinition[]) => Token[] | Promise<Token[]>;

function commonPrefixLength(a: Token[], b: Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** Every call in the cut history needs a result to render; the missing ones get an empty one. */
function withPlaceholderResults(messages: CanonicalMessage[]): CanonicalMessage[] {
  const answered = new Set(messages.flatMap((m) => (m.role === "tool" ? [m.toolCallId] : [])));
  const missing = messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []).filter((c) => !answered.has(c.id)) : []));
  return [...messages, ...missing.map((c): CanonicalMessage => ({ role: "tool", toolCallId: c.id, content: [{ type: "text", text: "" }] }))];
}

/** The request cut just after the breakpoint's block, optionally followed by one more (probe) block. */
function cutAt(breakpoint: CacheBreakpoint, messages: CanonicalMessage[], tools: ToolDefinition[], probe: boolean) {
  if (breakpoint.kind === "tool") {
    const extra: ToolDefinition[] = probe ? [{ name: PROBE, description: PROBE, parameters: { type: "object" } }] : [];
    return { messages, tools: [...tools.slice(0, breakpoint.tool + 1), ...extra] };
  }
  const message = messages[breakpoint.message]!;
  let cut: CanonicalMessage;
  if (breakpoint.kind === "content") {
    const content = [...message.content.slice(0, breakpoint.part + 1), ...(probe ? [{ type: "text" as const, text: PROBE }] : [])];
    // An assistant's calls render after its text, so they are past the cut.
    cut = message.role === "assistant" ? { ...message, content, toolCalls: undefined } : { ...message, content };
  } else {
    if (message.role !== "assistant") throw new Error("tool_call breakpoint on a message without calls");
    const calls = message.toolCalls ?? [];
    const extra = probe ? [{ id: `${PROBE}_call`, name: calls[breakpoint.call]!.name, arguments: "{}" }] : [];
    cut = { ...message, toolCalls: [...calls.slice(0, breakpoint.call + 1), ...extra] };
  }
  return { messages: withPlaceholderResults([...messages.slice(0, breakpoint.message), cut]), tools };
}

/**
 * Where the last cache breakpoint ends in the rendered prompt, in tokens (0 without breakpoints). The chat
 * template renders the whole conversation at once, so tokens cannot be counted per block: instead the
 * conversation is rendered cut just after the block, and cut there with one more block after it. The two
 * agree up to the end of the block, and the cut one agrees with the full prompt at least that far; the
 * shorter of the two common prefixes is the block's end (to within a token the tokenizer merges across it).
 * Tools render in a template-chosen place, so the last tool and the last message breakpoint are both
 * measured and the later one counts.
 */
export async function cacheBreakpointOffset(
  render: Render,
  full: Token[],
  messages: CanonicalMessage[],
  tools: ToolDefinition[],
  breakpoints: CacheBreakpoint[],
): Promise<number> {
  const lastTool = breakpoints.findLast((b) => b.kind === "tool");
  const lastMessage = breakpoints.findLast((b) => b.kind !== "tool");
  let offset = 0;
  for (const breakpoint of [lastTool, lastMessage]) {
    if (!breakpoint) continue;
    try {
      const plain = cutAt(breakpoint, messages, tools, false);
      const probed = cutAt(breakpoint, messages, tools, true);
      const cut = await render(plain.messages, plain.tools);
      const end = Math.min(commonPrefixLength(cut, await render(probed.messages, probed.tools)), commonPrefixLength(cut, full));
      offset = Math.max(offset, end);
    } catch {
      // A history the template cannot render cut short gives no offset; usage then counts no cache write.
    }
  }
  return offset;
}
