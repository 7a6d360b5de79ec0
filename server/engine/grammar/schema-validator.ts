// JSON Schema validation with ajv 8 (draft 2020-12 class, after normalize-schema.ts).
//
// - strict mode is off: unknown keywords (vendor extensions, OpenAPI leftovers) are ignored.
// - formats: ajv-formats is not a dependency of this project, so only the formats the grammar writes
//   precisely are checked (date, time, date-time, uuid; RFC 3339 / RFC 4122 syntax, leap years
//   included); every other format is an annotation and passes.
// - multipleOf is exact on the numbers as written in decimal (JavaScript's shortest form), so 0.29 is a
//   multiple of 0.01 and 603630483.8 too; ajv's own check divides doubles and says no to both.

import { Ajv2020, MissingRefError } from "ajv/dist/2020.js";
import type { FuncKeywordDefinition, ValidateFunction } from "ajv/dist/2020.js";
import type { SchemaValidateFunction } from "ajv/dist/types/index.js";
import { UnsupportedSchemaError } from "./errors.js";
import { isPlainObject, mapSubschemas, normalizeSchema, type JsonSchema } from "./normalize-schema.js";
import { canonicalJson } from "./merge-schemas.js";
import { toDecimal } from "./numeric-range.js";

export type ValidationResult = { valid: true } | { valid: false; errors: string[] };

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

export function isDate(text: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!m) return false;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  if (month < 1 || month > 12 || day < 1) return false;
  const days = month === 2 && isLeapYear(year) ? 29 : DAYS_IN_MONTH[month - 1]!;
  return day <= days;
}

export function isTime(text: string): boolean {
  const m = /^(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[zZ]|[+-](\d{2}):(\d{2}))$/.exec(text);
  if (!m) return false;
  const [hour, minute, second] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (hour > 23 || minute > 59 || second > 60) return false;
  if (m[4] !== undefined && (Number(m[4]) > 23 || Number(m[5]) > 59)) return false;
  return true;
}

export function isDateTime(text: string): boolean {
  const m = /^([^Tt ]+)[Tt ](.+)$/.exec(text);
  return m !== null && isDate(m[1]!) && isTime(m[2]!);
}

export function isUuid(text: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(text);
}

/** Whether `value` is an integer multiple of `divisor`, both taken as the decimals JavaScript prints. */
export function isMultipleOf(value: number, divisor: number): boolean {
  if (!Number.isFinite(value) || !Number.isFinite(divisor) || divisor <= 0) return false;
  const a = toDecimal(value);
  const b = toDecimal(divisor);
  const e = Math.min(a.e, b.e);
  return (a.m * 10n ** BigInt(a.e - e)) % (b.m * 10n ** BigInt(b.e - e)) === 0n;
}

const validateMultipleOf: SchemaValidateFunction = (divisor: number, value: number): boolean => {
  const ok = isMultipleOf(value, divisor);
  validateMultipleOf.errors = ok ? [] : [{ keyword: "multipleOf", message: `must be multiple of ${divisor}`, params: { multipleOf: divisor } }];
  return ok;
};

const MULTIPLE_OF: FuncKeywordDefinition = {
  keyword: "multipleOf",
  type: "number",
  schemaType: "number",
  errors: true,
  validate: validateMultipleOf,
};

export function createAjv(): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false, ownProperties: true });
  ajv.removeKeyword("multipleOf");
  ajv.addKeyword(MULTIPLE_OF);
  ajv.addFormat("date", isDate);
  ajv.addFormat("time", isTime);
  ajv.addFormat("date-time", isDateTime);
  ajv.addFormat("uuid", isUuid);
  return ajv;
}

// One long-lived instance for validation. ajv keeps every schema object it compiled, so the compiled
// validators live in a bounded cache keyed by the schema's JSON text, and leave ajv when evicted.
const CACHE_LIMIT = 256;
let sharedAjv: Ajv2020 | null = null;
const compiled = new Map<string, { schema: object | null; validate: ValidateFunction | Error }>();

function formatErrors(validate: ValidateFunction): string[] {
  return (validate.errors ?? []).map((e) => `${e.instancePath === "" ? "/" : e.instancePath} ${e.message ?? "is invalid"}`);
}

export function isMissingRef(err: Error): boolean {
  return err instanceof MissingRefError;
}

/** Compiles (and caches) a validator; an unusable schema gives back the error. */
export function compileSchema(schema: Record<string, unknown>): ValidateFunction | Error {
  const key = JSON.stringify(schema);
  const found = compiled.get(key);
  if (found !== undefined) {
    compiled.delete(key);
    compiled.set(key, found);
    return found.validate;
  }
  sharedAjv ??= createAjv();
  const normalized = normalizeSchema(schema) as Record<string, unknown>;
  let entry: { schema: object | null; validate: ValidateFunction | Error };
  try {
    entry = { schema: normalized, validate: sharedAjv.compile(normalized) };
  } catch (err) {
    sharedAjv.removeSchema(normalized);
    entry = { schema: null, validate: err instanceof Error ? err : new Error(String(err)) };
  }
  compiled.set(key, entry);
  if (compiled.size > CACHE_LIMIT) {
    const [oldestKey, oldest] = compiled.entries().next().value!;
    compiled.delete(oldestKey);
    if (oldest.schema) sharedAjv.removeSchema(oldest.schema);
  }
  return entry.validate;
}

/**
 * Checks `value` against `schema`. Not strict: uniqueItems is not checked (the grammar holds it only over a
 * finite set of values, and then always; see json-schema-grammar.ts).
 */
export function validateJsonAgainstSchema(schema: Record<string, unknown> | boolean, value: unknown, options: { strict?: boolean } = {}): ValidationResult {
  if (schema === true) return { valid: true };
  if (schema === false) return { valid: false, errors: ["/ the schema false allows no value"] };
  if (options.strict === false && JSON.stringify(schema).includes('"uniqueItems"')) schema = withoutUniqueItems(schema);
  const validate = compileSchema(schema);
  if (validate instanceof Error) return { valid: false, errors: [`the schema is invalid: ${validate.message}`] };
  if (validate(value)) return { valid: true };
  return { valid: false, errors: formatErrors(validate) };
}

/** The schema with no uniqueItems keyword in it. */
function withoutUniqueItems(schema: Record<string, unknown>): Record<string, unknown> {
  const strip = (s: JsonSchema): JsonSchema => {
    if (!isPlainObject(s)) return s;
    const out = mapSubschemas(s, strip);
    delete out.uniqueItems;
    return out;
  };
  return strip(schema) as Record<string, unknown>;
}

/** Keywords a quick check may see besides type/enum/const: they do not constrain values. */
const QUICK_IGNORED = new Set(["title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"]);

function typeMatches(type: string, value: unknown): boolean {
  switch (type) {
    case "null":
      return value === null;
    case "boolean":
      return typeof value === "boolean";
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "string":
      return typeof value === "string";
    case "array":
      return Array.isArray(value);
    case "object":
      return isPlainObject(value);
    default:
      return false;
  }
}

/** The answer for schemas made only of type / enum / const, without ajv; undefined for any other. */
function quickAccepts(schema: Record<string, unknown>, value: unknown): boolean | undefined {
  for (const key of Object.keys(schema)) if (key !== "type" && key !== "enum" && key !== "const" && !QUICK_IGNORED.has(key)) return undefined;
  if ("type" in schema) {
    const types = typeof schema.type === "string" ? [schema.type] : Array.isArray(schema.type) ? schema.type : null;
    if (types === null || !types.some((t) => typeMatches(String(t), value))) return false;
  }
  const text = canonicalJson(value);
  if ("const" in schema && canonicalJson(schema.const) !== text) return false;
  if ("enum" in schema && !(Array.isArray(schema.enum) && schema.enum.some((v) => canonicalJson(v) === text))) return false;
  return true;
}

let checkerAjv: Ajv2020 | null = null;
let checkerRoots = 0;

/**
 * Checks values against parts of one (normalized) schema document, resolving their local `$ref`s
 * against the whole document. Used by the grammar to keep only the `enum` / `const` values that satisfy
 * their sibling keywords and to prove `oneOf` branches disjoint. Call dispose() when done: the
 * schemas it compiled leave the shared ajv instance then.
 */
export class SchemaChecker {
  private rootId: string | null = null;
  private readonly cache = new Map<object, ValidateFunction>();

  constructor(private readonly root: JsonSchema) {}

  private ajv(): { ajv: Ajv2020; rootId: string } {
    checkerAjv ??= createAjv();
    if (this.rootId === null) {
      this.rootId = `urn:svc:schema-root-${++checkerRoots}`;
      checkerAjv.addSchema(isPlainObject(this.root) ? this.root : {}, this.rootId);
    }
    return { ajv: checkerAjv, rootId: this.rootId };
  }

  /** Throws UnsupportedSchemaError (at `path`) when ajv cannot compile the schema. */
  accepts(schema: JsonSchema, value: unknown, path = ""): boolean {
    if (typeof schema === "boolean") return schema;
    const quick = quickAccepts(schema, value);
    if (quick !== undefined) return quick;
    let validate = this.cache.get(schema);
    if (!validate) {
      const { ajv, rootId } = this.ajv();
      const rooted = rootedRefs(schema, rootId) as Record<string, unknown>;
      try {
        validate = ajv.compile(rooted);
      } catch (err) {
        ajv.removeSchema(rooted);
        throw new UnsupportedSchemaError(`a schema that cannot be checked (${(err as Error).message})`, path);
      }
      this.cache.set(schema, validate);
    }
    return validate(value) === true;
  }

  dispose(): void {
    if (!checkerAjv) return;
    for (const validate of this.cache.values()) checkerAjv.removeSchema(validate.schema as object);
    this.cache.clear();
    if (this.rootId !== null) checkerAjv.removeSchema(this.rootId);
    this.rootId = null;
  }
}

function rootedRefs(schema: JsonSchema, rootId: string): JsonSchema {
  if (!isPlainObject(schema)) return schema;
  const out = mapSubschemas(schema, (sub) => rootedRefs(sub, rootId));
  if (typeof out.$ref === "string" && out.$ref.startsWith("#")) out.$ref = rootId + out.$ref;
  delete out.$id;
  return out;
}
