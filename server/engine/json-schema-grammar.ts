// JSON Schema -> llama.cpp GBNF, for a request's output schema and its tools' parameters.
//
// The rule: whatever the model writes under the grammar parses with JSON.parse and satisfies the schema
// (checked by validateJsonAgainstSchema below). Where a keyword cannot be honoured, the conversion
// throws UnsupportedSchemaError rather than produce a grammar that lets invalid output through. The one
// exception, uniqueItems over items that are not a finite set when the caller did not ask for strict, is
// under "Strict" below.
//
// Output is compact JSON: no whitespace anywhere between tokens.
//
// Decisions
// - Dialects: draft-04..2020-12 and OpenAPI 3.0 are normalized first (grammar/normalize-schema.ts), so
//   draft-07 tuples, boolean exclusiveMinimum, `dependencies` and `nullable: true` (= "or null") work.
// - No `type`: the types are inferred from the keywords present (properties -> object, items -> array,
//   minLength/pattern/format -> string, minimum/... -> number); with none at all, any JSON value.
// - Objects: properties are written in declaration order; required ones always, optional ones maybe,
//   with the comma handling of llama.cpp's json-schema-to-grammar (a rule per optional suffix, so an
//   object with no required property is handled too).
//   With declared properties, only those are written, whatever additionalProperties says (absent, true
//   or a schema): an object without extra keys satisfies the schema, and free keys could collide with
//   declared ones. With no declared properties: `additionalProperties: false` gives `{}`, otherwise free
//   key/value pairs with the additionalProperties schema (and propertyNames) for values (and keys);
//   `{type: "object"}` is any object. `minProperties` / `maxProperties` promote optional properties to
//   required / leave optional properties out; dependentRequired is honoured the same way (optional
//   properties whose dependencies are not written are left out).
// - Arrays: items, prefixItems (all written, up to maxItems), minItems / maxItems as GBNF repetition
//   (llama.cpp's parser supports x{m,n} up to 2000; larger counts are split into nested rules).
//   uniqueItems over a finite set of values (enum, const, boolean, null) is exact: the array is a
//   subsequence of the values in their declared order.
// - Strings: JSON string characters (raw except " \ and control characters; escapes \" \\ \/ \b \f \n
//   \r \t \uXXXX, minus lone surrogate halves, which would count wrongly for minLength).
//   minLength / maxLength by repetition. format date, time, date-time (RFC 3339, real month lengths and
//   leap years, no leap seconds) and uuid are exact; other formats are annotations (not validated
//   either). pattern: a safe subset of ECMAScript regexes is turned into a grammar (see
//   grammar/regex-to-gbnf.ts; lookarounds, backreferences, \b, \p{} are rejected with
//   UnsupportedSchemaError) and the whole string must match it; pattern with minLength/maxLength works
//   when the pattern is a sequence of (quantified) characters, else it is rejected.
// - Numbers: integers have at most 15 digits, fractions 16, exponents 2 (no overflow). Bounds (minimum, maximum, exclusive
//   ones) are exact: for integers by digit ranges; for numbers with no exponent, at most 9 integer and
//   6 fraction digits, compared exactly as decimals (see grammar/numeric-range.ts for why rounding on
//   parse cannot break them). multipleOf: see below.
// - enum / const: any JSON values, written compactly as JSON.stringify does; values that fail their
//   sibling keywords (e.g. type) are dropped.
// - anyOf -> alternatives. oneOf -> alternatives too, but only when the branches are provably disjoint
//   (different types, disjoint literal sets, or a required property with disjoint literal values, like
//   a discriminator); otherwise UnsupportedSchemaError (a value matching two branches fails oneOf).
//   Keywords next to anyOf/oneOf are merged into each branch; branches left with nothing valid (no type,
//   no enum value) are dropped.
// - allOf: the parts are merged (grammar/merge-schemas.ts): types intersected, properties merged
//   (shared ones as allOf of both), required united, bounds tightened, enums intersected, nested
//   anyOf/oneOf distributed. Parts that conflict in ways that cannot be merged (two different patterns
//   or formats, unsatisfiable types, ...) throw UnsupportedSchemaError.
// - $ref: local JSON pointers (#/$defs/..., #/definitions/..., #, #/properties/...) become rules,
//   recursive ones recursive rules (also through `{allOf: [{$ref}]}` wrappers as pydantic writes them).
//   External documents, anchors (#name), $dynamicRef and $id inside the schema throw
//   UnsupportedSchemaError, as does a $ref cycle that writes nothing in between (left recursion).
// - Also rejected: the `false` schema (where a value must be written), not, if/then/else, contains,
//   dependentSchemas on required properties, patternProperties with no declared properties, minProperties
//   above 1 with free-form keys (repeated keys could collapse), and bounds no value satisfies.
// - multipleOf: 10^-k (0.01, 1, ...) limits fraction digits; any other step (5, 0.25, 2.5) is written with
//   exactly its fraction digits under a remainder automaton, within the bounds (grammar/multiple-of.ts);
//   steps over 250 times their smallest decimal unit, or with more than 6 fraction digits, are rejected.
//
// Strict (the caller's `strict: true`): a keyword the grammar cannot hold is refused. Without it, one is
// left to the model and not checked afterwards:
// - uniqueItems over items that are not a finite set of values (strings, objects, ...): a grammar cannot
//   keep them apart. Not strict, the model may repeat an item (as with llama.cpp's, Ollama's and vLLM's
//   grammars; Pydantic's and Zod's sets dedupe what they read); strict, the schema is a 400.
//
// UTF-8: llama.cpp's grammar engine reads each token's bytes leniently (it does not check every
// continuation byte, nor reject overlong forms or surrogates), so a model writing ill-formed bytes through
// byte-fallback tokens would get replacement characters the grammar never counted. The engine bans, before
// each sampling in a grammar phase, the tokens that would make the bytes so far ill-formed
// (utf8-guard.ts), so what the grammar counted is what the text holds.
//
// Validation (validateJsonAgainstSchema) reads schemas the same way: same normalization, formats as
// above, multipleOf exact on decimals (0.29 is a multiple of 0.01), own properties only (a property
// named "constructor" is not found on every object).
//
// checkSchemaSupported is jsonSchemaToGbnf for its error only: there is no cheaper check that agrees
// with the conversion on every schema.

import { UnsupportedSchemaError } from "./grammar/errors.js";
import { GbnfRules } from "./grammar/gbnf.js";
import { isPlainObject, normalizeSchema } from "./grammar/normalize-schema.js";
import { Primitives } from "./grammar/primitives.js";
import { SchemaConverter } from "./grammar/schema-converter.js";
import {
  SchemaChecker,
  compileSchema,
  isMissingRef,
  validateJsonAgainstSchema,
  type ValidationResult,
} from "./grammar/schema-validator.js";

export { UnsupportedSchemaError, validateJsonAgainstSchema, type ValidationResult };

/** The GBNF grammar (with a `root` rule) for compact JSON that satisfies `schema`. */
export function jsonSchemaToGbnf(schema: Record<string, unknown> | boolean, options: { strict?: boolean } = {}): string {
  if (schema === false) throw new UnsupportedSchemaError("the schema false (no value is valid)", "");
  if (!isPlainObject(schema) && schema !== true) throw new UnsupportedSchemaError("a schema must be an object or a boolean", "");
  // The schema must compile for validation. A $ref ajv cannot resolve is left to the conversion, which
  // says where it is (and throws for it, external or not).
  const validate = isPlainObject(schema) ? compileSchema(schema) : null;
  const invalid = () => new UnsupportedSchemaError(`invalid JSON schema (${(validate as Error).message})`, "");
  if (validate instanceof Error && !isMissingRef(validate)) throw invalid();
  const normalized = normalizeSchema(schema) as Record<string, unknown> | boolean;
  const checker = new SchemaChecker(normalized);
  try {
    const grammar = new SchemaConverter(normalized, checker, options.strict ?? false).convert();
    if (validate instanceof Error) throw invalid();
    return grammar;
  } finally {
    checker.dispose();
  }
}

const GRAMMAR_CACHE_LIMIT = 256;
const grammarCache = new Map<string, string | UnsupportedSchemaError>();

/**
 * jsonSchemaToGbnf, remembered by the schema's JSON (agents send the same tool schemas on every request):
 * the pipeline checks schemas before a request waits for the model, and the engine reuses the grammar.
 * A schema nested deeper than the converter's stack allows is unsupported, not a crash.
 */
export function cachedSchemaGrammar(schema: Record<string, unknown> | boolean, strict = false): string {
  let key: string;
  try {
    key = `${strict ? "strict" : "best"}:${JSON.stringify(schema)}`;
  } catch (err) {
    if (err instanceof RangeError) throw new UnsupportedSchemaError("the schema is nested too deeply", "");
    throw err;
  }
  let found = grammarCache.get(key);
  if (found === undefined) {
    try {
      found = jsonSchemaToGbnf(schema, { strict });
    } catch (err) {
      if (err instanceof UnsupportedSchemaError) found = err;
      else if (err instanceof RangeError) found = new UnsupportedSchemaError("the schema is nested too deeply", "");
      else throw err;
    }
    if (grammarCache.size >= GRAMMAR_CACHE_LIMIT) grammarCache.delete(grammarCache.keys().next().value!);
  } else grammarCache.delete(key);
  grammarCache.set(key, found);
  if (found instanceof UnsupportedSchemaError) throw found;
  return found;
}

/** Throws UnsupportedSchemaError when jsonSchemaToGbnf would. */
export function checkSchemaSupported(schema: Record<string, unknown> | boolean, strict = false): void {
  jsonSchemaToGbnf(schema, { strict });
}

/** The grammar for json_object mode: any JSON object (values any JSON), compact. */
export function jsonObjectGbnf(): string {
  const rules = new GbnfRules();
  const root = rules.reserve("root");
  rules.define(root, new Primitives(rules).get("object"));
  return rules.render();
}
