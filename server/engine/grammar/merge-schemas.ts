// Intersection of two flat schemas (no `$ref` / `allOf` at their top: the caller resolves those first),
// for `allOf` and for sibling keywords next to `anyOf` / `oneOf`. The result allows only values both
// allow (or fewer); keywords that cannot be combined throw UnsupportedSchemaError. Subschemas are not
// merged eagerly: shared properties, items, etc. become `{ allOf: [x, y] }`, merged when visited.

import { UnsupportedSchemaError } from "./errors.js";
import { isPlainObject, setOwn, type JsonSchema } from "./normalize-schema.js";

/** JSON with object keys sorted: equal JSON values give equal strings. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (isPlainObject(value))
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`)
      .join(",")}}`;
  return JSON.stringify(value);
}

function both(a: JsonSchema | undefined, b: JsonSchema | undefined): JsonSchema | undefined {
  if (a === undefined || a === true) return b;
  if (b === undefined || b === true) return a;
  if (a === false || b === false) return false;
  return { allOf: [a, b] };
}

const JSON_TYPES = ["object", "array", "string", "number", "integer", "boolean", "null"];

export function typeList(type: unknown): string[] | null {
  if (typeof type === "string") return [type];
  if (Array.isArray(type)) return type.filter((t): t is string => typeof t === "string");
  return null;
}

function intersectTypes(a: string[], b: string[]): string[] {
  const out: string[] = [];
  for (const t of JSON_TYPES) {
    const inA = a.includes(t) || (t === "integer" && a.includes("number"));
    const inB = b.includes(t) || (t === "integer" && b.includes("number"));
    if (inA && inB) out.push(t);
  }
  // "number" already covers "integer".
  return out.includes("number") ? out.filter((t) => t !== "integer") : out;
}

/** The literal values a schema allows by enum/const, or null if it has neither. */
function literals(s: Record<string, unknown>): unknown[] | null {
  if ("const" in s) return [s.const];
  if (Array.isArray(s.enum)) return s.enum;
  return null;
}

function patternsMatching(s: Record<string, unknown>, key: string): JsonSchema[] {
  if (!isPlainObject(s.patternProperties)) return [];
  const out: JsonSchema[] = [];
  for (const [pattern, sub] of Object.entries(s.patternProperties)) {
    let re: RegExp;
    try {
      re = new RegExp(pattern, "u");
    } catch {
      continue;
    }
    if (re.test(key)) out.push(sub as JsonSchema);
  }
  return out;
}

/**
 * What `s` says about the value of property `key`: its `properties` entry, or the matching
 * `patternProperties`, or `additionalProperties` (false: the key is not allowed).
 */
export function propertySchema(s: Record<string, unknown>, key: string): JsonSchema {
  const props = isPlainObject(s.properties) ? s.properties : {};
  const fromPatterns = patternsMatching(s, key);
  let out: JsonSchema | undefined = Object.hasOwn(props, key) ? (props[key] as JsonSchema) : undefined;
  for (const p of fromPatterns) out = both(out, p);
  if (out !== undefined) return out;
  const additional = s.additionalProperties;
  return additional === undefined ? true : (additional as JsonSchema);
}

const OBJECT_KEYWORDS = ["properties", "patternProperties", "additionalProperties"];

function mergeObjects(a: Record<string, unknown>, b: Record<string, unknown>, out: Record<string, unknown>, path: string) {
  if (isPlainObject(a.patternProperties) && isPlainObject(b.patternProperties))
    throw new UnsupportedSchemaError("allOf with patternProperties in more than one part is not supported", path);
  const keys = new Set<string>([
    ...Object.keys(isPlainObject(a.properties) ? a.properties : {}),
    ...Object.keys(isPlainObject(b.properties) ? b.properties : {}),
  ]);
  const properties: Record<string, unknown> = {};
  for (const key of keys) {
    const merged = both(propertySchema(a, key), propertySchema(b, key));
    if (merged !== undefined && merged !== false) setOwn(properties, key, merged);
    // A key one part forbids is left out; if it is required, the converter reports it.
  }
  if (keys.size > 0) out.properties = properties;
  const patterns = isPlainObject(a.patternProperties) ? a.patternProperties : b.patternProperties;
  if (patterns !== undefined) out.patternProperties = patterns;
  const additional = both(a.additionalProperties as JsonSchema | undefined, b.additionalProperties as JsonSchema | undefined);
  if (additional !== undefined) out.additionalProperties = additional;
}

function mergePrefixItems(a: Record<string, unknown>, b: Record<string, unknown>): JsonSchema[] {
  const pa = Array.isArray(a.prefixItems) ? (a.prefixItems as JsonSchema[]) : [];
  const pb = Array.isArray(b.prefixItems) ? (b.prefixItems as JsonSchema[]) : [];
  const n = Math.max(pa.length, pb.length);
  const out: JsonSchema[] = [];
  for (let i = 0; i < n; i++) {
    const x = i < pa.length ? pa[i] : (a.items as JsonSchema | undefined);
    const y = i < pb.length ? pb[i] : (b.items as JsonSchema | undefined);
    out.push(both(x, y) ?? true);
  }
  return out;
}

function product(a: JsonSchema[], b: JsonSchema[], path: string): JsonSchema[] {
  if (a.length * b.length > 64)
    throw new UnsupportedSchemaError("combining these anyOf/oneOf lists gives too many alternatives", path);
  return a.flatMap((x) => b.map((y) => both(x, y) ?? true));
}

/** The intersection of two flat schemas. */
export function mergeSchemas(a: JsonSchema, b: JsonSchema, path: string): JsonSchema {
  if (a === true) return b;
  if (b === true) return a;
  if (a === false || b === false) return false;
  const out: Record<string, unknown> = {};
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  const has = (k: string) => Object.hasOwn(a, k) && Object.hasOwn(b, k);

  if (OBJECT_KEYWORDS.some((k) => k in a || k in b)) mergeObjects(a, b, out, path);
  if ("prefixItems" in a || "prefixItems" in b) out.prefixItems = mergePrefixItems(a, b);

  const la = literals(a);
  const lb = literals(b);
  if (la && lb) {
    const inB = new Set(lb.map(canonicalJson));
    out.enum = la.filter((v) => inB.has(canonicalJson(v)));
  } else if (la || lb) out.enum = la ?? lb;

  for (const key of keys) {
    if (OBJECT_KEYWORDS.includes(key) || key === "prefixItems" || key === "enum" || key === "const") continue;
    if (key === "$defs" || key === "definitions") continue;
    const x = a[key];
    const y = b[key];
    if (!has(key)) {
      setOwn(out, key, Object.hasOwn(a, key) ? x : y);
      continue;
    }
    switch (key) {
      case "type": {
        const ta = typeList(x) ?? JSON_TYPES;
        const tb = typeList(y) ?? JSON_TYPES;
        out.type = intersectTypes(ta, tb);
        break;
      }
      case "required":
        out.required = [...new Set([...(Array.isArray(x) ? x : []), ...(Array.isArray(y) ? y : [])])];
        break;
      case "items":
      case "propertyNames":
      case "unevaluatedItems":
      case "unevaluatedProperties":
        out[key] = both(x as JsonSchema, y as JsonSchema);
        break;
      case "minLength":
      case "minItems":
      case "minProperties":
      case "minimum":
      case "exclusiveMinimum":
        out[key] = Math.max(x as number, y as number);
        break;
      case "maxLength":
      case "maxItems":
      case "maxProperties":
      case "maximum":
      case "exclusiveMaximum":
        out[key] = Math.min(x as number, y as number);
        break;
      case "uniqueItems":
        out[key] = x === true || y === true;
        break;
      case "multipleOf": {
        const [p, q] = [x as number, y as number];
        if (Number.isInteger(p / q)) out[key] = p;
        else if (Number.isInteger(q / p)) out[key] = q;
        else throw new UnsupportedSchemaError("allOf with two different multipleOf is not supported", path);
        break;
      }
      case "format":
      case "pattern":
        if (x !== y) throw new UnsupportedSchemaError(`allOf with two different ${key} values is not supported`, path);
        out[key] = x;
        break;
      case "anyOf":
      case "oneOf":
        out[key] = product(x as JsonSchema[], y as JsonSchema[], path);
        break;
      case "dependentRequired": {
        const merged: Record<string, unknown> = { ...(x as Record<string, unknown>) };
        for (const [k, v] of Object.entries(y as Record<string, unknown>))
          setOwn(merged, k, [...new Set([...((Object.hasOwn(merged, k) ? merged[k] : []) as string[]), ...(v as string[])])]);
        out[key] = merged;
        break;
      }
      case "dependentSchemas": {
        const merged: Record<string, unknown> = { ...(x as Record<string, unknown>) };
        for (const [k, v] of Object.entries(y as Record<string, unknown>))
          setOwn(merged, k, both((Object.hasOwn(merged, k) ? merged[k] : undefined) as JsonSchema | undefined, v as JsonSchema));
        out[key] = merged;
        break;
      }
      default:
        // Annotations and keywords the converter rejects anyway (not, if, contains, ...): keep one.
        setOwn(out, key, x);
    }
  }
  return out;
}
