// Brings the JSON Schema dialects clients send (draft-04/06/07, 2019-09, 2020-12, OpenAPI 3.0) to one
// draft-2020-12 form, used both for validation (ajv's 2020 class) and for the grammar, so the two agree:
// - `$schema` and the root `$id` are dropped (ajv's 2020 class would refuse a draft-07 `$schema`);
// - draft-07 tuples `items: [...]` / `additionalItems` become `prefixItems` / `items`;
// - draft-04 boolean `exclusiveMinimum` / `exclusiveMaximum` become the numeric forms;
// - `dependencies` splits into `dependentRequired` / `dependentSchemas`;
// - OpenAPI `nullable: true` means "or null": "null" joins `type` (and `enum`, when there is one); with no
//   `type` the schema is wrapped as `anyOf: [schema, {type: "null"}]`. `nullable: false` is dropped.
// It never throws: whatever it does not understand is passed through for ajv (or the grammar) to judge.

export type JsonSchema = boolean | Record<string, unknown>;

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** obj[key] = value as an own property, even for "__proto__" (property names come from clients). */
export function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
}

/** Keywords whose value is one subschema. */
export const SINGLE_SCHEMA_KEYWORDS = [
  "additionalProperties",
  "unevaluatedProperties",
  "propertyNames",
  "additionalItems",
  "unevaluatedItems",
  "contains",
  "not",
  "if",
  "then",
  "else",
  "contentSchema",
] as const;
/** Keywords whose value is an object of subschemas. */
export const MAP_SCHEMA_KEYWORDS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"] as const;
/** Keywords whose value is an array of subschemas. */
export const ARRAY_SCHEMA_KEYWORDS = ["allOf", "anyOf", "oneOf", "prefixItems"] as const;

function isSchema(value: unknown): value is JsonSchema {
  return typeof value === "boolean" || isPlainObject(value);
}

/**
 * A copy of `schema` with `fn` applied to each direct subschema (`items` in both forms, `dependencies`
 * values that are schemas). Other keywords are copied as they are.
 */
export function mapSubschemas(
  schema: Record<string, unknown>,
  fn: (sub: JsonSchema, tokens: Array<string | number>) => JsonSchema,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if ((SINGLE_SCHEMA_KEYWORDS as readonly string[]).includes(key) || key === "items") {
      if (isSchema(value)) out[key] = fn(value, [key]);
      else if (key === "items" && Array.isArray(value))
        out[key] = value.map((v, i) => (isSchema(v) ? fn(v, [key, i]) : v));
      else out[key] = value;
    } else if ((MAP_SCHEMA_KEYWORDS as readonly string[]).includes(key) || key === "dependencies") {
      if (isPlainObject(value)) {
        const map: Record<string, unknown> = {};
        for (const [name, sub] of Object.entries(value))
          setOwn(map, name, isSchema(sub) && !(key === "dependencies" && Array.isArray(sub)) ? fn(sub, [key, name]) : sub);
        out[key] = map;
      } else out[key] = value;
    } else if ((ARRAY_SCHEMA_KEYWORDS as readonly string[]).includes(key)) {
      out[key] = Array.isArray(value) ? value.map((v, i) => (isSchema(v) ? fn(v, [key, i]) : v)) : value;
    } else setOwn(out, key, value);
  }
  return out;
}

/** The normalized form of a whole schema document. */
export function normalizeSchema(schema: unknown): unknown {
  return normalizeNode(schema, true);
}

function normalizeNode(node: unknown, isRoot: boolean): unknown {
  if (!isPlainObject(node)) return node;
  let s = mapSubschemas(node, (sub) => normalizeNode(sub, false) as JsonSchema);
  delete s.$schema;
  if (isRoot) delete s.$id;

  if (Array.isArray(s.items)) {
    const tuple = s.items;
    delete s.items;
    s.prefixItems = tuple;
    if (s.additionalItems !== undefined) s.items = s.additionalItems;
  }
  delete s.additionalItems;

  for (const [flag, bound] of [
    ["exclusiveMinimum", "minimum"],
    ["exclusiveMaximum", "maximum"],
  ] as const) {
    if (typeof s[flag] === "boolean") {
      if (s[flag] === true && typeof s[bound] === "number") {
        s[flag] = s[bound];
        delete s[bound];
      } else delete s[flag];
    }
  }

  if (isPlainObject(s.dependencies)) {
    const required: Record<string, unknown> = isPlainObject(s.dependentRequired) ? { ...s.dependentRequired } : {};
    const schemas: Record<string, unknown> = isPlainObject(s.dependentSchemas) ? { ...s.dependentSchemas } : {};
    for (const [name, dep] of Object.entries(s.dependencies)) setOwn(Array.isArray(dep) ? required : schemas, name, dep);
    delete s.dependencies;
    if (Object.keys(required).length > 0) s.dependentRequired = required;
    if (Object.keys(schemas).length > 0) s.dependentSchemas = schemas;
  }

  if ("nullable" in s) {
    const nullable = s.nullable === true;
    delete s.nullable;
    if (nullable) s = addNull(s);
  }
  return s;
}

function addNull(s: Record<string, unknown>): Record<string, unknown> {
  const types = typeof s.type === "string" ? [s.type] : Array.isArray(s.type) ? s.type : null;
  if (types) {
    if (!types.includes("null")) s.type = [...types, "null"];
    if ("const" in s) {
      s.enum = [s.const, null];
      delete s.const;
    } else if (Array.isArray(s.enum) && !s.enum.includes(null)) s.enum = [...s.enum, null];
    return s;
  }
  // No type to extend: "this schema, or null". Definitions stay where `#/$defs/...` points.
  const wrapper: Record<string, unknown> = {};
  const inner: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(s)) {
    setOwn(key === "$defs" || key === "definitions" ? wrapper : inner, key, value);
  }
  wrapper.anyOf = [inner, { type: "null" }];
  return wrapper;
}
