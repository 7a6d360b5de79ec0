// Why one file (over 700 lines): it must stay one piece: SchemaConverter is one recursive walk of a JSON schema;
// each method is one case of the walk (object, array, string, number, union, $ref) that calls back into visit/expr
// and writes into the walk's shared state (the rule table, the $ref rules, the depth), so a split would cut one
// class across files.
//
// The JSON Schema -> GBNF walk. See ../json-schema-grammar.ts for the decisions it implements.

import { UnsupportedSchemaError, pointer } from "./errors.js";
import { GbnfRules, alt, gbnfLiteral, group, seq } from "./gbnf.js";
import { canonicalJson, mergeSchemas, propertySchema, typeList } from "./merge-schemas.js";
import { isPlainObject, setOwn, type JsonSchema } from "./normalize-schema.js";
import { MAX_FRACTION_DIGITS, boundedNumber, toDecimal, type NumericBounds } from "./numeric-range.js";
import { multiplesGrammar, needsMultipleGrammar } from "./multiple-of.js";
import { FORMAT_LENGTHS, Primitives, quoted } from "./primitives.js";
import { patternToGbnf } from "./regex-to-gbnf.js";
import type { SchemaChecker } from "./schema-validator.js";

type Schema = Record<string, unknown>;
type JsonType = "object" | "array" | "string" | "number" | "integer" | "boolean" | "null";

const ALL_TYPES: JsonType[] = ["object", "array", "string", "number", "boolean", "null"];

/** Keywords that say nothing about which values are valid. */
const ANNOTATIONS = new Set([
  "title", "description", "default", "examples", "example", "$comment", "deprecated", "readOnly", "writeOnly",
  "contentEncoding", "contentMediaType", "contentSchema", "discriminator", "xml", "externalDocs",
  "$anchor", "$dynamicAnchor", "$schema", "$vocabulary", "$defs", "definitions", "minContains", "maxContains",
  // then/else without if have no effect (with if, "if" is rejected below).
  "then", "else",
]);

/** Keywords no grammar here can honour. */
const REJECTED = new Map([
  ["not", "not"],
  ["if", "if/then/else"],
  ["contains", "contains"],
  ["$dynamicRef", "$dynamicRef"],
  ["$recursiveRef", "$recursiveRef"],
]);

const OBJECT_KEYWORDS = [
  "properties", "required", "additionalProperties", "patternProperties", "propertyNames", "minProperties",
  "maxProperties", "dependentRequired", "dependentSchemas", "unevaluatedProperties",
];
const ARRAY_KEYWORDS = ["items", "prefixItems", "minItems", "maxItems", "uniqueItems", "unevaluatedItems"];
const STRING_KEYWORDS = ["minLength", "maxLength", "pattern", "format"];
const NUMBER_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"];
const KNOWN_FORMATS = ["date", "time", "date-time", "uuid"] as const;

/** Which refs were entered since the output last consumed a character (a cycle among them never ends). */
type Open = ReadonlySet<string>;
const NOTHING_OPEN: Open = new Set();
const MAX_DEPTH = 200;

function constraints(s: Schema): Schema {
  const out: Schema = {};
  for (const [k, v] of Object.entries(s)) if (!ANNOTATIONS.has(k) && !k.startsWith("x-")) setOwn(out, k, v);
  return out;
}

function omit(s: Schema, ...keys: string[]): Schema {
  const out: Schema = { ...s };
  for (const k of keys) delete out[k];
  return out;
}

function isEmpty(s: Schema): boolean {
  return Object.keys(s).length === 0;
}

function jsonTypeOf(value: unknown): JsonType {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value as JsonType;
}

function typesOverlap(a: readonly JsonType[], b: readonly JsonType[]): JsonType[] {
  const out = new Set<JsonType>();
  for (const x of a)
    for (const y of b) {
      if (x === y) out.add(x);
      else if ((x === "integer" && y === "number") || (x === "number" && y === "integer")) out.add("integer");
    }
  return [...out];
}

export class SchemaConverter {
  private readonly rules = new GbnfRules();
  private readonly primitives = new Primitives(this.rules);
  private readonly refRules = new Map<string, string>();
  private depth = 0;

  constructor(
    private readonly root: JsonSchema,
    private readonly checker: SchemaChecker,
    /** Whether the caller asked for strict adherence: what the grammar cannot hold is then refused. */
    private readonly strict = false,
  ) {}

  convert(): string {
    const root = this.rules.reserve("root");
    this.rules.define(root, this.expr(this.root, "", "root", NOTHING_OPEN));
    return this.rules.render();
  }

  // ----- dispatch ------------------------------------------------------------------------------

  /**
   * An atom (rule name, literal or class) for `schema`. Schemas that are merged before they are
   * written ($ref with siblings, allOf, e.g. pydantic's `{allOf: [{$ref}], description}`) get a named
   * rule per distinct schema, like a plain $ref, so recursion through them ends in a recursive rule.
   */
  private visit(schema: unknown, path: string, hint: string, open: Open): string {
    if (isPlainObject(schema)) {
      const s = constraints(schema);
      if ("allOf" in s || (typeof s.$ref === "string" && Object.keys(s).length > 1)) {
        const key = `merged:${canonicalJson(s)}`;
        const known = this.refRules.get(key);
        if (known !== undefined) {
          if (open.has(key))
            throw new UnsupportedSchemaError("a schema that refers back to itself before any object or array encloses it", path);
          return known;
        }
        const name = this.rules.reserve(hint);
        this.refRules.set(key, name);
        this.rules.define(name, this.expr(schema, path, name, new Set([...open, key])));
        return name;
      }
    }
    return this.rules.atom(hint, this.expr(schema, path, hint, open));
  }

  /** A GBNF expression for the values of `schema`. */
  private expr(schema: unknown, path: string, hint: string, open: Open): string {
    // Legitimate nesting stays far below this; $ref cycles through inlined (merged) refs do not.
    if (this.depth >= MAX_DEPTH) throw new UnsupportedSchemaError("a schema nested too deeply (or a $ref cycle through allOf/anyOf)", path);
    this.depth++;
    try {
      return this.exprAt(schema, path, hint, open);
    } finally {
      this.depth--;
    }
  }

  private exprAt(schema: unknown, path: string, hint: string, open: Open): string {
    if (schema === true) return this.primitives.get("value");
    if (schema === false) throw new UnsupportedSchemaError("the schema false (no value is valid)", path);
    if (!isPlainObject(schema)) throw new UnsupportedSchemaError("a schema must be an object or a boolean", path);
    this.checkKeywords(schema, path);
    const s = constraints(schema);

    if (typeof s.$ref === "string") {
      if (isEmpty(omit(s, "$ref"))) return this.ref(s.$ref, path, open);
      return this.expr(this.flatten(s, path), path, hint, open);
    }
    if ("$ref" in s) throw new UnsupportedSchemaError("$ref must be a string", path);
    if ("allOf" in s) return this.expr(this.flatten(s, path), path, hint, open);
    if ("anyOf" in s || "oneOf" in s) return this.union(s, path, hint, open);
    if ("enum" in s || "const" in s) return this.literals(s, path);

    const leaf = this.withUnevaluated(s);
    if (isEmpty(leaf)) return this.primitives.get("value");
    const types = this.types(leaf, path);
    if (types.length === 0) throw new UnsupportedSchemaError("a schema that allows no type", path);
    if (types.length === 1) return this.typed(leaf, types[0]!, path, hint);
    return alt(types.map((t) => this.rules.atom(`${hint}-${t}`, this.typed(leaf, t, path, `${hint}-${t}`))));
  }

  private checkKeywords(s: Schema, path: string): void {
    for (const key of Object.keys(s)) {
      const what = REJECTED.get(key);
      if (what) throw new UnsupportedSchemaError(`${what} is not supported`, path);
    }
    if ("$id" in s && path !== "") throw new UnsupportedSchemaError("$id inside the schema is not supported", path);
  }

  /** unevaluatedProperties / unevaluatedItems on a schema with no applicators act as additionalProperties / items. */
  private withUnevaluated(s: Schema): Schema {
    let out = s;
    if ("unevaluatedProperties" in out) {
      if (!("additionalProperties" in out)) out = { ...out, additionalProperties: out.unevaluatedProperties };
      out = omit(out, "unevaluatedProperties");
    }
    if ("unevaluatedItems" in out) {
      if (!("items" in out)) out = { ...out, items: out.unevaluatedItems };
      out = omit(out, "unevaluatedItems");
    }
    return out;
  }

  // ----- $ref, allOf -------------------------------------------------------------------------------

  private resolve(ref: string, path: string): { schema: unknown; path: string } {
    if (!ref.startsWith("#")) throw new UnsupportedSchemaError(`$ref to an external document (${ref}) is not supported`, path);
    let fragment: string;
    try {
      fragment = decodeURIComponent(ref.slice(1));
    } catch {
      throw new UnsupportedSchemaError(`$ref ${ref} is malformed`, path);
    }
    if (fragment !== "" && !fragment.startsWith("/"))
      throw new UnsupportedSchemaError(`$ref to an anchor (${ref}) is not supported`, path);
    let node: unknown = this.root;
    if (fragment !== "") {
      for (const raw of fragment.slice(1).split("/")) {
        const token = raw.replace(/~1/g, "/").replace(/~0/g, "~");
        if (Array.isArray(node) && /^\d+$/.test(token)) node = node[Number(token)];
        else if (isPlainObject(node) && Object.hasOwn(node, token)) node = node[token];
        else throw new UnsupportedSchemaError(`$ref ${ref} points to nothing`, path);
      }
    }
    return { schema: node, path: fragment };
  }

  private ref(ref: string, path: string, open: Open): string {
    const target = this.resolve(ref, path);
    if (open.has(ref))
      throw new UnsupportedSchemaError(`$ref ${ref} refers back to itself before any object or array encloses it`, path);
    const known = this.refRules.get(ref);
    if (known !== undefined) return known;
    const last = target.path.split("/").pop() ?? "";
    const name = this.rules.reserve(last === "" ? "ref" : last);
    this.refRules.set(ref, name);
    this.rules.define(name, this.expr(target.schema, target.path, name, new Set([...open, ref])));
    return name;
  }

  /** The schema with its top-level $ref and allOf resolved and merged in (anyOf/oneOf may remain). */
  private flatten(schema: unknown, path: string, depth = 0): JsonSchema {
    if (depth > 32) throw new UnsupportedSchemaError("$ref/allOf nesting too deep (a cycle?)", path);
    if (typeof schema === "boolean") return schema;
    if (!isPlainObject(schema)) throw new UnsupportedSchemaError("a schema must be an object or a boolean", path);
    this.checkKeywords(schema, path);
    const s = constraints(schema);
    let merged: JsonSchema = omit(s, "$ref", "allOf", "unevaluatedProperties", "unevaluatedItems");
    if (typeof s.$ref === "string") {
      const target = this.resolve(s.$ref, path);
      merged = mergeSchemas(merged, this.flatten(target.schema, target.path, depth + 1), path);
    }
    if ("allOf" in s) {
      if (!Array.isArray(s.allOf)) throw new UnsupportedSchemaError("allOf must be an array", path);
      s.allOf.forEach((part, i) => {
        merged = mergeSchemas(merged, this.flatten(part, pointer(path, "allOf", i), depth + 1), path);
      });
    }
    if (merged === false) throw new UnsupportedSchemaError("allOf parts that no value satisfies together", path);
    if (isPlainObject(merged)) {
      if ("unevaluatedProperties" in s && !("additionalProperties" in merged))
        merged = { ...merged, additionalProperties: s.unevaluatedProperties };
      if ("unevaluatedItems" in s && isPlainObject(merged) && !("items" in merged)) merged = { ...merged, items: s.unevaluatedItems };
    }
    return merged;
  }

  // ----- anyOf / oneOf ---------------------------------------------------------------------------

  private union(s: Schema, path: string, hint: string, open: Open): string {
    const keyword = "oneOf" in s ? "oneOf" : "anyOf";
    const branches = s[keyword];
    if (!Array.isArray(branches) || branches.length === 0) throw new UnsupportedSchemaError(`${keyword} must be a non-empty array`, path);
    const base = omit(s, keyword);
    const baseIsEmpty = isEmpty(omit(base, "unevaluatedProperties", "unevaluatedItems"));
    const schemas: Array<{ schema: unknown; path: string }> = branches.map((b, i) => {
      const branchPath = pointer(path, keyword, i);
      if (baseIsEmpty) return { schema: b, path: branchPath };
      // Sibling keywords hold for every branch: merge them in (base may still hold the other of anyOf/oneOf).
      const siblings = this.flatten(omit(base, "unevaluatedProperties", "unevaluatedItems"), path);
      let merged: JsonSchema = mergeSchemas(siblings, this.flatten(b, branchPath), branchPath);
      if (isPlainObject(merged)) {
        if ("unevaluatedProperties" in base && !("additionalProperties" in merged))
          merged = { ...merged, additionalProperties: base.unevaluatedProperties };
        if ("unevaluatedItems" in base && isPlainObject(merged) && !("items" in merged)) merged = { ...merged, items: base.unevaluatedItems };
      }
      return { schema: merged, path: branchPath };
    });
    // Branches no value satisfies are dropped (there must be one left).
    const usable = schemas.filter((b) => !this.isUnsatisfiable(b.schema, b.path));
    if (usable.length === 0) throw new UnsupportedSchemaError(`${keyword} with no satisfiable branch`, path);
    if (keyword === "oneOf") this.checkDisjoint(usable, path);
    const options = usable.map((b, i) => this.visit(b.schema, b.path, `${hint}-${i}`, open));
    return alt(options);
  }

  /** Obviously unsatisfiable (false, no type, or no enum/const value left); not a full check. */
  private isUnsatisfiable(schema: unknown, path: string): boolean {
    if (schema === false) return true;
    if (!isPlainObject(schema)) return false;
    const s = constraints(schema);
    if (Array.isArray(s.type) && s.type.length === 0) return true;
    if (("enum" in s || "const" in s) && !("$ref" in s) && !("allOf" in s) && !("anyOf" in s) && !("oneOf" in s))
      return this.literalValues(s, path).length === 0;
    return false;
  }

  // ----- enum / const ----------------------------------------------------------------------------

  private literalValues(s: Schema, path: string): unknown[] {
    const values = "const" in s ? [s.const] : Array.isArray(s.enum) ? s.enum : null;
    if (values === null) throw new UnsupportedSchemaError("enum must be an array", path);
    const rest = omit(s, "enum", "const");
    const types = typeList(rest.type);
    const onlyType = isEmpty(omit(rest, "type"));
    const seen = new Set<string>();
    const out: unknown[] = [];
    for (const v of values) {
      const key = canonicalJson(v);
      if (seen.has(key)) continue;
      seen.add(key);
      const ok = onlyType
        ? types === null || types.some((t) => t === jsonTypeOf(v) || (t === "number" && jsonTypeOf(v) === "integer"))
        : this.checker.accepts(s, v, path);
      if (ok) out.push(v);
    }
    return out;
  }

  private literals(s: Schema, path: string): string {
    const values = this.literalValues(s, path);
    if (values.length === 0) throw new UnsupportedSchemaError("no enum/const value satisfies the rest of its schema", path);
    return alt(values.map((v) => gbnfLiteral(JSON.stringify(v))));
  }

  // ----- types -----------------------------------------------------------------------------------

  /** The JSON types the grammar writes for a leaf schema (no $ref/allOf/anyOf/oneOf/enum/const). */
  private types(s: Schema, path: string): JsonType[] {
    const declared = typeList(s.type);
    if (declared !== null) {
      const out = new Set<JsonType>();
      for (const t of declared) {
        if (!["object", "array", "string", "number", "integer", "boolean", "null"].includes(t))
          throw new UnsupportedSchemaError(`unknown type ${JSON.stringify(t)}`, path);
        out.add(t as JsonType);
      }
      if (out.has("number")) out.delete("integer");
      return [...out];
    }
    const inferred: JsonType[] = [];
    if (OBJECT_KEYWORDS.some((k) => k in s)) inferred.push("object");
    if (ARRAY_KEYWORDS.some((k) => k in s)) inferred.push("array");
    if (STRING_KEYWORDS.some((k) => k in s)) inferred.push("string");
    if (NUMBER_KEYWORDS.some((k) => k in s)) inferred.push("number");
    return inferred.length > 0 ? inferred : ALL_TYPES;
  }

  private typed(s: Schema, type: JsonType, path: string, hint: string): string {
    switch (type) {
      case "null":
        return this.primitives.get("null");
      case "boolean":
        return this.primitives.get("boolean");
      case "integer":
        return this.number(s, true, path, hint);
      case "number":
        return this.number(s, false, path, hint);
      case "string":
        return this.string(s, path, hint);
      case "array":
        return this.array(s, path, hint);
      case "object":
        return this.object(s, path, hint);
    }
  }

  // ----- numbers ---------------------------------------------------------------------------------

  private bounds(s: Schema): NumericBounds {
    const num = (k: string) => (typeof s[k] === "number" && Number.isFinite(s[k]) ? (s[k] as number) : null);
    const [minimum, exMinimum, maximum, exMaximum] = [num("minimum"), num("exclusiveMinimum"), num("maximum"), num("exclusiveMaximum")];
    let min: NumericBounds["min"] = null;
    if (minimum !== null) min = { value: minimum, exclusive: false };
    if (exMinimum !== null && (min === null || exMinimum >= min.value)) min = { value: exMinimum, exclusive: true };
    let max: NumericBounds["max"] = null;
    if (maximum !== null) max = { value: maximum, exclusive: false };
    if (exMaximum !== null && (max === null || exMaximum <= max.value)) max = { value: exMaximum, exclusive: true };
    return { min, max };
  }

  /**
   * Integers: bounds exact. Numbers: bounds exact (in the restricted forms of numeric-range.ts);
   * multipleOf 10^-k limits fraction digits to k (exact); any other multipleOf is exact too (multiple-of.ts).
   */
  private number(s: Schema, integer: boolean, path: string, hint: string): string {
    const bounds = this.bounds(s);
    if (typeof s.multipleOf === "number" && s.multipleOf > 0 && Number.isFinite(s.multipleOf) && needsMultipleGrammar(s.multipleOf, integer))
      return multiplesGrammar(s.multipleOf, integer, bounds, this.rules, hint, path);
    let fractionDigits = integer ? 0 : MAX_FRACTION_DIGITS;
    let restricted = false;
    if (!integer && typeof s.multipleOf === "number" && s.multipleOf > 0) {
      const d = toDecimal(s.multipleOf);
      if (d.m === 1n && d.e <= 0) {
        fractionDigits = Math.min(fractionDigits, -d.e);
        restricted = true;
      }
    }
    if (bounds.min && bounds.max) {
      const { min, max } = bounds;
      const empty = min.value > max.value || (min.value === max.value && (min.exclusive || max.exclusive));
      if (empty) throw new UnsupportedSchemaError("numeric bounds that no number satisfies", path);
    }
    if (!bounds.min && !bounds.max && !restricted) return this.primitives.get(integer ? "integer" : "number");
    return boundedNumber(bounds, fractionDigits, path);
  }

  // ----- strings ---------------------------------------------------------------------------------

  private string(s: Schema, path: string, hint: string): string {
    const minLength = typeof s.minLength === "number" ? Math.max(0, Math.ceil(s.minLength)) : 0;
    const maxLength = typeof s.maxLength === "number" ? Math.floor(s.maxLength) : null;
    if (maxLength !== null && maxLength < minLength) throw new UnsupportedSchemaError("minLength above maxLength", path);
    const format = KNOWN_FORMATS.find((f) => f === s.format) ?? null;
    const pattern = typeof s.pattern === "string" && s.pattern !== "" ? s.pattern : null;
    if (format) {
      if (pattern) throw new UnsupportedSchemaError(`format ${format} together with pattern is not supported`, path);
      const [lo, hi] = FORMAT_LENGTHS[format];
      if (minLength > lo || (maxLength !== null && maxLength < hi))
        throw new UnsupportedSchemaError(`format ${format} together with minLength/maxLength is not supported`, path);
      return quoted(this.primitives.get(format));
    }
    if (pattern) return quoted(patternToGbnf(pattern, { minLength, maxLength }, this.rules, hint, path));
    if (minLength === 0 && maxLength === null) return this.primitives.get("string");
    return quoted(this.rules.repeat(this.primitives.get("char"), minLength, maxLength));
  }

  // ----- arrays ----------------------------------------------------------------------------------

  private array(s: Schema, path: string, hint: string): string {
    const minItems = typeof s.minItems === "number" ? Math.max(0, Math.ceil(s.minItems)) : 0;
    const maxItems = typeof s.maxItems === "number" ? Math.floor(s.maxItems) : null;
    if (maxItems !== null && maxItems < minItems) throw new UnsupportedSchemaError("minItems above maxItems", path);
    const prefixSchemas = Array.isArray(s.prefixItems) ? s.prefixItems : [];
    const items: unknown = "items" in s ? s.items : true;

    // Prefix items are all written (the array may not be shorter than them then, which is still valid),
    // up to maxItems, and up to the first that allows nothing.
    const prefix: string[] = [];
    for (const [i, sub] of prefixSchemas.entries()) {
      if (maxItems !== null && prefix.length >= maxItems) break;
      if (sub === false) break;
      prefix.push(this.visit(sub, pointer(path, "prefixItems", i), `${hint}-${i}`, NOTHING_OPEN));
    }
    const stoppedEarly = prefix.length < prefixSchemas.length;
    const extraMin = Math.max(0, minItems - prefix.length);
    let extraMax = maxItems === null ? null : maxItems - prefix.length;
    if (items === false || stoppedEarly) extraMax = 0;
    if (extraMax !== null && extraMin > extraMax) throw new UnsupportedSchemaError("an array length that the items allow no array for", path);

    if (s.uniqueItems === true && prefix.length === 0 && (maxItems === null || maxItems > 1) && extraMax !== 0) {
      const unique = this.uniqueLiteralArray(items, extraMin, extraMax, pointer(path, "items"), hint);
      if (unique !== null) return unique;
      // Otherwise the grammar cannot keep the items apart: refused under strict, else left to the model
      // (see json-schema-grammar.ts).
      if (this.strict)
        throw new UnsupportedSchemaError(
          "uniqueItems over items that are not a finite set of values (enum, const, boolean) cannot be enforced under strict; leave out strict (the items are then unique only as far as the model keeps them so) or uniqueItems",
          path,
        );
    }

    const parts: string[] = ['"["'];
    prefix.forEach((p, i) => parts.push(i > 0 ? '","' : "", p));
    if (extraMax !== 0) {
      const item = this.visit(items, pointer(path, "items"), `${hint}-item`, NOTHING_OPEN);
      const next = this.rules.add(`${hint}-next`, seq('","', item));
      if (prefix.length > 0) parts.push(this.rules.repeat(next, extraMin, extraMax));
      else if (extraMin > 0) parts.push(item, this.rules.repeat(next, extraMin - 1, extraMax === null ? null : extraMax - 1));
      else {
        const tail = this.rules.repeat(next, 0, extraMax === null ? null : extraMax - 1);
        parts.push(`${group(seq(item, tail))}?`);
      }
    }
    parts.push('"]"');
    return seq(...parts);
  }

  /** The literal values a schema allows, when it is a finite set (enum, const, boolean, null); else null. */
  private finiteValues(schema: unknown, path: string): unknown[] | null {
    let s: JsonSchema;
    try {
      s = this.flatten(schema, path);
    } catch {
      return null;
    }
    if (!isPlainObject(s) || "anyOf" in s || "oneOf" in s) return null;
    if ("enum" in s || "const" in s) return this.literalValues(s, path);
    const types = typeList(s.type);
    if (types === null || isEmpty(omit(s, "type")) === false) return null;
    const values: unknown[] = [];
    for (const t of types) {
      if (t === "boolean") values.push(true, false);
      else if (t === "null") values.push(null);
      else return null;
    }
    return values;
  }

  /**
   * uniqueItems over a finite set of values: the array is a subsequence of those values in their
   * declared order, so no value repeats. Returns null when the item schema is not a finite set or
   * the choice would need too many rules.
   */
  private uniqueLiteralArray(items: unknown, minItems: number, maxItems: number | null, path: string, hint: string): string | null {
    const values = this.finiteValues(items, path);
    if (values === null) return null;
    const n = values.length;
    const max = Math.min(maxItems ?? n, n);
    if (minItems > max) throw new UnsupportedSchemaError("uniqueItems with more minItems than distinct allowed values", path);
    if ((n + 1) * (max + 1) > 1000) return null;
    const literal = values.map((v) => gbnfLiteral(JSON.stringify(v)));
    const memo = new Map<string, string | null>();
    // state(i, c): choose from values[i..] after c were written; null when minItems cannot be reached.
    const state = (i: number, c: number): string | null => {
      const key = `${i},${c}`;
      if (memo.has(key)) return memo.get(key)!;
      let result: string | null;
      if (c + (n - i) < minItems) result = null;
      else if (i === n) result = "";
      else {
        const options: string[] = [];
        if (c < max) {
          const rest = state(i + 1, c + 1);
          if (rest !== null) options.push(seq(c > 0 ? '","' : "", literal[i]!, rest));
        }
        const skip = state(i + 1, c);
        if (skip !== null) options.push(skip);
        result = options.length === 0 ? null : this.rules.atom(`${hint}-u${i}-${c}`, alt(options.map((o) => (o === "" ? '""' : o))));
      }
      memo.set(key, result);
      return result;
    };
    const body = state(0, 0);
    if (body === null) throw new UnsupportedSchemaError("uniqueItems with more minItems than distinct allowed values", path);
    return seq('"["', body, '"]"');
  }

  // ----- objects ---------------------------------------------------------------------------------

  private object(s: Schema, path: string, hint: string): string {
    const properties = isPlainObject(s.properties) ? s.properties : {};
    const required = new Set(Array.isArray(s.required) ? s.required.filter((r): r is string => typeof r === "string") : []);
    const minProperties = typeof s.minProperties === "number" ? Math.ceil(s.minProperties) : 0;
    const maxProperties = typeof s.maxProperties === "number" ? Math.floor(s.maxProperties) : null;
    if (maxProperties !== null && maxProperties < minProperties) throw new UnsupportedSchemaError("minProperties above maxProperties", path);

    const declared = [...Object.keys(properties), ...[...required].filter((r) => !Object.hasOwn(properties, r))];
    if (declared.length === 0) return this.freeObject(s, path, hint, minProperties, maxProperties);

    const deps = new Map<string, string[]>();
    if (isPlainObject(s.dependentRequired))
      for (const [k, v] of Object.entries(s.dependentRequired))
        if (Array.isArray(v)) deps.set(k, v.filter((d): d is string => typeof d === "string"));
    const dependentSchemas = new Set(isPlainObject(s.dependentSchemas) ? Object.keys(s.dependentSchemas) : []);

    // Which keys may be written at all.
    const names: string[] = [];
    const allowed = (key: string) => {
      const sub = propertySchema(s, key);
      if (sub === false) return false;
      if ("propertyNames" in s && !this.checker.accepts(s.propertyNames as JsonSchema, key, pointer(path, "propertyNames"))) return false;
      return true;
    };
    const addName = (key: string) => {
      if (names.includes(key)) return;
      if (!allowed(key)) throw new UnsupportedSchemaError(`required property ${JSON.stringify(key)} is not allowed by the schema`, path);
      names.push(key);
    };
    for (const key of declared) {
      if (required.has(key)) addName(key);
      else if (allowed(key)) names.push(key);
    }
    for (const key of dependentSchemas)
      if (required.has(key))
        throw new UnsupportedSchemaError(`dependentSchemas for the required property ${JSON.stringify(key)} is not supported`, path);

    const closeRequired = () => {
      let changed = true;
      while (changed) {
        changed = false;
        for (const key of [...required])
          for (const dep of deps.get(key) ?? [])
            if (!required.has(dep)) {
              addName(dep);
              required.add(dep);
              changed = true;
            }
      }
    };
    closeRequired();
    const depsMet = (key: string) => (deps.get(key) ?? []).every((d) => required.has(d)) && !dependentSchemas.has(key);
    // minProperties: promote optional properties (in order) to required.
    for (const key of names) {
      if (required.size >= minProperties) break;
      if (!required.has(key) && (deps.get(key) ?? []).every((d) => names.includes(d)) && !dependentSchemas.has(key)) {
        required.add(key);
        closeRequired();
      }
    }
    if (required.size < minProperties)
      throw new UnsupportedSchemaError("minProperties above the number of properties the grammar can write", path);
    if (maxProperties !== null && required.size > maxProperties)
      throw new UnsupportedSchemaError("more required properties than maxProperties", path);
    // Optional properties whose dependencies are not all written are left out; maxProperties caps the rest.
    let optionalRoom = maxProperties === null ? Infinity : maxProperties - required.size;
    const written = names.filter((key) => {
      if (required.has(key)) return true;
      if (!depsMet(key) || optionalRoom <= 0) return false;
      optionalRoom--;
      return true;
    });

    const members = written.map((key) => {
      const value = this.visit(propertySchema(s, key), pointer(path, "properties", key), `${hint}-${key}`, NOTHING_OPEN);
      return { kv: seq(gbnfLiteral(`${JSON.stringify(key)}:`), value), required: required.has(key), key };
    });
    return seq('"{"', this.members(members, hint), '"}"');
  }

  /**
   * Members in declared order: required ones always, optional ones maybe, with a comma before every
   * member but the first written. suffix(i, first) is the grammar for members i.. when nothing
   * (first) or something (!first) was written before.
   */
  private members(members: Array<{ kv: string; required: boolean; key: string }>, hint: string): string {
    const memo = new Map<string, string>();
    const suffix = (i: number, first: boolean): string => {
      if (i === members.length) return "";
      const m = members[i]!;
      const comma = first ? "" : '","';
      if (m.required) return seq(comma, m.kv, suffix(i + 1, false));
      const key = `${i}:${first}`;
      const known = memo.get(key);
      if (known !== undefined) return known;
      const take = seq(comma, m.kv, suffix(i + 1, false));
      const skip = suffix(i + 1, first);
      const body = skip === "" || skip === '""' ? `${group(take)}?` : alt([take, skip]);
      const name = this.rules.add(`${hint}-${m.key}-${first ? "first" : "rest"}`, body);
      memo.set(key, name);
      return name;
    };
    return suffix(0, true);
  }

  /** An object with no declared properties: free-form keys, values per additionalProperties. */
  private freeObject(s: Schema, path: string, hint: string, minProperties: number, maxProperties: number | null): string {
    if (isPlainObject(s.patternProperties) && Object.keys(s.patternProperties).length > 0)
      throw new UnsupportedSchemaError("patternProperties without declared properties are not supported", path);
    const additional = "additionalProperties" in s ? s.additionalProperties : true;
    if (additional === false || maxProperties === 0) {
      if (minProperties > 0) throw new UnsupportedSchemaError("minProperties on an object that allows no property", path);
      return gbnfLiteral("{}");
    }
    // Free-form keys may repeat, and JSON.parse keeps one of each: two keys could count as one.
    if (minProperties > 1) throw new UnsupportedSchemaError("minProperties above 1 without declared properties is not supported", path);
    if (additional === true && !("propertyNames" in s) && minProperties === 0 && maxProperties === null)
      return this.primitives.get("object");
    let key = this.primitives.get("string");
    if ("propertyNames" in s) {
      const names = mergeSchemas({ type: "string" }, this.flatten(s.propertyNames, pointer(path, "propertyNames")), path);
      key = this.visit(names, pointer(path, "propertyNames"), `${hint}-key`, NOTHING_OPEN);
    }
    const value = this.visit(additional, pointer(path, "additionalProperties"), `${hint}-value`, NOTHING_OPEN);
    const kv = this.rules.add(`${hint}-kv`, seq(key, '":"', value));
    const next = this.rules.add(`${hint}-next`, seq('","', kv));
    const tail = this.rules.repeat(next, 0, maxProperties === null ? null : maxProperties - 1);
    const body = minProperties > 0 ? seq(kv, tail) : `${group(seq(kv, tail))}?`;
    return seq('"{"', body, '"}"');
  }

  // ----- oneOf disjointness ----------------------------------------------------------------------

  private checkDisjoint(branches: Array<{ schema: unknown; path: string }>, path: string): void {
    for (let i = 0; i < branches.length; i++)
      for (let j = i + 1; j < branches.length; j++) {
        const a = branches[i]!;
        const b = branches[j]!;
        if (!(this.excludes(a.schema, b.schema, a.path) && this.excludes(b.schema, a.schema, b.path)))
          throw new UnsupportedSchemaError(
            `oneOf branches ${i} and ${j} may both match one value (only provably disjoint oneOf branches are supported; use anyOf)`,
            path,
          );
      }
  }

  /** True when no value the grammar writes for `x` is valid under `y`. */
  private excludes(x: unknown, y: unknown, path: string): boolean {
    let fx: JsonSchema;
    let fy: JsonSchema;
    try {
      fx = this.flatten(x, path);
      fy = this.flatten(y, path);
    } catch {
      return false;
    }
    if (fx === false) return true;
    if (fx === true || fy === true) return false;
    if (fy === false) return true;
    for (const k of ["anyOf", "oneOf"] as const) {
      if (Array.isArray(fx[k])) {
        const base = omit(fx, k);
        return (fx[k] as unknown[]).every((b) => {
          try {
            return this.excludes(mergeSchemas(base, this.flatten(b, path), path), fy, path);
          } catch {
            return false;
          }
        });
      }
    }
    if (Array.isArray(fy.anyOf) || Array.isArray(fy.oneOf)) {
      const k = Array.isArray(fy.anyOf) ? "anyOf" : "oneOf";
      if ((fy[k] as unknown[]).every((b) => this.excludes(fx, b, path))) return true;
    }
    if ("enum" in fx || "const" in fx) {
      const values = this.literalValues(fx, path);
      return values.every((v) => !this.checker.accepts(y as JsonSchema, v, path));
    }
    const tx = this.types(this.withUnevaluated(fx), path);
    const ty = this.acceptedTypes(fy);
    const shared = typesOverlap(tx, ty);
    if (shared.length === 0) return true;
    if (shared.length === 1 && shared[0] === "object" && !Array.isArray(fy.anyOf) && !Array.isArray(fy.oneOf)) {
      // A discriminator: a property x always writes, with values y rejects.
      const required = Array.isArray(fx.required) ? fx.required : [];
      for (const key of required) {
        if (typeof key !== "string") continue;
        const values = this.finiteValues(propertySchema(fx, key), path);
        if (values === null) continue;
        const ySchema = propertySchema(fy, key);
        if (values.every((v) => !this.checker.accepts(ySchema, v, path))) return true;
      }
    }
    return false;
  }

  private acceptedTypes(s: Schema): JsonType[] {
    if ("enum" in s || "const" in s) {
      const values = "const" in s ? [s.const] : Array.isArray(s.enum) ? s.enum : [];
      return [...new Set(values.map(jsonTypeOf))];
    }
    const declared = typeList(s.type);
    if (declared === null) return [...ALL_TYPES, "integer"];
    return declared.filter((t): t is JsonType => ["object", "array", "string", "number", "integer", "boolean", "null"].includes(t));
  }
}
