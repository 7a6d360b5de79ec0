// The fixed rules: JSON values, strings, numbers, and the string formats written precisely.
// Everything is compact (no whitespace between tokens) and bounded where a number would otherwise grow
// without end: integers have at most 15 digits, fractions at most 16, exponents at most 2 digits (so a
// number never overflows a double).

import { gbnfClass, gbnfLiteral, type GbnfRules } from "./gbnf.js";
import { JSON_RAW } from "./regex-to-gbnf.js";

export type PrimitiveName =
  | "value"
  | "object"
  | "array"
  | "string"
  | "char"
  | "number"
  | "integer"
  | "boolean"
  | "null"
  | "date"
  | "time"
  | "date-time"
  | "uuid";

const DEPENDENCIES: Record<PrimitiveName, PrimitiveName[]> = {
  value: ["object", "array", "string", "number", "boolean", "null"],
  object: ["string", "value"],
  array: ["value"],
  string: ["char"],
  char: [],
  number: ["integer"],
  integer: [],
  boolean: [],
  null: [],
  date: [],
  time: [],
  "date-time": ["date", "time"],
  uuid: [],
};

const HEX = "[0-9a-fA-F]";
/** The characters after a backslash in JSON's short escapes. */
const SHORT_ESCAPES = ['"', "/", "\\", "b", "f", "n", "r", "t"];
const Q = gbnfLiteral('"');

/** The bodies, given the names the dependencies got. */
function body(name: PrimitiveName, ref: (n: PrimitiveName) => string): string {
  switch (name) {
    case "value":
      return ["object", "array", "string", "number", "boolean", "null"].map((n) => ref(n as PrimitiveName)).join(" | ");
    case "object": {
      const member = `${ref("string")} ":" ${ref("value")}`;
      return `"{" ( ${member} ( "," ${member} )* )? "}"`;
    }
    case "array":
      return `"[" ( ${ref("value")} ( "," ${ref("value")} )* )? "]"`;
    case "string":
      return `${Q} ${ref("char")}* ${Q}`;
    case "char":
      // Raw: anything but " \ and control characters (and lone surrogates, which are not characters);
      // escaped: the short escapes and \uXXXX except surrogate halves (a pair would count as two
      // characters here but one in minLength/maxLength).
      return (
        `${gbnfClass(JSON_RAW)} | "\\\\" ( ${gbnfClass(SHORT_ESCAPES.map((c) => [c.charCodeAt(0), c.charCodeAt(0)] as const))}` +
        ` | "u" ( [0-9a-cA-CeEfF] ${HEX}{3} | [dD] [0-7] ${HEX}{2} ) )`
      );
    case "integer":
      return `"-"? ( "0" | [1-9] [0-9]{0,14} )`;
    case "number":
      return `${ref("integer")} ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?`;
    case "boolean":
      return `"true" | "false"`;
    case "null":
      return `"null"`;
    case "date": {
      // RFC 3339 full-date with real month lengths; 02-29 only in leap years (proleptic Gregorian).
      const day28 = `"0" [1-9] | "1" [0-9] | "2" [0-8]`;
      const leapYear = `[0-9] [0-9] ( "0" [48] | [2468] [048] | [13579] [26] ) | ( [02468] [048] | [13579] [26] ) "00"`;
      return (
        `[0-9]{4} "-" ( ( "01" | "03" | "05" | "07" | "08" | "10" | "12" ) "-" ( ${day28} | "29" | "30" | "31" )` +
        ` | ( "04" | "06" | "09" | "11" ) "-" ( ${day28} | "29" | "30" ) | "02-" ( ${day28} ) )` +
        ` | ( ${leapYear} ) "-02-29"`
      );
    }
    case "time":
      // RFC 3339 full-time (leap seconds left out), 1-9 fraction digits, "Z" or a numeric offset.
      return (
        `( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )?` +
        ` ( "Z" | [-+] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`
      );
    case "date-time":
      return `${ref("date")} "T" ${ref("time")}`;
    case "uuid":
      return `${HEX}{8} "-" ${HEX}{4} "-" ${HEX}{4} "-" ${HEX}{4} "-" ${HEX}{12}`;
  }
}

/** Adds a primitive (and what it needs) to `rules` once; returns its rule name. */
export class Primitives {
  private readonly names = new Map<PrimitiveName, string>();

  constructor(private readonly rules: GbnfRules) {}

  get(name: PrimitiveName): string {
    const known = this.names.get(name);
    if (known !== undefined) return known;
    if (name === "value" || name === "object" || name === "array") {
      // Mutually recursive: reserve first.
      const reserved = this.rules.reserve(name);
      this.names.set(name, reserved);
      this.rules.define(reserved, body(name, (n) => this.get(n)));
      return reserved;
    }
    for (const dep of DEPENDENCIES[name]) this.get(dep);
    const added = this.rules.add(name, body(name, (n) => this.get(n)));
    this.names.set(name, added);
    return added;
  }
}

/** Length range of what the format rules write, to check minLength/maxLength against. */
export const FORMAT_LENGTHS: Record<"date" | "time" | "date-time" | "uuid", [number, number]> = {
  date: [10, 10],
  time: [9, 8 + 10 + 6],
  "date-time": [20, 11 + 8 + 10 + 6],
  uuid: [36, 36],
};

/** A JSON string (with its quotes) whose content is `content`. */
export function quoted(content: string): string {
  return content === "" || content === '""' ? gbnfLiteral('""') : `${Q} ${content} ${Q}`;
}
