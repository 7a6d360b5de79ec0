// The schema work of schema-checks.ts, in a worker thread: turning a JSON schema into a grammar (to refuse one
// the server cannot hold) and validating an answer against its schema. Both compile the schema, which takes
// about 1.6 ms a property, synchronously; here that time is not the server's event loop's.
import { parentPort } from "node:worker_threads";
import { cachedSchemaGrammar, UnsupportedSchemaError, validateJsonAgainstSchema } from "../engine/json-schema-grammar.js";

export type SchemaTask =
  | { id: number; kind: "support"; schema: Record<string, unknown>; strict: boolean }
  | { id: number; kind: "validate"; schema: Record<string, unknown>; value: unknown; strict: boolean };

export type SchemaReply =
  | { id: number; ok: true; errors?: string[] }
  | { id: number; ok: false; unsupported: { message: string; path: string } }
  | { id: number; ok: false; failed: string };

parentPort?.on("message", (task: SchemaTask) => {
  let reply: SchemaReply;
  try {
    if (task.kind === "support") {
      cachedSchemaGrammar(task.schema, task.strict);
      reply = { id: task.id, ok: true };
    } else {
      const result = validateJsonAgainstSchema(task.schema, task.value, { strict: task.strict });
      reply = { id: task.id, ok: true, ...(result.valid ? {} : { errors: result.errors }) };
    }
  } catch (err) {
    reply =
      err instanceof UnsupportedSchemaError
        ? { id: task.id, ok: false, unsupported: { message: err.message, path: err.path } }
        : { id: task.id, ok: false, failed: (err as Error)?.message ?? String(err) };
  }
  parentPort!.postMessage(reply);
});
