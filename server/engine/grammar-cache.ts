// The grammars of one request (the answer's JSON, the tool names, each tool's arguments), compiled by
// llama.cpp and cached by their text. Both engines use it: the LlamaEngine samples with them, the upstream
// engine compiles them too (the same 400 for a schema that cannot be constrained) and sends their text.
import type { Llama, LlamaGrammar } from "node-llama-cpp";
import { invalidRequest } from "../core/errors.js";
import type { CompiledGrammars } from "./generation.js";
import { cachedSchemaGrammar, jsonObjectGbnf, UnsupportedSchemaError } from "./json-schema-grammar.js";
import type { PromptSyntax } from "./prompt.js";
import type { EngineRequest } from "./types.js";

const GRAMMAR_CACHE_LIMIT = 256;

/** A request's tool grammars in GBNF: the name of a call, and each tool's arguments (with the field it came from). */
export interface ToolGbnf {
  names: string;
  arguments: Map<string, { gbnf: string; param: string }>;
}

export class GrammarCache {
  private readonly cache = new Map<string, Promise<LlamaGrammar>>();

  constructor(private readonly llama: Llama) {}

  /** The GBNF the answer must follow (json_object / json_schema output), or null for free text. */
  answerGbnf(output: EngineRequest["output"]): string | null {
    if (output.type === "json_object") return jsonObjectGbnf();
    if (output.type === "json_schema") return this.schemaGrammar(output.schema, output.param ?? "output_schema", output.strict === true);
    return null;
  }

  async compile(request: EngineRequest, syntax: PromptSyntax): Promise<CompiledGrammars> {
    const output = request.output;
    const answerText = this.answerGbnf(output);
    const answer: LlamaGrammar | null =
      answerText === null ? null : await this.grammar(answerText, output.type === "json_schema" ? (output.param ?? "output_schema") : "output_schema");
    const tools = this.toolGbnf(request, syntax);
    if (tools === null) return { answer, toolNames: null, toolArguments: new Map() };
    const toolNames = await this.grammar(tools.names, "tools");
    const toolArguments = new Map<string, LlamaGrammar>();
    for (const [name, { gbnf, param }] of tools.arguments) toolArguments.set(name, await this.grammar(gbnf, param));
    return { answer, toolNames, toolArguments };
  }

  /**
   * The GBNF of a call's tool name (one of the tools' names) and of each tool's arguments (its schema), or null
   * when the request offers no callable tools (none, tool_choice none, or a chat format without calls). The
   * text path compiles them (compile); the vision path hands the text to llama.node. A named tool_choice that
   * is not among the tools is a 400.
   */
  toolGbnf(request: EngineRequest, syntax: PromptSyntax): ToolGbnf | null {
    if (request.toolChoice.type === "tool") {
      const name = request.toolChoice.name;
      if (!request.tools.some((t) => t.name === name))
        throw invalidRequest(`The tool to call, '${name}', is not among the tools.`, "tools");
    }
    const callable = request.tools.length > 0 && request.toolChoice.type !== "none" && syntax.toolCall !== null;
    if (!callable) return null;
    const names = `root ::= ${request.tools.map((t) => JSON.stringify(t.name)).join(" | ")}`;
    const args = new Map<string, { gbnf: string; param: string }>();
    for (const [i, tool] of request.tools.entries()) {
      const param = tool.param ?? `tools[${i}].schema`;
      args.set(tool.name, { gbnf: this.schemaGrammar(tool.parameters, param, tool.strict === true), param });
    }
    return { names, arguments: args };
  }

  schemaGrammar(schema: Record<string, unknown>, param: string, strict: boolean): string {
    try {
      return cachedSchemaGrammar(schema, strict);
    } catch (err) {
      if (err instanceof UnsupportedSchemaError) throw invalidRequest(`Unsupported JSON schema: ${err.message}`, param, "invalid_schema");
      throw err;
    }
  }

  /** `param`: the request field the grammar came from, named in the error when it does not compile. */
  grammar(text: string, param: string): Promise<LlamaGrammar> {
    let found = this.cache.get(text);
    if (!found) {
      found = this.llama.createGrammar({ grammar: text }).catch((err: unknown) => {
        this.cache.delete(text);
        throw invalidRequest(`The schema could not be compiled into a grammar: ${(err as Error).message}`, param, "invalid_schema");
      });
      if (this.cache.size >= GRAMMAR_CACHE_LIMIT) {
        const oldest = this.cache.keys().next().value;
        if (oldest !== undefined) this.cache.delete(oldest);
      }
      this.cache.set(text, found);
    }
    return found;
  }
}
