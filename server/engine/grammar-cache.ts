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

    const callable = request.tools.length > 0 && request.toolChoice.type !== "none" && syntax.toolCall !== null;
    if (request.toolChoice.type === "tool") {
      const name = request.toolChoice.name;
      if (!request.tools.some((t) => t.name === name))
        throw invalidRequest(`The tool to call, '${name}', is not among the tools.`, "tools");
    }
    if (!callable) return { answer, toolNames: null, toolArguments: new Map() };
    const toolNames = await this.grammar(`root ::= ${request.tools.map((t) => JSON.stringify(t.name)).join(" | ")}`, "tools");
    const toolArguments = new Map<string, LlamaGrammar>();
    for (const [i, tool] of request.tools.entries()) {
      const param = tool.param ?? `tools[${i}].schema`;
      toolArguments.set(tool.name, await this.grammar(this.schemaGrammar(tool.parameters, param, tool.strict === true), param));
    }
    return { answer, toolNames, toolArguments };
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
