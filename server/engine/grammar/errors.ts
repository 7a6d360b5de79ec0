// The one error the JSON-schema-to-grammar conversion throws on purpose.

/**
 * A schema (or a part of it) that cannot be turned into a grammar whose every output satisfies it.
 * `path` is the JSON pointer of the offending part inside the schema as given ("" for the root).
 */
export class UnsupportedSchemaError extends Error {
  readonly path: string;

  constructor(what: string, path: string) {
    super(`${what} at ${path === "" ? "the schema root" : path}`);
    this.name = "UnsupportedSchemaError";
    this.path = path;
  }
}

/** Appends one reference token to a JSON pointer. */
export function pointer(path: string, ...tokens: Array<string | number>): string {
  let out = path;
  for (const token of tokens) out += "/" + String(token).replace(/~/g, "~0").replace(/\//g, "~1");
  return out;
}
