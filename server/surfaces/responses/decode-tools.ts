// The Responses request's tools, tool_choice and text.format → the canonical tools, tool choice and output
// format, with what the response object echoes of each. Part of decode.ts's job (a Responses request →
// InferenceRequest), kept apart because tools are their own sub-language: namespace tools, deferred tools,
// allowed_tools, and the echo the response must give back. Pure: no I/O, throws AppError naming the param.
import { invalidRequest } from "../../core/errors.js";
import type { OutputFormat, ToolChoice, ToolDefinition } from "../../core/inference.js";
import { isObj, type Obj } from "../content-parts.js";
import { checkListLength, MAX_TOOLS } from "../list-limits.js";
import type { ResponsesRequestBody } from "./schema.js";

/** A function tool as the response object lists it. */
export interface FunctionToolEcho {
  type: "function";
  name: string;
  description: string | null;
  parameters: Record<string, unknown> | null;
  strict: boolean | null;
}

/** A function of a namespace tool, offered to the model as `namespace.name`. */
export interface NamespacedName {
  namespace: string;
  name: string;
}

/** Separates a namespace from a function name in what the model sees; OpenAI names cannot contain it. */
export const NAMESPACE_SEPARATOR = ".";

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

export interface DeclaredTools {
  functions: ToolDefinition[];
  echo: Map<string, FunctionToolEcho>;
  namespaced: Map<string, NamespacedName>;
}

/**
 * Function tools, and the function tools inside `namespace` tools (Codex's sub-agent tools), which are
 * offered under their namespaced names (`multi_agent_v1.spawn_agent`); calls of them come back with the
 * namespace in the item's `namespace` field, as OpenAI sends them. Tools with `defer_loading: true` (found
 * through tool search, which this server does not run) and every other type (custom, web_search, mcp, ...)
 * are left out.
 */
export function decodeTools(tools: ResponsesRequestBody["tools"]): DeclaredTools {
  const functions: ToolDefinition[] = [];
  const echo = new Map<string, FunctionToolEcho>();
  const namespaced = new Map<string, NamespacedName>();
  (tools ?? []).forEach((raw, i) => {
    const tool = raw as Obj;
    const where = `tools[${i}]`;
    if (tool.type === "namespace") {
      const namespace = tool.name;
      if (typeof namespace !== "string" || !TOOL_NAME.test(namespace))
        throw invalidRequest("A namespace tool needs a name of 1 to 64 letters, digits, '_' or '-'.", `${where}.name`);
      if (tool.tools != null && !Array.isArray(tool.tools)) throw invalidRequest("A namespace tool's tools must be an array.", `${where}.tools`);
      checkListLength(tool.tools, MAX_TOOLS, `${where}.tools`);
      ((tool.tools as unknown[] | undefined) ?? []).forEach((inner, j) => {
        if (!isObj(inner) || inner.type !== "function") return;
        const added = addFunction(inner, `${where}.tools[${j}]`, namespace);
        if (added) namespaced.set(added, { namespace, name: inner.name as string });
      });
      return;
    }
    if (tool.type === "function") addFunction(tool, where);
  });
  return { functions, echo, namespaced };

  /** Checks and adds one function tool; returns the name the model sees, or null for a deferred one. */
  function addFunction(tool: Obj, where: string, namespace?: string): string | null {
    const short = tool.name;
    if (typeof short !== "string" || !TOOL_NAME.test(short))
      throw invalidRequest("A function tool needs a name of 1 to 64 letters, digits, '_' or '-'.", `${where}.name`);
    const name = namespace === undefined ? short : `${namespace}${NAMESPACE_SEPARATOR}${short}`;
    if (echo.has(name)) throw invalidRequest(`Duplicate tool name '${name}'.`, `${where}.name`);
    if (tool.description != null && typeof tool.description !== "string")
      throw invalidRequest("A tool description must be a string.", `${where}.description`);
    if (tool.parameters != null && !isObj(tool.parameters))
      throw invalidRequest("Tool parameters must be a JSON schema object (or null).", `${where}.parameters`);
    if (tool.strict != null && typeof tool.strict !== "boolean") throw invalidRequest("strict must be a boolean.", `${where}.strict`);
    if (tool.defer_loading != null && typeof tool.defer_loading !== "boolean")
      throw invalidRequest("defer_loading must be a boolean.", `${where}.defer_loading`);
    if (tool.defer_loading === true) return null;
    const parameters = (tool.parameters as Obj | null | undefined) ?? null;
    const description = (tool.description as string | null | undefined) ?? null;
    functions.push({
      name,
      ...(description !== null ? { description } : {}),
      parameters: parameters ?? { type: "object", properties: {} },
      param: `${where}.parameters`,
      // The Responses API makes function tools strict unless they say otherwise.
      ...(tool.strict !== false ? { strict: true } : {}),
    });
    echo.set(name, { type: "function", name, description, parameters, strict: (tool.strict as boolean | null | undefined) ?? null });
    return name;
  }
}

export function decodeToolChoice(
  choice: ResponsesRequestBody["tool_choice"],
  declared: DeclaredTools,
): { tools: ToolDefinition[]; toolChoice: ToolChoice; echo: unknown } {
  const all = declared.functions;
  const needTools = (tools: ToolDefinition[], param: string) => {
    if (tools.length === 0) throw invalidRequest("tool_choice 'required' needs at least one function tool in 'tools'.", param);
  };
  if (choice == null || choice === "auto") return { tools: all, toolChoice: { type: "auto" }, echo: "auto" };
  if (choice === "none") return { tools: all, toolChoice: { type: "none" }, echo: "none" };
  if (choice === "required") {
    needTools(all, "tool_choice");
    return { tools: all, toolChoice: { type: "required" }, echo: "required" };
  }
  if (typeof choice === "string")
    throw invalidRequest(`Invalid tool_choice '${choice}'; use none, auto, required or {type: 'function', name}.`, "tool_choice");

  const obj = choice as Obj;
  if (obj.type === "function") {
    if (typeof obj.name !== "string") throw invalidRequest("tool_choice of type function needs a name.", "tool_choice.name");
    if (!declared.echo.has(obj.name)) throw invalidRequest(`tool_choice names '${obj.name}', which is not a function in 'tools'.`, "tool_choice.name");
    return { tools: all, toolChoice: { type: "tool", name: obj.name }, echo: { type: "function", name: obj.name } };
  }
  if (obj.type === "allowed_tools") {
    // The model sees (and may call) only the listed function tools; entries of other types are left out too.
    if (obj.mode !== "auto" && obj.mode !== "required")
      throw invalidRequest("allowed_tools mode must be 'auto' or 'required'.", "tool_choice.mode");
    if (!Array.isArray(obj.tools)) throw invalidRequest("allowed_tools needs a 'tools' array.", "tool_choice.tools");
    checkListLength(obj.tools, MAX_TOOLS, "tool_choice.tools");
    const names = new Set<string>();
    obj.tools.forEach((entry: unknown, k) => {
      if (!isObj(entry) || entry.type !== "function") return;
      if (typeof entry.name !== "string" || !declared.echo.has(entry.name))
        throw invalidRequest(`allowed_tools names '${String(entry.name)}', which is not a function in 'tools'.`, `tool_choice.tools[${k}].name`);
      names.add(entry.name);
    });
    const tools = all.filter((t) => names.has(t.name));
    if (obj.mode === "required") needTools(tools, "tool_choice.tools");
    return { tools, toolChoice: { type: obj.mode }, echo: { type: "allowed_tools", mode: obj.mode, tools: obj.tools } };
  }
  throw invalidRequest(
    `tool_choice of type '${String(obj.type)}' forces a tool this server cannot run; only function tools can be called.`,
    "tool_choice.type",
    "unsupported_value",
  );
}

export function decodeTextFormat(format: Obj | undefined): { format: OutputFormat; echo: Record<string, unknown> } {
  if (!format || format.type === "text") return { format: { type: "text" }, echo: { type: "text" } };
  if (format.type === "json_object") return { format: { type: "json_object" }, echo: { type: "json_object" } };
  if (format.type === "json_schema") {
    if (!isObj(format.schema)) throw invalidRequest("text.format of type json_schema needs a 'schema' object.", "text.format.schema");
    const name = typeof format.name === "string" ? format.name : undefined;
    const strict = typeof format.strict === "boolean" ? format.strict : undefined;
    return {
      format: { type: "json_schema", ...(name !== undefined ? { name } : {}), schema: format.schema, ...(strict !== undefined ? { strict } : {}), param: "text.format.schema" },
      echo: {
        type: "json_schema",
        name: name ?? null,
        schema: format.schema,
        strict: strict ?? null,
        ...(typeof format.description === "string" ? { description: format.description } : {}),
      },
    };
  }
  throw invalidRequest(`Invalid text.format type '${String(format.type)}'; use text, json_object or json_schema.`, "text.format.type");
}
