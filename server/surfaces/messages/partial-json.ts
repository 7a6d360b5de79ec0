// The input of a tool_use block cut off by max_tokens: its arguments are a prefix of valid JSON (the grammar
// allows nothing else), and the block shows what of it is complete. The rule is the one the Anthropic SDK's
// stream accumulator applies to a tool_use block's partial_json, so a cut call reads the same whether it
// was streamed or not: values that are not finished (a string without its closing quote, a number or
// literal that may go on, a key without its value) are dropped, and open objects and arrays are closed.

type Token =
  | { kind: "open"; char: "{" | "[" }
  | { kind: "close"; char: "}" | "]" }
  | { kind: "colon" }
  | { kind: "comma" }
  | { kind: "string"; text: string }
  | { kind: "number"; text: string; atEnd: boolean }
  | { kind: "literal"; text: string };

const LITERALS = ["true", "false", "null"];
const NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/;

/** The complete tokens of a JSON prefix; an unfinished string or literal at the end is left out. */
function tokenize(text: string): Token[] | null {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === "{" || c === "[") tokens.push({ kind: "open", char: c });
    else if (c === "}" || c === "]") tokens.push({ kind: "close", char: c });
    else if (c === ":") tokens.push({ kind: "colon" });
    else if (c === ",") tokens.push({ kind: "comma" });
    else if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      if (j >= text.length) return tokens; // the string is not finished
      tokens.push({ kind: "string", text: text.slice(i, j + 1) });
      i = j + 1;
      continue;
    } else if (c === "-" || (c >= "0" && c <= "9")) {
      let j = i + 1;
      while (j < text.length && /[0-9.eE+-]/.test(text[j]!)) j++;
      tokens.push({ kind: "number", text: text.slice(i, j), atEnd: j === text.length });
      i = j;
      continue;
    } else if (/[a-z]/i.test(c)) {
      let j = i + 1;
      while (j < text.length && /[a-z]/i.test(text[j]!)) j++;
      const word = text.slice(i, j);
      if (LITERALS.includes(word)) tokens.push({ kind: "literal", text: word });
      else if (!(j === text.length && LITERALS.some((l) => l.startsWith(word)))) return null;
      i = j;
      continue;
    } else if (!/\s/.test(c)) return null;
    i++;
  }
  return tokens;
}

/** Parses a prefix of JSON text into what of it is complete. Empty text is an empty object. */
export function parsePartialJson(text: string): unknown {
  if (text.trim() === "") return {};
  const tokens = tokenize(text);
  if (tokens === null) return JSON.parse(text); // not a JSON prefix: let JSON.parse say why
  const stack: Array<"{" | "["> = [];
  for (const t of tokens) {
    if (t.kind === "open") stack.push(t.char);
    else if (t.kind === "close") stack.pop();
  }
  const innermost = stack.at(-1);
  let n = tokens.length;
  // Drop unfinished trailing pieces: a colon, a number that may go on (or cannot be one), a key without its
  // value; then one comma.
  while (n > 0) {
    const last = tokens[n - 1]!;
    if (last.kind === "colon") {
      n--;
      continue;
    }
    if (last.kind === "number" && (last.atEnd || !NUMBER.test(last.text))) {
      n--;
      continue;
    }
    if (last.kind === "string" && innermost === "{") {
      const before = tokens[n - 2];
      if (before?.kind === "comma" || (before?.kind === "open" && before.char === "{")) {
        n--;
        continue;
      }
    }
    if (last.kind === "comma") n--;
    break;
  }
  const kept = tokens.slice(0, n);
  const open: Array<"}" | "]"> = [];
  let out = "";
  let previousScalar = false;
  for (const t of kept) {
    const scalar = t.kind === "string" || t.kind === "number" || t.kind === "literal";
    if (scalar && previousScalar) out += " ";
    previousScalar = scalar;
    switch (t.kind) {
      case "open":
        open.push(t.char === "{" ? "}" : "]");
        out += t.char;
        break;
      case "close":
        open.pop();
        out += t.char;
        break;
      case "colon":
        out += ":";
        break;
      case "comma":
        out += ",";
        break;
      default:
        out += t.text;
    }
  }
  return JSON.parse(out + open.reverse().join(""));
}
