// One pass over JSON text before it is parsed, for what parsing and every walk after it would pay for by
// the item rather than by the byte: how deep the text nests, and how many values (array items and object
// members) it holds. Strings are skipped with indexOf (memchr speed), so a body of long strings costs
// little more than its copy, and the pass stops at the first limit passed: a body of a million empty items
// is refused after reading as many as the limit. Text that is not valid JSON passes; JSON.parse says why.

export interface JsonTextLimits {
  /** Levels of arrays and objects. */
  maxDepth: number;
  /** Array items and object members, all levels together. */
  maxValues: number;
}

export interface JsonTextProblem {
  limit: "depth" | "values";
  /** Where it was passed: the path of its first few levels ("input[0].content"; "" for the body itself). */
  where: string;
}

/** Path segments kept for the answer: enough to name the field ("messages[1].content[0].input"). */
const NAMED_LEVELS = 6;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** The first limit `text` passes, or null. */
export function checkJsonText(text: string, limits: JsonTextLimits): JsonTextProblem | null {
  // Per open level (1-based): whether it is an array, the index of its current item, the key of its current member.
  const isArray: boolean[] = [false];
  const index: number[] = [0];
  const keys: string[] = [""];
  let depth = 0;
  let values = 0;
  let expectKey = false;
  const pathTo = (level: number): string => {
    let path = "";
    for (let l = 1; l < level && l < NAMED_LEVELS; l++) path += isArray[l] ? `[${index[l]}]` : path ? `.${keys[l]}` : keys[l];
    return path;
  };

  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      let end = text.indexOf('"', i + 1);
      // A quote preceded by an odd number of backslashes is part of the string.
      while (end !== -1) {
        let k = end - 1;
        while (text.charCodeAt(k) === BACKSLASH) k--;
        if ((end - k) % 2 === 1) break;
        end = text.indexOf('"', end + 1);
      }
      if (end === -1) return null;
      if (expectKey) {
        if (depth < NAMED_LEVELS) keys[depth] = text.slice(i + 1, end);
        expectKey = false;
      }
      i = end;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      depth++;
      if (depth > limits.maxDepth) return { limit: "depth", where: pathTo(depth) };
      isArray[depth] = c === OPEN_ARRAY;
      index[depth] = 0;
      keys[depth] = "";
      expectKey = c === OPEN_OBJECT;
      // Its first value, unless it is empty (the rest are counted at their commas).
      let k = i + 1;
      while (isSpace(text.charCodeAt(k))) k++;
      const next = text.charCodeAt(k);
      if (next !== CLOSE_ARRAY && next !== CLOSE_OBJECT && ++values > limits.maxValues) return { limit: "values", where: pathTo(depth) };
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      if (depth > 0) depth--;
      expectKey = false;
    } else if (c === COMMA && depth > 0) {
      if (isArray[depth]) index[depth]!++;
      else expectKey = true;
      if (++values > limits.maxValues) return { limit: "values", where: pathTo(depth) };
    }
  }
  return null;
}
