import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getLlama, LlamaGrammarEvaluationState } from "node-llama-cpp";
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import {
  UnsupportedSchemaError,
  checkSchemaSupported,
  jsonObjectGbnf,
  jsonSchemaToGbnf,
  validateJsonAgainstSchema,
} from "../../server/engine/json-schema-grammar.js";
import { writeTinyModel } from "../../resources/test-model/cli.js";
import { mulberry32 } from "../../resources/test-model/tiny-model.js";

type Schema = Record<string, unknown>;

// ----- a small GBNF interpreter: parses the grammars this module writes and samples from them -----

type GNode =
  | { t: "lit"; cps: number[] }
  | { t: "cls"; ranges: Array<[number, number]> }
  | { t: "ref"; name: string }
  | { t: "seq"; items: GNode[] }
  | { t: "alt"; options: GNode[] }
  | { t: "rep"; item: GNode; min: number; max: number | null };

function parseGbnf(text: string): Map<string, GNode> {
  const rules = new Map<string, GNode>();
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const m = /^([a-zA-Z0-9-]+) ::= (.*)$/.exec(line);
    if (!m) throw new Error(`bad rule line: ${line}`);
    const src = m[2]!;
    let i = 0;
    const skip = () => {
      while (src[i] === " ") i++;
    };
    const char = (): number => {
      if (src[i] !== "\\") {
        const cp = src.codePointAt(i)!;
        i += cp > 0xffff ? 2 : 1;
        return cp;
      }
      const e = src[i + 1]!;
      const hex = (n: number) => {
        const v = parseInt(src.slice(i + 2, i + 2 + n), 16);
        i += 2 + n;
        return v;
      };
      if (e === "x") return hex(2);
      if (e === "u") return hex(4);
      if (e === "U") return hex(8);
      i += 2;
      return ({ n: 10, t: 9, r: 13 } as Record<string, number>)[e] ?? e.charCodeAt(0);
    };
    const alternatives = (): GNode => {
      const options = [sequence()];
      while (src[i] === "|") {
        i++;
        options.push(sequence());
      }
      return options.length === 1 ? options[0]! : { t: "alt", options };
    };
    const sequence = (): GNode => {
      const items: GNode[] = [];
      for (;;) {
        skip();
        const c = src[i];
        if (c === undefined || c === "|" || c === ")") break;
        let item: GNode;
        if (c === '"') {
          i++;
          const cps: number[] = [];
          while (src[i] !== '"') cps.push(char());
          i++;
          item = { t: "lit", cps };
        } else if (c === "[") {
          i++;
          const ranges: Array<[number, number]> = [];
          while (src[i] !== "]") {
            const lo = char();
            if (src[i] === "-" && src[i + 1] !== "]") {
              i++;
              ranges.push([lo, char()]);
            } else ranges.push([lo, lo]);
          }
          i++;
          item = { t: "cls", ranges };
        } else if (c === "(") {
          i++;
          item = alternatives();
          skip();
          if (src[i] !== ")") throw new Error(`expected ) in ${line}`);
          i++;
        } else {
          const name = /^[a-zA-Z0-9-]+/.exec(src.slice(i));
          if (!name) throw new Error(`unexpected ${c} in ${line}`);
          i += name[0].length;
          item = { t: "ref", name: name[0] };
        }
        for (;;) {
          const q = src[i];
          if (q === "*") item = { t: "rep", item, min: 0, max: null };
          else if (q === "+") item = { t: "rep", item, min: 1, max: null };
          else if (q === "?") item = { t: "rep", item, min: 0, max: 1 };
          else if (q === "{") {
            const r = /^\{(\d+)(,(\d*))?\}/.exec(src.slice(i))!;
            const min = Number(r[1]);
            item = { t: "rep", item, min, max: r[2] === undefined ? min : r[3] === "" ? null : Number(r[3]) };
            i += r[0].length - 1;
          } else break;
          i++;
        }
        items.push(item);
      }
      return items.length === 1 ? items[0]! : { t: "seq", items };
    };
    rules.set(m[1]!, alternatives());
    if (i !== src.length) throw new Error(`trailing input in ${line}`);
  }
  return rules;
}

/** Random strings of the grammar's language; past a depth it takes the shortest way out. */
function sampler(grammar: string, seed: number): () => string {
  const rules = parseGbnf(grammar);
  const random = mulberry32(seed);
  // Cheapest expansion length per rule (fixpoint).
  const cost = new Map<string, number>();
  const nodeCost = (n: GNode): number => {
    switch (n.t) {
      case "lit":
        return n.cps.length;
      case "cls":
        return 1;
      case "ref":
        return cost.get(n.name) ?? Infinity;
      case "seq":
        return n.items.reduce((s, x) => s + nodeCost(x), 0);
      case "alt":
        return Math.min(...n.options.map(nodeCost));
      case "rep":
        return n.min === 0 ? 0 : n.min * nodeCost(n.item);
    }
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (const [name, node] of rules) {
      const c = nodeCost(node);
      if (c < (cost.get(name) ?? Infinity)) {
        cost.set(name, c);
        changed = true;
      }
    }
  }
  const interesting = [0x22, 0x5c, 0x2f, 0x20, 0x41, 0x7a, 0x30, 0xe9, 0x4e2d, 0x1f600, 0x7f, 0xa0];
  const pickChar = (ranges: Array<[number, number]>): number => {
    const inRanges = interesting.filter((cp) => ranges.some(([lo, hi]) => cp >= lo && cp <= hi));
    if (inRanges.length > 0 && random() < 0.3) return inRanges[Math.floor(random() * inRanges.length)]!;
    const [lo, hi] = ranges[Math.floor(random() * ranges.length)]!;
    const top = random() < 0.8 ? Math.min(hi, Math.max(lo, 0x7e)) : hi;
    return lo + Math.floor(random() * (top - lo + 1));
  };
  const gen = (n: GNode, depth: number, out: string[]): void => {
    const deep = depth > 12;
    switch (n.t) {
      case "lit":
        out.push(String.fromCodePoint(...n.cps));
        return;
      case "cls":
        out.push(String.fromCodePoint(pickChar(n.ranges)));
        return;
      case "ref":
        gen(rules.get(n.name)!, depth + 1, out);
        return;
      case "seq":
        for (const x of n.items) gen(x, depth, out);
        return;
      case "alt": {
        let options = n.options;
        if (deep) {
          const best = Math.min(...options.map(nodeCost));
          options = options.filter((o) => nodeCost(o) === best);
        }
        gen(options[Math.floor(random() * options.length)]!, depth + 1, out);
        return;
      }
      case "rep": {
        const spread = n.max === null ? 4 : n.max - n.min;
        const count = deep ? n.min : n.min + Math.floor(random() * (Math.min(spread, 6) + 1));
        for (let k = 0; k < count; k++) gen(n.item, depth + 1, out);
        return;
      }
    }
  };
  return () => {
    const out: string[] = [];
    gen(rules.get("root")!, 0, out);
    return out.join("");
  };
}

/** True when `text` is in the grammar's language (backtracking matcher, for small inputs). */
function matches(grammar: string, text: string): boolean {
  const rules = parseGbnf(grammar);
  const cps = Array.from(text).map((c) => c.codePointAt(0)!);
  // Returns every end position reachable from `pos`.
  const ends = (n: GNode, pos: number, depth: number): Set<number> => {
    if (depth > 200) return new Set();
    switch (n.t) {
      case "lit":
        return n.cps.every((c, k) => cps[pos + k] === c) ? new Set([pos + n.cps.length]) : new Set();
      case "cls": {
        const c = cps[pos];
        return c !== undefined && n.ranges.some(([lo, hi]) => c >= lo && c <= hi) ? new Set([pos + 1]) : new Set();
      }
      case "ref":
        return ends(rules.get(n.name)!, pos, depth + 1);
      case "seq": {
        let at = new Set([pos]);
        for (const x of n.items) {
          const next = new Set<number>();
          for (const p of at) for (const e of ends(x, p, depth + 1)) next.add(e);
          at = next;
        }
        return at;
      }
      case "alt": {
        const out = new Set<number>();
        for (const o of n.options) for (const e of ends(o, pos, depth + 1)) out.add(e);
        return out;
      }
      case "rep": {
        const out = new Set<number>();
        let at = new Set([pos]);
        for (let k = 0; k <= (n.max ?? cps.length - pos + 1); k++) {
          if (k >= n.min) for (const p of at) out.add(p);
          const next = new Set<number>();
          for (const p of at) for (const e of ends(n.item, p, depth + 1)) if (e > p) next.add(e);
          if (next.size === 0) break;
          at = next;
        }
        return out;
      }
    }
  };
  return ends(rules.get("root")!, 0, 0).has(cps.length);
}

function ruleNames(grammar: string): string[] {
  return grammar
    .trim()
    .split("\n")
    .map((line) => line.slice(0, line.indexOf(" ::= ")));
}

function rule(grammar: string, name: string): string {
  const line = grammar.split("\n").find((l) => l.startsWith(`${name} ::= `));
  if (!line) throw new Error(`no rule ${name} in\n${grammar}`);
  return line.slice(name.length + 5);
}

function expectUnsupported(schema: Schema, message: RegExp, path?: string) {
  let caught: unknown;
  try {
    jsonSchemaToGbnf(schema);
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(UnsupportedSchemaError);
  expect((caught as Error).message).toMatch(message);
  if (path !== undefined) expect((caught as UnsupportedSchemaError).path).toBe(path);
}

// ----- the schemas the grammar, sampling and generation tests share ----------------------------

const SCHEMAS: Record<string, Schema> = {
  "nested objects, required and optional": {
    type: "object",
    properties: {
      id: { type: "integer" },
      user: {
        type: "object",
        properties: { name: { type: "string", minLength: 1, maxLength: 12 }, email: { type: "string", format: "email" } },
        required: ["name"],
        additionalProperties: false,
      },
      note: { type: "string" },
      active: { type: "boolean" },
    },
    required: ["id", "user", "active"],
    additionalProperties: false,
  },
  "only optional properties": {
    type: "object",
    properties: { a: { type: "string" }, b: { type: "number" }, c: { type: "null" } },
  },
  "array with minItems and maxItems": {
    type: "array",
    items: { type: "integer", minimum: -5, maximum: 5 },
    minItems: 2,
    maxItems: 4,
  },
  "enum of mixed JSON values": { enum: ["red", 'say "hi"', "back\\slash", 1, 2.5, -0.125, true, null, { a: [1, "x"] }] },
  "anyOf objects and null": {
    anyOf: [
      { type: "object", properties: { kind: { const: "point" }, x: { type: "number" }, y: { type: "number" } }, required: ["kind", "x", "y"] },
      { type: "object", properties: { kind: { const: "label" }, text: { type: "string", maxLength: 8 } }, required: ["kind"] },
      { type: "null" },
    ],
  },
  "$defs recursion": {
    $defs: {
      node: {
        type: "object",
        properties: {
          value: { type: "integer", minimum: 0 },
          children: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 3 },
        },
        required: ["value", "children"],
      },
    },
    $ref: "#/$defs/node",
  },
  "string formats": {
    type: "object",
    properties: {
      day: { type: "string", format: "date" },
      at: { type: "string", format: "time" },
      stamp: { type: "string", format: "date-time" },
      id: { type: "string", format: "uuid" },
    },
    required: ["day", "at", "stamp", "id"],
  },
  "integer bounds": {
    type: "object",
    properties: {
      small: { type: "integer", minimum: 3, maximum: 7 },
      negative: { type: "integer", exclusiveMaximum: -10, minimum: -1234 },
      large: { type: "integer", minimum: 1000000 },
      odd: { type: "integer", exclusiveMinimum: 0.5, exclusiveMaximum: 120.5 },
    },
    required: ["small", "negative", "large", "odd"],
  },
  "number bounds and multipleOf": {
    type: "object",
    properties: {
      ratio: { type: "number", minimum: -1.5, maximum: 2.25 },
      open: { type: "number", exclusiveMinimum: 0, exclusiveMaximum: 1 },
      price: { type: "number", minimum: 0, multipleOf: 0.01 },
      tiny: { type: "number", minimum: 0.1, maximum: 0.2 },
    },
    required: ["ratio", "open", "price", "tiny"],
  },
  "type array with null and nullable": {
    type: "object",
    properties: {
      maybe: { type: ["string", "null"], maxLength: 4 },
      level: { type: "integer", nullable: true, enum: [1, 2, 3] },
      ref: { $ref: "#/definitions/color", nullable: true },
    },
    required: ["maybe", "level", "ref"],
    definitions: { color: { type: "string", enum: ["red", "green"] } },
  },
  "oneOf discriminated union": {
    oneOf: [
      { type: "object", properties: { pet: { const: "cat" }, lives: { type: "integer", minimum: 1, maximum: 9 } }, required: ["pet", "lives"] },
      { type: "object", properties: { pet: { const: "dog" }, good: { type: "boolean" } }, required: ["pet"] },
      { type: "string", enum: ["none"] },
    ],
  },
  "allOf of objects": {
    allOf: [
      { type: "object", properties: { a: { type: "string" }, shared: { type: "integer", minimum: 0 } }, required: ["a"] },
      { properties: { b: { type: "boolean" }, shared: { maximum: 9 } }, required: ["b", "shared"] },
    ],
  },
  "prefixItems tuple": { type: "array", prefixItems: [{ type: "string", maxLength: 3 }, { type: "integer" }, { enum: ["x", "y"] }], items: false },
  "draft-07 tuple and definitions": {
    $schema: "http://json-schema.org/draft-07/schema#",
    type: "array",
    items: [{ $ref: "#/definitions/pair" }, { type: "number", minimum: 1, exclusiveMinimum: true }],
    additionalItems: { type: "boolean" },
    maxItems: 4,
    definitions: { pair: { type: "array", items: { type: "integer" }, minItems: 2, maxItems: 2 } },
  },
  "pattern subset": {
    type: "object",
    properties: {
      code: { type: "string", pattern: "^[A-Z]{2}-\\d{3,4}$" },
      slug: { type: "string", pattern: "^[a-z0-9]+$", maxLength: 6 },
      quoted: { type: "string", pattern: '^"[^"\\\\]{0,8}"$' },
      choice: { type: "string", pattern: "^(?:yes|no|maybe)\\.?$" },
    },
    required: ["code", "slug", "quoted", "choice"],
  },
  "string lengths": { type: "string", minLength: 5, maxLength: 7 },
  "free-form object": { type: "object", additionalProperties: { type: "integer", minimum: 0, maximum: 9 }, maxProperties: 3 },
  "uniqueItems over an enum": { type: "array", items: { enum: ["a", "b", "c", "d"] }, uniqueItems: true, minItems: 2, maxItems: 3 },
  "escaped property names": {
    type: "object",
    properties: {
      'quo"te': { type: "integer" },
      "back\\slash": { type: "boolean" },
      "café ☕": { type: "null" },
      "new\nline\u0001": { const: "tab\there" },
      "emoji 😀": { type: "string", maxLength: 2 },
      constructor: { type: "string", maxLength: 1 },
      __proto__x: { type: "integer" },
    },
    required: ['quo"te', "back\\slash", "café ☕", "new\nline\u0001", "emoji 😀", "constructor"],
  },
  "no type and true schemas": {
    type: "object",
    properties: { anything: {}, alsoAnything: true, inferred: { properties: { x: { type: "integer" } }, required: ["x"] } },
    required: ["anything", "alsoAnything", "inferred"],
  },
  "pydantic v1 style recursive allOf wrappers": {
    title: "Tree",
    $ref: "#/definitions/Node",
    definitions: {
      Node: {
        title: "Node",
        type: "object",
        properties: {
          label: { title: "Label", type: "string", maxLength: 4 },
          left: { title: "Left", description: "left child", allOf: [{ $ref: "#/definitions/Node" }] },
          right: { title: "Right", $ref: "#/definitions/Node", description: "right child" },
        },
        required: ["label"],
      },
    },
  },
  "keywords next to anyOf": {
    type: "object",
    properties: { a: { type: "string", maxLength: 3 }, b: { type: "integer" } },
    anyOf: [{ required: ["a"] }, { required: ["b"] }],
  },
  "allOf with $ref, unevaluatedProperties": {
    $defs: { base: { type: "object", properties: { id: { type: "integer", minimum: 1 } }, required: ["id"] } },
    allOf: [{ $ref: "#/$defs/base" }, { properties: { name: { type: "string", minLength: 2 } }, required: ["name"] }],
    unevaluatedProperties: false,
  },
  "allOf of anyOfs": { allOf: [{ anyOf: [{ type: "string" }, { type: "integer" }] }, { anyOf: [{ minLength: 3 }, { minimum: 10 }] }] },
  "oneOf of $refs with an enum discriminator": {
    $defs: {
      A: { type: "object", properties: { k: { enum: ["a1", "a2"] }, v: { type: "string" } }, required: ["k"] },
      B: { type: "object", properties: { k: { const: "b" }, w: { type: "number" } }, required: ["k", "w"] },
    },
    oneOf: [{ $ref: "#/$defs/A" }, { $ref: "#/$defs/B" }],
  },
  "recursion through # and mutual $defs": {
    type: "object",
    properties: { next: { $ref: "#" }, v: { type: "integer", maximum: 3 }, tree: { $ref: "#/$defs/A" } },
    required: ["v"],
    $defs: { A: { type: "array", items: { $ref: "#/$defs/B" }, maxItems: 2 }, B: { anyOf: [{ type: "integer" }, { $ref: "#/$defs/A" }] } },
  },
  "patternProperties and propertyNames": {
    type: "object",
    properties: {
      fixed: {
        type: "object",
        properties: { x1: { type: "integer" }, y: { type: "string" } },
        patternProperties: { "^x": { minimum: 5 } },
        required: ["x1"],
      },
      named: { type: "object", propertyNames: { enum: ["k1", "k2"] }, additionalProperties: { type: "boolean" } },
      short: { type: "object", propertyNames: { maxLength: 2 }, additionalProperties: { type: "null" }, maxProperties: 2 },
    },
    required: ["fixed", "named", "short"],
  },
  "nested nullable and unique values": {
    type: "object",
    properties: {
      a: {
        type: "object",
        nullable: true,
        properties: { b: { type: "array", nullable: true, items: { type: "integer", nullable: true } } },
        required: ["b"],
      },
      flags: { type: "array", items: { type: "boolean" }, uniqueItems: true },
      picks: { type: "array", items: { enum: [1, "1", null, { a: 1 }] }, uniqueItems: true, maxItems: 2 },
    },
    required: ["a", "flags", "picks"],
  },
  "more number edges": {
    type: "object",
    properties: {
      a: { type: "number", exclusiveMinimum: -1, exclusiveMaximum: 0 },
      b: { type: "number", minimum: 1e-6, maximum: 1e-5 },
      c: { type: "number", maximum: -1000.001 },
      d: { type: "integer", minimum: -1, maximum: 0 },
      e: { type: "number", minimum: 0.30000000000000004, maximum: 0.30001 },
      f: { type: "number", multipleOf: 1 },
      g: { type: "number", minimum: 1e14 },
      h: { type: "number", minimum: 5, exclusiveMinimum: true, maximum: 6, exclusiveMaximum: true },
    },
    required: ["a", "b", "c", "d", "e", "f", "g", "h"],
  },
  "multipleOf that is not a power of ten": {
    type: "object",
    properties: {
      five: { type: "integer", multipleOf: 5 },
      quarter: { type: "number", multipleOf: 0.25, exclusiveMinimum: 0 },
      seven: { type: "integer", multipleOf: 7, minimum: 10 },
      step: { type: "number", multipleOf: 2.5, minimum: -10, maximum: 12 },
      half: { type: "integer", multipleOf: 1.5 },
    },
    required: ["five", "quarter", "seven", "step", "half"],
  },
  "more patterns": {
    type: "object",
    properties: {
      a: { type: "string", pattern: "^[^a-z]{1,3}$" },
      b: { type: "string", pattern: "^\\s\\S\\w\\W\\d\\D.$" },
      c: { type: "string", pattern: "^(?<year>\\d{4})-(0[1-9]|1[0-2])$" },
      d: { type: "string", pattern: "^\\u00e9\\x41\\u{1F600}[\\-\\]\\\\]+$" },
      e: { type: "string", pattern: "ab?c*" },
      f: { type: "string", pattern: "^(a|b|)c$" },
      g: { type: "string", pattern: '^[\\t\\n]\\\\"$' },
      h: { type: "string", pattern: "^.+$", minLength: 3, maxLength: 5 },
      i: { type: "string", pattern: "^x*y{2,}$", maxLength: 6 },
    },
    required: ["a", "b", "c", "d", "e", "f", "g", "h", "i"],
  },
  "tuples with rest items": {
    type: "object",
    properties: {
      rest: { type: "array", prefixItems: [{ const: 1 }, { type: "string" }], items: { type: "null" }, minItems: 4, maxItems: 5 },
      cut: { type: "array", prefixItems: [{ type: "integer" }, { type: "integer" }, { type: "integer" }], maxItems: 2 },
      strings: { type: "array", items: { type: "string", minLength: 1, maxLength: 3 }, minItems: 3 },
    },
    required: ["rest", "cut", "strings"],
  },
  "required but undeclared, inferred types, dependencies": {
    type: "object",
    properties: {
      extra: { type: "object", required: ["x", "y"], additionalProperties: { type: "integer" } },
      inferred: { properties: { a: { minLength: 2 }, b: { minimum: 3 }, c: { items: { type: "null" } } }, required: ["a", "b", "c"] },
      deps: {
        type: "object",
        properties: { a: { type: "integer" }, b: { type: "integer" }, c: { type: "integer" } },
        dependencies: { a: ["b"] },
        required: ["a"],
      },
      free: {
        type: "object",
        additionalProperties: { type: "object", additionalProperties: { type: "array", items: { type: "integer", maximum: -5 } } },
      },
    },
    required: ["extra", "inferred", "deps", "free"],
  },
  "dependentRequired and property counts": {
    type: "object",
    properties: { a: { type: "string" }, b: { type: "string" }, c: { type: "integer" }, d: { type: "integer" } },
    dependentRequired: { c: ["d"] },
    minProperties: 2,
    maxProperties: 3,
  },
};

// ----- tests -----------------------------------------------------------------------------------

let llama: Llama;

beforeAll(async () => {
  llama = await getLlama({ gpu: false, build: "never" });
});

describe("jsonSchemaToGbnf: grammar text", () => {
  it("writes required properties compactly, in order", () => {
    const g = jsonSchemaToGbnf({
      type: "object",
      properties: { a: { type: "string" }, b: { type: "integer" } },
      required: ["a", "b"],
    });
    expect(rule(g, "root")).toBe('"{\\"a\\":" string ",\\"b\\":" integer "}"');
    expect(rule(g, "string")).toBe('"\\"" char* "\\""');
    expect(rule(g, "integer")).toBe('"-"? ( "0" | [1-9] [0-9]{0,14} )');
    expect(g).not.toMatch(/ws|space/);
  });

  it("chains optional properties so commas are right with or without required ones", () => {
    const none = jsonSchemaToGbnf({ type: "object", properties: { a: { type: "string" }, b: { type: "boolean" } } });
    expect(rule(none, "root")).toBe('"{" root-a-first "}"');
    expect(rule(none, "root-a-first")).toBe('( "\\"a\\":" string root-b-rest | root-b-first )');
    expect(rule(none, "root-b-rest")).toBe('( ",\\"b\\":" boolean )?');
    expect(rule(none, "root-b-first")).toBe('( "\\"b\\":" boolean )?');
    for (const text of ["{}", '{"a":""}', '{"b":true}', '{"a":"x","b":false}']) expect(matches(none, text)).toBe(true);
    for (const text of ['{,"b":true}', '{"a":"x",}', '{"b":true,"a":"x"}']) expect(matches(none, text)).toBe(false);

    const mixed = jsonSchemaToGbnf({
      type: "object",
      properties: { a: { type: "string" }, b: { type: "boolean" }, c: { type: "null" } },
      required: ["b"],
    });
    for (const text of ['{"b":true}', '{"a":"","b":true}', '{"b":true,"c":null}', '{"a":"","b":false,"c":null}'])
      expect(matches(mixed, text)).toBe(true);
    for (const text of ["{}", '{"a":""}', '{"c":null,"b":true}']) expect(matches(mixed, text)).toBe(false);
  });

  it("uses repetition for minItems/maxItems and minLength/maxLength", () => {
    const arr = jsonSchemaToGbnf({ type: "array", items: { type: "boolean" }, minItems: 1, maxItems: 3 });
    expect(rule(arr, "root")).toBe('"[" boolean root-next{0,2} "]"');
    expect(rule(arr, "root-next")).toBe('"," boolean');
    const str = jsonSchemaToGbnf({ type: "string", minLength: 2, maxLength: 5 });
    expect(rule(str, "root")).toBe('"\\"" char{2} char{0,3} "\\""');
    const open = jsonSchemaToGbnf({ type: "array", minItems: 2 });
    expect(rule(open, "root")).toBe('"[" value root-next root-next* "]"');
  });

  it("splits repetition counts above llama.cpp's limit of 2000", async () => {
    const g = jsonSchemaToGbnf({ type: "string", minLength: 2500, maxLength: 4321 });
    const counts = [...g.matchAll(/\{(\d+)(?:,(\d*))?\}/g)].flatMap((m) => [Number(m[1]), Number(m[2] ?? 0)]);
    expect(Math.max(...counts)).toBeLessThanOrEqual(2000);
    expect(g).toMatch(/char-x1000 ::= char\{1000\}/);
    await llama.createGrammar({ grammar: g });
    for (const len of [2500, 3000, 3999, 4000, 4321])
      expect(matches(g, `"${"a".repeat(len)}"`), `length ${len}`).toBe(true);
    for (const len of [2499, 4322]) expect(matches(g, `"${"a".repeat(len)}"`), `length ${len}`).toBe(false);
  });

  it("splits large maximum counts without gaps", async () => {
    const g = jsonSchemaToGbnf({ type: "string", maxLength: 5000 });
    await llama.createGrammar({ grammar: g });
    for (const len of [0, 1, 999, 1000, 1001, 1999, 2500, 3456, 4999, 5000])
      expect(matches(g, `"${"a".repeat(len)}"`), `length ${len}`).toBe(true);
    expect(matches(g, `"${"a".repeat(5001)}"`)).toBe(false);
    const arr = jsonSchemaToGbnf({ type: "array", items: { const: 0 }, minItems: 2001, maxItems: 4100 });
    await llama.createGrammar({ grammar: arr });
    for (const len of [2000, 2001, 3000, 3101, 4100, 4101])
      expect(matches(arr, JSON.stringify(new Array(len).fill(0))), `items ${len}`).toBe(len >= 2001 && len <= 4100);
  });

  it("drops anyOf branches that nothing satisfies once sibling keywords are merged in", () => {
    const g = jsonSchemaToGbnf({ type: "string", anyOf: [{ const: "a" }, { const: 1 }, { enum: ["b", 2] }] });
    expect(rule(g, "root")).toBe('( "\\"a\\"" | "\\"b\\"" )');
    expectUnsupported({ type: "string", anyOf: [{ const: 1 }, { enum: [2] }] }, /anyOf with no satisfiable branch/);
  });

  it("keeps only the enum values that satisfy their sibling keywords", () => {
    const g = jsonSchemaToGbnf({ type: "integer", enum: [1, 2.5, "x", 7, 12, null], maximum: 10 });
    expect(rule(g, "root")).toBe('( "1" | "7" )');
    const s = jsonSchemaToGbnf({ type: "string", enum: ["a", "bb", "ccc", 3], minLength: 2, pattern: "^[a-b]+$" });
    expect(rule(s, "root")).toBe('"\\"bb\\""');
  });

  it("escapes string literals and property names for GBNF", () => {
    const g = jsonSchemaToGbnf({ enum: ['say "hi"', "back\\slash", "é\n", "😀", { k: null }] });
    expect(rule(g, "root")).toBe(
      '( "\\"say \\\\\\"hi\\\\\\"\\"" | "\\"back\\\\\\\\slash\\"" | "\\"\\xE9\\\\n\\"" | "\\"\\U0001F600\\"" | "{\\"k\\":null}" )',
    );
    for (const v of ['say "hi"', "back\\slash", "é\n", "😀", { k: null }]) expect(matches(g, JSON.stringify(v))).toBe(true);
  });

  it("writes a type list as alternatives, and nullable as one more", () => {
    const g = jsonSchemaToGbnf({ type: ["string", "null"], maxLength: 2 });
    expect(rule(g, "root")).toBe("( root-string | null )");
    expect(rule(g, "root-string")).toBe('"\\"" char{0,2} "\\""');
    const n = jsonSchemaToGbnf({ type: "integer", nullable: true });
    expect(rule(n, "root")).toBe("( integer | null )");
  });

  it("writes exact integer ranges", () => {
    const g = jsonSchemaToGbnf({ type: "integer", minimum: -12, maximum: 345 });
    for (let v = -20; v <= 360; v++) expect(matches(g, String(v)), String(v)).toBe(v >= -12 && v <= 345);
    expect(matches(g, "-0")).toBe(false);
    expect(matches(g, "007")).toBe(false);
  });

  it("writes exactly the multiples of a multipleOf that is not a power of ten, within the bounds", () => {
    // Every number from -20 to 20 in steps of 0.05, written with 0 to 3 fraction digits: the grammar takes
    // exactly the multiples within the bounds, written with as many fraction digits as the step has.
    const cases: Array<{ schema: Schema; step: number; digits: number; min: number; max: number; minEx?: boolean; maxEx?: boolean }> = [
      { schema: { type: "integer", multipleOf: 5 }, step: 5, digits: 0, min: -Infinity, max: Infinity },
      { schema: { type: "integer", multipleOf: 7, minimum: 10, maximum: 200 }, step: 7, digits: 0, min: 10, max: 200 },
      { schema: { type: "integer", multipleOf: 7, exclusiveMinimum: 7 }, step: 7, digits: 0, min: 7, max: Infinity, minEx: true },
      { schema: { type: "number", multipleOf: 0.25, exclusiveMinimum: -1, maximum: 3 }, step: 0.25, digits: 2, min: -1, max: 3, minEx: true },
      { schema: { type: "number", multipleOf: 2.5, minimum: -10, exclusiveMaximum: 12.5 }, step: 2.5, digits: 1, min: -10, max: 12.5, maxEx: true },
      { schema: { type: "number", multipleOf: 0.15 }, step: 0.15, digits: 2, min: -Infinity, max: Infinity },
      { schema: { type: "integer", multipleOf: 2.5 }, step: 5, digits: 0, min: -Infinity, max: Infinity },
    ];
    for (const { schema, step, digits, min, max, minEx, maxEx } of cases) {
      const g = jsonSchemaToGbnf(schema);
      for (let hundredths = -2000; hundredths <= 2000; hundredths += 5) {
        const value = hundredths / 100;
        const multiple = Math.abs(Math.round(value / step) * step - value) < 1e-9;
        const inside = (minEx ? value > min : value >= min) && (maxEx ? value < max : value <= max);
        for (let d = 0; d <= 3; d++) {
          const text = value.toFixed(d);
          if (Number(text) !== value) continue;
          const expected = multiple && inside && d === digits && text !== "-0" && !/^-0\.0*$/.test(text);
          expect(matches(g, text), `${JSON.stringify(schema)}: ${text}`).toBe(expected);
        }
      }
      expect(matches(g, "1e1")).toBe(false);
    }
  });

  it("refuses uniqueItems over strings under strict, and leaves it to the model (unchecked) without", () => {
    const set = { type: "array", items: { type: "string" }, uniqueItems: true };
    let caught: unknown;
    try {
      jsonSchemaToGbnf({ type: "object", properties: { tags: set }, required: ["tags"] }, { strict: true });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(UnsupportedSchemaError);
    expect((caught as UnsupportedSchemaError).message).toMatch(/uniqueItems over items that are not a finite set/);
    expect((caught as UnsupportedSchemaError).path).toBe("/properties/tags");
    // Enforced exactly where the items are a finite set, strict or not.
    expect(() => jsonSchemaToGbnf({ type: "array", items: { enum: ["a", "b"] }, uniqueItems: true }, { strict: true })).not.toThrow();
    const g = jsonSchemaToGbnf(set);
    expect(matches(g, '["a","a"]')).toBe(true);
    expect(validateJsonAgainstSchema(set, ["a", "a"]).valid).toBe(false);
    expect(validateJsonAgainstSchema(set, ["a", "a"], { strict: true }).valid).toBe(false);
    expect(validateJsonAgainstSchema(set, ["a", "a"], { strict: false })).toEqual({ valid: true });
    // Only uniqueItems is relaxed: the rest of the schema still holds.
    expect(validateJsonAgainstSchema({ anyOf: [set, { type: "null" }] }, ["a", "a"], { strict: false })).toEqual({ valid: true });
    expect(validateJsonAgainstSchema(set, ["a", 1], { strict: false }).valid).toBe(false);
  });

  it("refuses a multipleOf the grammar cannot hold within 15 digits", () => {
    expectUnsupported({ type: "integer", multipleOf: 997 }, /multipleOf 997/);
    expectUnsupported({ type: "number", multipleOf: 0.0000003 }, /fraction digits/);
    expectUnsupported({ type: "integer", multipleOf: 7, minimum: 1, maximum: 6 }, /no multiple of 7/);
  });

  it("writes exact number ranges in plain decimal notation", () => {
    const g = jsonSchemaToGbnf({ type: "number", exclusiveMinimum: -0.5, maximum: 2.25 });
    const cases: Array<[string, boolean]> = [
      ["-0.5", false], ["-0.4999", true], ["0", true], ["2.25", true], ["2.250001", false], ["2.2", true],
      ["-1", false], ["1.5", true], ["2.26", false], ["1e0", false], ["2.1234567", false],
    ];
    for (const [text, ok] of cases) expect(matches(g, text), text).toBe(ok);
  });

  it("deduplicates identical rules and keeps rule names valid", () => {
    const g = jsonSchemaToGbnf({
      type: "object",
      properties: {
        "first name": { type: "string", maxLength: 5 },
        "last-name!": { type: "string", maxLength: 5 },
        "名前": { type: "array", items: { type: "string", maxLength: 5 } },
      },
      required: ["first name", "last-name!", "名前"],
    });
    const names = ruleNames(g);
    for (const name of names) expect(name).toMatch(/^[a-zA-Z0-9-]+$/);
    expect(new Set(names).size).toBe(names.length);
    const bodies = g.trim().split("\n").map((l) => l.slice(l.indexOf(" ::= ") + 5));
    expect(bodies.filter((b) => b === '"\\"" char{0,5} "\\""')).toHaveLength(1);
    expect(rule(g, "root")).toContain("root-first-name");
  });

  it("turns recursion through allOf-wrapped $refs into recursive rules", () => {
    const g = jsonSchemaToGbnf(SCHEMAS["pydantic v1 style recursive allOf wrappers"]!);
    // The allOf-wrapped `left` becomes a rule of its own (same body as Node) that the rules refer back to.
    expect(rule(g, "root")).toBe("Node");
    expect(rule(g, "Node-left")).toBe(rule(g, "Node"));
    expect(g).toMatch(/",\\"left\\":" Node-left /);
    expect(g).toMatch(/",\\"right\\":" Node \)\?/);
    expect(ruleNames(g).length).toBeLessThan(10);
  });

  it("turns recursive $refs into recursive rules", () => {
    const g = jsonSchemaToGbnf(SCHEMAS["$defs recursion"]!);
    expect(rule(g, "root")).toBe("node");
    expect(rule(g, "node")).toContain("node-children");
    expect(rule(g, "node-children-next")).toBe('"," node');
  });

  it("writes precise formats", () => {
    const g = jsonSchemaToGbnf({ type: "string", format: "date" });
    for (const [d, ok] of [
      ["2024-02-29", true], ["2023-02-29", false], ["2000-02-29", true], ["1900-02-29", false], ["2023-04-31", false],
      ["2023-12-31", true], ["2023-13-01", false], ["2023-00-10", false], ["2023-01-00", false],
    ] as const)
      expect(matches(g, `"${d}"`), d).toBe(ok);
    const t = jsonSchemaToGbnf({ type: "string", format: "date-time" });
    expect(matches(t, '"2024-05-06T23:59:59.123+05:30"')).toBe(true);
    expect(matches(t, '"2024-05-06T24:00:00Z"')).toBe(false);
    expect(matches(t, '"2024-05-06T12:00:00"')).toBe(false);
  });

  it("jsonObjectGbnf allows any object and nothing else at the root", () => {
    const g = jsonObjectGbnf();
    expect(rule(g, "root")).toBe("object");
    expect(matches(g, '{"a":[1,{"b":null}],"c":"d"}')).toBe(true);
    expect(matches(g, "[1]")).toBe(false);
    expect(matches(g, '{ "a": 1 }')).toBe(false);
  });
});

describe("jsonSchemaToGbnf: unsupported schemas", () => {
  it("rejects $ref to an external document, with its path", () => {
    expectUnsupported(
      { type: "object", properties: { a: { $ref: "https://example.com/s.json#/x" } } },
      /^\$ref to an external document \(https:\/\/example.com\/s.json#\/x\) is not supported at \/properties\/a$/,
      "/properties/a",
    );
    expectUnsupported({ $ref: "#anchor" }, /anchor/);
    expectUnsupported({ $ref: "#/$defs/missing" }, /points to nothing/);
  });

  it("rejects the false schema wherever a value must be written", () => {
    expectUnsupported(false as unknown as Schema, /false/);
    expectUnsupported({ type: "object", properties: { a: false }, required: ["a"] }, /required property "a" is not allowed/);
    expectUnsupported({ type: "array", items: false, minItems: 1 }, /no array/);
    // An optional property that allows nothing is simply never written.
    expect(() => jsonSchemaToGbnf({ type: "object", properties: { a: false, b: { type: "string" } } })).not.toThrow();
  });

  it("rejects allOf of parts that cannot be merged", () => {
    expectUnsupported({ allOf: [{ type: "string" }, { type: "number" }] }, /allows no type/);
    expectUnsupported({ allOf: [{ type: "string", pattern: "^a" }, { type: "string", pattern: "b$" }] }, /different pattern/);
    expectUnsupported({ allOf: [{ enum: [1, 2] }, { enum: [3] }] }, /no enum\/const value/);
  });

  it("rejects patterns outside the supported subset", () => {
    expectUnsupported({ type: "string", pattern: "^(?=a)b$" }, /lookaround/, "");
    expectUnsupported({ type: "string", pattern: "^(a)\\1$" }, /backreference/);
    expectUnsupported({ type: "string", pattern: "\\bword\\b" }, /word boundary/);
    expectUnsupported({ type: "string", pattern: "^\\p{L}+$" }, /Unicode property/);
    expectUnsupported({ type: "string", pattern: "a^b" }, /anchor/);
    expectUnsupported({ type: "string", pattern: "^(ab|c)+$", maxLength: 4 }, /groups or alternatives/);
  });

  it("rejects other keywords it cannot honour", () => {
    expectUnsupported({ not: { type: "string" } }, /not is not supported/);
    expectUnsupported({ if: { type: "string" }, then: { minLength: 1 } }, /if\/then\/else/);
    expectUnsupported({ type: "array", contains: { type: "string" } }, /contains/);
    expectUnsupported({ type: "object", properties: { a: { $id: "x", type: "string" } } }, /\$id/, "/properties/a");
    expectUnsupported({ oneOf: [{ type: "object", properties: { a: {} } }, { type: "object", properties: { b: {} } }] }, /oneOf branches 0 and 1/);
    expectUnsupported({ oneOf: [{ type: "number" }, { type: "integer" }] }, /oneOf/);
    expectUnsupported({ $defs: { a: { anyOf: [{ $ref: "#/$defs/a" }, { type: "string" }] } }, $ref: "#/$defs/a" }, /refers back to itself/);
    expectUnsupported({ type: "integer", minimum: 5, maximum: 4 }, /no number/);
    expectUnsupported({ type: "number", minimum: 0.0000001, maximum: 0.0000002 }, /no number with at most 6 fraction digits/);
    expectUnsupported({ type: "string", format: "date", maxLength: 5 }, /format date together with minLength\/maxLength/);
    expectUnsupported({ type: "object", additionalProperties: { type: "string" }, minProperties: 2 }, /minProperties/);
    expectUnsupported({ type: "strin" }, /invalid JSON schema/);
  });

  it("checkSchemaSupported throws exactly when jsonSchemaToGbnf does", () => {
    expect(() => checkSchemaSupported({ type: "string", pattern: "(?<=a)b" })).toThrow(UnsupportedSchemaError);
    expect(() => checkSchemaSupported(SCHEMAS["oneOf discriminated union"]!)).not.toThrow();
  });
});

describe("validateJsonAgainstSchema", () => {
  it("validates with the same reading of the schema as the grammar", () => {
    expect(validateJsonAgainstSchema({ type: "string", nullable: true }, null)).toEqual({ valid: true });
    expect(validateJsonAgainstSchema({ type: "string", nullable: true, enum: ["a"] }, null)).toEqual({ valid: true });
    expect(validateJsonAgainstSchema({ nullable: true, $ref: "#/$defs/a", $defs: { a: { type: "integer" } } }, null)).toEqual({ valid: true });
    const draft7 = SCHEMAS["draft-07 tuple and definitions"]!;
    expect(validateJsonAgainstSchema(draft7, [[1, 2], 1.5, true]).valid).toBe(true);
    expect(validateJsonAgainstSchema(draft7, [[1, 2], 1]).valid).toBe(false);
    expect(validateJsonAgainstSchema(draft7, [[1, 2], 2, "x"]).valid).toBe(false);
  });

  it("checks the formats the grammar writes and ignores the others", () => {
    expect(validateJsonAgainstSchema({ type: "string", format: "date" }, "2023-02-29").valid).toBe(false);
    expect(validateJsonAgainstSchema({ type: "string", format: "date" }, "2024-02-29").valid).toBe(true);
    expect(validateJsonAgainstSchema({ type: "string", format: "time" }, "12:00:00").valid).toBe(false);
    expect(validateJsonAgainstSchema({ type: "string", format: "uuid" }, "123e4567-e89b-12d3-a456-426614174000").valid).toBe(true);
    expect(validateJsonAgainstSchema({ type: "string", format: "email" }, "not an email").valid).toBe(true);
  });

  it("reports errors with their location", () => {
    const result = validateJsonAgainstSchema({ type: "object", properties: { a: { type: "integer" } }, required: ["b"] }, { a: "x" });
    expect(result.valid).toBe(false);
    if (!result.valid) {
      expect(result.errors).toContain("/a must be integer");
      expect(result.errors.some((e) => e.includes("'b'"))).toBe(true);
    }
  });
});

describe("every string a grammar allows satisfies its schema (random walks over the grammar)", () => {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    it(name, () => {
      const grammar = jsonSchemaToGbnf(schema);
      const sample = sampler(grammar, 1234);
      for (let k = 0; k < 300; k++) {
        const text = sample();
        let value: unknown;
        expect(() => (value = JSON.parse(text)), text).not.toThrow();
        const result = validateJsonAgainstSchema(schema, value);
        expect(result, text).toEqual({ valid: true });
      }
    });
  }

  it("json_object mode", () => {
    const sample = sampler(jsonObjectGbnf(), 99);
    for (let k = 0; k < 200; k++) {
      const value: unknown = JSON.parse(sample());
      expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
    }
  });
});

describe("with llama.cpp and the tiny model", () => {
  let model: LlamaModel;
  let context: LlamaContext;
  let sequence: LlamaContextSequence;
  const modelPath = join(tmpdir(), `svc-json-schema-grammar-${process.pid}.gguf`);

  beforeAll(async () => {
    model = await llama.loadModel({ modelPath: writeTinyModel(modelPath) });
    context = await model.createContext({ contextSize: 1024, threads: 1 });
    sequence = context.getSequence();
  });

  afterAll(async () => {
    await context?.dispose();
    await model?.dispose();
    rmSync(modelPath, { force: true });
  });

  async function generate(gbnf: string, seed: number): Promise<{ text: string; tokens: number; ended: boolean }> {
    const grammar = await llama.createGrammar({ grammar: gbnf });
    const state = new LlamaGrammarEvaluationState({ model, grammar });
    await sequence.clearHistory();
    const prompt = model.tokenize("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", true);
    const out: Token[] = [];
    let ended = false;
    for await (const token of sequence.evaluate(prompt, { temperature: 1, seed, grammarEvaluationState: state, yieldEogToken: true })) {
      if (model.isEogToken(token)) {
        ended = true;
        break;
      }
      if (out.length >= 400) break;
      out.push(token);
    }
    return { text: model.detokenize(out), tokens: out.length, ended };
  }

  it("parses the grammar of every test schema", async () => {
    for (const schema of Object.values(SCHEMAS)) await llama.createGrammar({ grammar: jsonSchemaToGbnf(schema) });
    await llama.createGrammar({ grammar: jsonObjectGbnf() });
  });

  it("rejects a broken grammar (the parse check can fail)", async () => {
    await expect(llama.createGrammar({ grammar: 'root ::= "a" missing' })).rejects.toThrow();
  });

  const SEEDS = [1, 2, 3, 4, 5, 6];
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    it(`generates valid JSON that ends in time: ${name}`, async () => {
      const gbnf = jsonSchemaToGbnf(schema);
      for (const seed of SEEDS) {
        const { text, tokens, ended } = await generate(gbnf, seed);
        expect(ended, `seed ${seed}: ${text}`).toBe(true);
        expect(tokens, text).toBeLessThan(400);
        let value: unknown;
        expect(() => (value = JSON.parse(text)), `seed ${seed}: ${text}`).not.toThrow();
        expect(validateJsonAgainstSchema(schema, value), `seed ${seed}: ${text}`).toEqual({ valid: true });
      }
    });
  }

  it("generates objects in json_object mode", async () => {
    for (const seed of SEEDS) {
      const { text, ended } = await generate(jsonObjectGbnf(), seed);
      expect(ended).toBe(true);
      const value: unknown = JSON.parse(text);
      expect(typeof value === "object" && value !== null && !Array.isArray(value), text).toBe(true);
    }
  });
});
