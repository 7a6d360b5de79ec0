// The agent's built-in tools, run on the server over the caller's own data only: their files (list, read,
// search the extracted text), a calculator (in a worker, under a time and memory budget:
// calculator-pool.ts), and the time in their X-Timezone. A tool that fails answers the model with the reason
// (the run goes on); it never fails the run.
import { AppError, toAppError } from "../../core/errors.js";
import type { JsonSchema, ToolDefinition } from "../../core/inference.js";
import type { Extracted } from "../../ingest/types.js";
import type { FileOut } from "../files/files-service.js";
import { MAX_EXPRESSION_CHARS } from "./calculator-limits.js";
import { sharedCalculator, type CalculatorPool } from "./calculator-pool.js";
import { PassageIndex } from "./file-search.js";

export const BUILTIN_TOOLS = ["file_search", "list_files", "read_file", "calculator", "current_time"] as const;
export type BuiltinTool = (typeof BUILTIN_TOOLS)[number];

export function isBuiltinTool(name: string): name is BuiltinTool {
  return (BUILTIN_TOOLS as readonly string[]).includes(name);
}

export const READ_CHUNK_CHARS = 4000;
export const SEARCH_RESULTS = 5;

const EMPTY: JsonSchema = { type: "object", properties: {}, additionalProperties: false };

const DEFINITIONS: Record<BuiltinTool, { description: string; parameters: JsonSchema }> = {
  file_search: {
    description: "Search the text of the user's files. Returns the passages that contain the query, best first, with the file and line they come from.",
    parameters: {
      type: "object",
      properties: { query: { type: "string", minLength: 1, maxLength: 500, description: "Words or a phrase to look for." } },
      required: ["query"],
      additionalProperties: false,
    },
  },
  list_files: {
    description: "List the user's files that this run may use: id, name, type and size.",
    parameters: EMPTY,
  },
  read_file: {
    description: `Read the text of one of the user's files, ${READ_CHUNK_CHARS} characters at a time from an offset.`,
    parameters: {
      type: "object",
      properties: {
        file_id: { type: "string", description: "The id of the file (file-...)." },
        offset: { type: "integer", minimum: 0, description: "Character offset to start from; 0 by default." },
      },
      required: ["file_id"],
      additionalProperties: false,
    },
  },
  calculator: {
    description: "Evaluate a math expression (math.js syntax: + - * / ^, functions such as sqrt, sin, log, units such as '5 km to mi').",
    parameters: {
      type: "object",
      properties: { expression: { type: "string", minLength: 1, maxLength: MAX_EXPRESSION_CHARS } },
      required: ["expression"],
      additionalProperties: false,
    },
  },
  current_time: {
    description: "The current date and time in the user's time zone.",
    parameters: EMPTY,
  },
};

export function builtinDefinition(name: BuiltinTool): ToolDefinition {
  const { description, parameters } = DEFINITIONS[name];
  return { name, description, parameters };
}

/** What the tools need of the Files feature (FilesService provides it). */
export interface AgentFiles {
  list(accountId: string, query: { limit: number; order: "asc" | "desc" }): { data: FileOut[] };
  get(accountId: string, id: string): FileOut;
  contentOf(fileId: string, accountId: string | undefined, param: string): Promise<{ extracted: Extracted; filename: string }>;
}

export interface ToolOutcome {
  /** What the model reads (JSON text). */
  output: string;
  /** The same, as an object (the run's step shows it). */
  result: unknown;
  error: { code: string; message: string } | null;
}

export interface ToolBoxOptions {
  files: AgentFiles;
  accountId: string;
  /** The files the run may use; null: all of the caller's files. */
  fileIds: string[] | null;
  timezone: string;
  now?: () => Date;
  /** Where calculator expressions run; default the process's shared one. */
  calculator?: CalculatorPool;
}

/** The built-in tools of one run. The search index is built on first use and lives as long as the run. */
export class ToolBox {
  private index: Promise<PassageIndex> | null = null;

  constructor(private readonly options: ToolBoxOptions) {}

  /** The files this run may use, oldest first. */
  files(): FileOut[] {
    const { files, accountId, fileIds } = this.options;
    if (fileIds) return fileIds.map((id) => files.get(accountId, id));
    return files.list(accountId, { limit: 100, order: "asc" }).data;
  }

  async run(name: BuiltinTool, argumentsJson: string): Promise<ToolOutcome> {
    try {
      const args = parseArguments(argumentsJson);
      const result = await this.execute(name, args);
      return { output: JSON.stringify(result), result, error: null };
    } catch (err) {
      const error = toAppError(err);
      const message = error.kind === "internal" ? `The tool failed: ${(err as Error).message}` : error.message;
      const code = error.code ?? error.kind;
      return { output: JSON.stringify({ error: message }), result: null, error: { code, message } };
    }
  }

  private async execute(name: BuiltinTool, args: Record<string, unknown>): Promise<unknown> {
    switch (name) {
      case "list_files":
        return {
          files: this.files().map((f) => ({
            file_id: f.id,
            filename: f.filename,
            mime_type: f.mime_type,
            content_kind: f.content_kind,
            size: f.size,
            status: f.status,
            token_estimate: f.token_estimate,
          })),
        };
      case "read_file":
        return this.read(args);
      case "file_search":
        return this.search(args);
      case "calculator":
        return (this.options.calculator ?? sharedCalculator()).evaluate(stringArg(args, "expression"));
      case "current_time":
        return currentTime(this.options.timezone, (this.options.now ?? (() => new Date()))());
    }
  }

  private allowed(fileId: string): FileOut {
    const file = this.files().find((f) => f.id === fileId);
    if (!file)
      throw new AppError("not_found", `No file '${fileId}' is available to this run; list_files shows the ones that are.`, { code: "file_not_found" });
    return file;
  }

  private async read(args: Record<string, unknown>): Promise<unknown> {
    const fileId = stringArg(args, "file_id");
    const offset = args.offset === undefined ? 0 : args.offset;
    if (typeof offset !== "number" || !Number.isInteger(offset) || offset < 0) throw new AppError("invalid_request", "offset must be a whole number of characters, 0 or more.");
    const file = this.allowed(fileId);
    const { extracted } = await this.options.files.contentOf(file.id, this.options.accountId, "file_id");
    const text = extracted.text;
    const chunk = text.slice(offset, offset + READ_CHUNK_CHARS);
    const next = offset + chunk.length;
    return {
      file_id: file.id,
      filename: file.filename,
      offset,
      total_chars: text.length,
      next_offset: next < text.length ? next : null,
      text: chunk,
    };
  }

  private async search(args: Record<string, unknown>): Promise<unknown> {
    const query = stringArg(args, "query");
    if (query.trim() === "") throw new AppError("invalid_request", "The query is empty.");
    const index = await this.passageIndex();
    const hits = index.search(query, SEARCH_RESULTS);
    return {
      query,
      results: hits.map((h) => ({ file_id: h.fileId, filename: h.filename, line: h.line, match: h.match, score: h.score, text: h.text })),
    };
  }

  private passageIndex(): Promise<PassageIndex> {
    this.index ??= (async () => {
      const index = new PassageIndex();
      for (const file of this.files()) {
        if (file.status === "error") continue;
        try {
          const { extracted } = await this.options.files.contentOf(file.id, this.options.accountId, "file_id");
          index.add(file.id, file.filename, extracted.text);
        } catch {
          // A file deleted meanwhile, or one that could not be read: the others are still searched.
        }
      }
      return index;
    })();
    this.index.catch(() => (this.index = null));
    return this.index;
  }
}

function parseArguments(json: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(json === "" ? "{}" : json);
  } catch {
    throw new AppError("invalid_request", "The arguments are not valid JSON.");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new AppError("invalid_request", "The arguments must be a JSON object.");
  return value as Record<string, unknown>;
}

function stringArg(args: Record<string, unknown>, name: string): string {
  const value = args[name];
  if (typeof value !== "string") throw new AppError("invalid_request", `The argument '${name}' must be a string.`);
  return value;
}

/** Now in the zone: ISO 8601 with the zone's offset, a readable form, and epoch seconds. */
export function currentTime(timeZone: string, now: Date): { timezone: string; iso: string; local: string; unix: number } {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      timeZoneName: "longOffset",
    })
      .formatToParts(now)
      .map((p) => [p.type, p.value]),
  ) as Record<string, string>;
  const offset = (parts.timeZoneName ?? "GMT").replace(/^GMT/, "") || "+00:00";
  const iso = `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}:${parts.second}${offset === "+00:00" ? "Z" : offset}`;
  const local = new Intl.DateTimeFormat("en-US", { timeZone, dateStyle: "full", timeStyle: "long" }).format(now);
  return { timezone: timeZone, iso, local, unix: Math.floor(now.getTime() / 1000) };
}
