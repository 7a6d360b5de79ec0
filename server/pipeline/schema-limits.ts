// Limits on the JSON schemas of one request (the output format and the tools), checked before any schema is
// compiled. Compiling a schema into a grammar is synchronous and costs about 1.6 ms per property on the
// development machine (1000 properties, 135 KB: 1.7 s; 5000 properties: 15 s, with every other request
// waiting), and a schema nested thousands of levels deep overflowed the stack (a 500). So a request's
// schemas are measured first, with an explicit walk (no recursion, stopping at the first limit passed),
// and refused with a 400 that names the limit.
import { invalidRequest } from "../core/errors.js";

/** JSON nesting levels of one schema (an object property in the data is about two levels of schema). */
export const MAX_SCHEMA_DEPTH = 64;
/** Characters of one schema's JSON text. */
export const MAX_SCHEMA_CHARS = 64 * 1024;
/** Characters of all of one request's schemas together. */
export const MAX_SCHEMAS_TOTAL_CHARS = 256 * 1024;

/** The JSON text length of `value`, and how deep it nests, measured up to the limits (then it stops). */
export function measureJson(value: unknown, limits: { depth: number; chars: number }): { depth: number; chars: number } {
  let chars = 0;
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (typeof node === "string") chars += node.length + 2;
    else if (node === null || typeof node !== "object") chars += String(node).length;
    else {
      if (depth > deepest) deepest = depth;
      if (deepest > limits.depth) break;
      chars += 2;
      if (Array.isArray(node))
        for (const item of node) {
          stack.push([item, depth + 1]);
          if (++chars > limits.chars) break;
        }
      else
        for (const key in node) {
          if (!Object.hasOwn(node, key)) continue;
          stack.push([(node as Record<string, unknown>)[key], depth + 1]);
          if ((chars += key.length + 4) > limits.chars) break;
        }
    }
    if (chars > limits.chars) break;
  }
  return { depth: deepest, chars };
}

function kb(chars: number): string {
  return `${Math.ceil(chars / 1024)} KB`;
}

/** Throws 400 invalid_schema naming the limit a schema (or all of them together) passes. */
export function checkSchemaLimits(schemas: Array<{ schema: unknown; param: string }>): void {
  let total = 0;
  for (const { schema, param } of schemas) {
    const size = measureJson(schema, { depth: MAX_SCHEMA_DEPTH, chars: MAX_SCHEMA_CHARS });
    if (size.depth > MAX_SCHEMA_DEPTH)
      throw invalidRequest(
        `The JSON schema is nested more than ${MAX_SCHEMA_DEPTH} levels deep, the limit. Flatten it, or use $defs and $ref for shared parts.`,
        param,
        "invalid_schema",
      );
    if (size.chars > MAX_SCHEMA_CHARS)
      throw invalidRequest(`The JSON schema is larger than ${kb(MAX_SCHEMA_CHARS)}, the limit for one schema.`, param, "invalid_schema");
    total += size.chars;
    if (total > MAX_SCHEMAS_TOTAL_CHARS)
      throw invalidRequest(
        `The request's JSON schemas (output format and tools) are larger than ${kb(MAX_SCHEMAS_TOTAL_CHARS)} together, the limit. Send fewer or smaller tools.`,
        param,
        "invalid_schema",
      );
  }
}
