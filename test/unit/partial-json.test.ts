// A cut tool call's input on the Messages surface: every prefix of grammar-made JSON parses to what the
// Anthropic SDK's stream accumulator makes of the same prefix, so a cut call reads the same streamed or not.
import { partialParse } from "@anthropic-ai/sdk/_vendor/partial-json-parser/parser";
import { describe, expect, it } from "vitest";
import { partialToolInput } from "../../server/surfaces/messages/encode.js";
import { parsePartialJson } from "../../server/surfaces/messages/partial-json.js";

const samples = [
  '{"city": "Par\\"is", "days": -12.5e+3, "ok": true, "n": null, "list": [1, "two", {"x": [false]}], "e": {}, "u": "\\u00e9 ünï"}',
  '{"a":[[],[[1]]],"b":"x","c":{"d":{"e":[{"f":0}]}}}',
  '{"command": "ls -la /tmp", "timeout": 120000, "description": "List files"}',
  "{}",
];

describe("parsePartialJson", () => {
  it.each(samples)("agrees with the Anthropic SDK on every prefix of %s", (json) => {
    for (let i = 0; i <= json.length; i++) {
      const prefix = json.slice(0, i);
      const sdk = prefix.trim() === "" ? {} : partialParse(prefix);
      expect(parsePartialJson(prefix), JSON.stringify(prefix)).toEqual(sdk);
    }
  });

  it("keeps complete values, drops unfinished ones, closes what is open", () => {
    expect(parsePartialJson('{"city": "Oslo", "days": 3')).toEqual({ city: "Oslo" });
    expect(parsePartialJson('{"city": "Os')).toEqual({});
    expect(parsePartialJson('{"list": [1, 2, {"a": tr')).toEqual({ list: [1, 2, {}] });
    expect(parsePartialJson("")).toEqual({});
  });

  it("a tool_use input is always an object", () => {
    expect(partialToolInput("[1, 2")).toEqual({});
    expect(partialToolInput("not json")).toEqual({});
    expect(partialToolInput('{"a": 1}')).toEqual({ a: 1 });
  });
});
