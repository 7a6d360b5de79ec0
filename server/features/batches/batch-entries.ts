// One entry of a create body, {custom_id, params}, checked up front exactly as POST /v1/messages would
// check its body (the same schema, the same decoder, the same tool-schema check), so that a typo is a 400
// now rather than an errored line hours later.
import { Ajv } from "ajv";
import { AppError, isAppError } from "../../core/errors.js";
import type { InferenceRequest } from "../../core/inference.js";
import { fastifyErrorToAppError } from "../../http/fastify-errors.js";
import { checkSchemas } from "../../pipeline/pipeline.js";
import { decodeMessagesRequest } from "../../surfaces/messages/decode.js";
import { MessagesRequestSchema, type MessagesRequestBody } from "../../surfaces/messages/schema.js";

/** As the Messages API: 1 to 64 letters, digits, underscores and hyphens. */
export const CUSTOM_ID_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

export interface EntryProblem {
  /** Position in `requests`. */
  index: number;
  custom_id: string | null;
  /** The parameter at fault, from the body's root: requests[3].params.max_tokens. */
  param: string;
  message: string;
}

export interface ValidEntry {
  customId: string;
  /** The params as they will be stored and run (JSON). */
  params: string;
  /** The params decoded, for the schema check that follows (checkEntrySchemas). */
  inference: InferenceRequest;
}

// The options Fastify gives its own validator (server/app.ts), so the messages match POST /v1/messages.
const ajv = new Ajv({ coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false, strict: false });
const validateParams = ajv.compile<MessagesRequestBody>(MessagesRequestSchema);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Checks one entry; `seen` holds the custom_ids before it (first index of each). */
export function checkEntry(value: unknown, index: number, seen: Map<string, number>): ValidEntry | EntryProblem {
  const at = `requests[${index}]`;
  const problem = (param: string, message: string, customId: string | null = null): EntryProblem => ({ index, custom_id: customId, param, message });
  if (!isObject(value)) return problem(at, "Each request must be an object {custom_id, params}.");
  const customId = value.custom_id;
  if (customId === undefined || customId === null) return problem(`${at}.custom_id`, "Missing required parameter: custom_id.");
  if (typeof customId !== "string" || !CUSTOM_ID_PATTERN.test(customId))
    return problem(`${at}.custom_id`, "custom_id must be 1 to 64 characters: letters, digits, '_' or '-'.", typeof customId === "string" ? customId : null);
  const first = seen.get(customId);
  if (first !== undefined) return problem(`${at}.custom_id`, `custom_id '${customId}' is used twice (first by requests[${first}]); each must be unique within the batch.`, customId);
  seen.set(customId, index);

  const params = value.params;
  if (params === undefined || params === null) return problem(`${at}.params`, "Missing required parameter: params (a Messages request body).", customId);
  if (!isObject(params)) return problem(`${at}.params`, "params must be an object: the body of a Messages request.", customId);
  if (!validateParams(params)) {
    const err = fastifyErrorToAppError(Object.assign(new Error("invalid params"), { validation: validateParams.errors ?? [] }));
    return fromAppError(problem, `${at}.params`, err, customId);
  }
  if (params.stream === true) return problem(`${at}.params.stream`, "Batch requests cannot stream; leave stream unset or false.", customId);
  let inference: InferenceRequest;
  try {
    inference = decodeMessagesRequest(params).inference;
  } catch (err) {
    if (!isAppError(err)) throw err;
    return fromAppError(problem, `${at}.params`, err, customId);
  }
  return { customId, params: JSON.stringify(params), inference };
}

/**
 * The entry's output and tool schemas, compiled as for a run (in the schema worker, off the event loop);
 * a problem naming where, or null.
 */
export async function checkEntrySchemas(entry: ValidEntry, index: number): Promise<EntryProblem | null> {
  try {
    await checkSchemas(entry.inference);
    return null;
  } catch (err) {
    if (!isAppError(err)) throw err;
    const problem = (param: string, message: string, customId: string | null = null): EntryProblem => ({ index, custom_id: customId, param, message });
    return fromAppError(problem, `requests[${index}].params`, err, entry.customId);
  }
}

function fromAppError(problem: (param: string, message: string, customId: string | null) => EntryProblem, prefix: string, err: AppError, customId: string): EntryProblem {
  const param = err.param ? `${prefix}.${err.param}` : prefix;
  // Messages name their parameter relative to the params object; say it from the body's root instead.
  const message = err.param ? err.message.split(`'${err.param}'`).join(`'${param}'`) : err.message;
  return problem(param, message, customId);
}

export function isProblem(entry: ValidEntry | EntryProblem): entry is EntryProblem {
  return "message" in entry;
}

/** The 400 for a batch with bad entries: the first few in the message, up to 100 in details.errors. */
export function invalidEntriesError(problems: EntryProblem[], total: number, requestCount: number): AppError {
  const shown = problems.slice(0, 5).map((p) => `${p.param}: ${p.message}`);
  const more = total > shown.length ? ` (and ${total - shown.length} more)` : "";
  return new AppError(
    "invalid_request",
    `${total} of ${requestCount} requests ${total === 1 ? "is" : "are"} invalid, so no batch was created. ${shown.join(" ")}${more}`,
    { code: "invalid_batch_requests", param: problems[0]?.param, details: { errors: problems.slice(0, 100) } },
  );
}
