// Constrained generation under stress (issue 36): many seeds at a high temperature with top_k opened up,
// so that the tiny model's byte tokens (multi-byte characters among them) come out under every grammar,
// through the three surfaces, streamed and not, as structured output and as forced tool calls. Every
// answer must come back 200 and satisfy its schema. Shared by test/e2e/constrained-fuzz.test.ts (a few
// hundred cases) and bench/constrained-fuzz.ts (the full count).
import { validateJsonAgainstSchema } from "../../server/engine/json-schema-grammar.js";

type Schema = Record<string, unknown>;

export const FUZZ_SCHEMAS: Record<string, Schema> = {
  weather: {
    type: "object",
    properties: {
      city: { type: "string", minLength: 2, maxLength: 20 },
      unit: { enum: ["c", "f", "°K"] },
      days: { type: "integer", minimum: 1, maximum: 14 },
    },
    required: ["city", "unit", "days"],
    additionalProperties: false,
  },
  patterns: {
    type: "object",
    properties: {
      code: { type: "string", pattern: "^[A-Z]{2}-[0-9]{3}$" },
      note: { type: "string", pattern: "^[^\\]}]{3,12}$" },
      letters: { type: "string", pattern: "^[a-zé€😀ऄ]{2,8}$" },
    },
    required: ["code", "note", "letters"],
    additionalProperties: false,
  },
  nested: {
    type: "object",
    properties: {
      user: {
        type: "object",
        properties: {
          name: { type: "string", minLength: 1, maxLength: 12 },
          tags: { type: "array", items: { type: "string", minLength: 1, maxLength: 8 }, maxItems: 3 },
          address: {
            type: "object",
            properties: { street: { type: "string", maxLength: 16 }, zip: { type: "string", pattern: "^[0-9]{5}$" } },
            required: ["street", "zip"],
          },
        },
        required: ["name", "tags", "address"],
      },
      score: { type: "number", multipleOf: 0.25, minimum: 0, maximum: 10 },
    },
    required: ["user", "score"],
  },
  choices: {
    type: "object",
    properties: {
      kind: { enum: ["a", "é", "😀", "中文"] },
      value: { anyOf: [{ type: "string", minLength: 3, maxLength: 5 }, { type: "integer", multipleOf: 5 }, { type: "null" }] },
      list: { type: "array", items: { type: "string", maxLength: 4 }, minItems: 1, maxItems: 4 },
      when: { type: "string", format: "date" },
    },
    required: ["kind", "value", "list", "when"],
  },
};

export type Surface = "chat" | "responses" | "messages";

export interface FuzzCase {
  index: number;
  surface: Surface;
  /** The answer's format, or a forced call of a tool with the schema. */
  kind: "output" | "tool";
  stream: boolean;
  /** Thinking first (unconstrained), then the constrained answer. */
  thinking: boolean;
  schemaName: string;
  seed: number;
}

const SURFACES: Surface[] = ["chat", "responses", "messages"];

/** The index-th case: surfaces, kinds, streaming, modes and schemas taken in turn. */
export function fuzzCase(index: number): FuzzCase {
  const names = Object.keys(FUZZ_SCHEMAS);
  const surface = SURFACES[index % 3]!;
  const kind = Math.floor(index / 3) % 2 === 0 ? "tool" : "output";
  return {
    index,
    surface,
    kind,
    stream: Math.floor(index / 6) % 2 === 1,
    thinking: index % 7 === 0,
    schemaName: names[Math.floor(index / 12) % names.length]!,
    seed: 1000 + index,
  };
}

export interface FuzzResult {
  fuzzCase: FuzzCase;
  status: number;
  /** The JSON text the model wrote (arguments or answer), when the request succeeded. */
  text: string | null;
  /** What went wrong: a status, an error frame, a schema failure. Null when all is well. */
  problem: string | null;
}

const TOOL = "fill_in";

/** The request of a case, in its surface's shape. */
export function fuzzRequestBody(c: FuzzCase): Record<string, unknown> {
  const schema = FUZZ_SCHEMAS[c.schemaName]!;
  const prompt = `Case ${c.index}: fill in the form.`;
  const common = { model: "svc", stream: c.stream, seed: c.seed };
  switch (c.surface) {
    case "chat":
      return {
        ...common,
        messages: [{ role: "user", content: prompt }],
        temperature: 1.5,
        top_p: 1,
        top_k: 1000,
        max_tokens: 600,
        reasoning_effort: c.thinking ? "low" : "none",
        ...(c.kind === "output"
          ? { response_format: { type: "json_schema", json_schema: { name: "form", schema, strict: true } } }
          : {
              tools: [{ type: "function", function: { name: TOOL, parameters: schema, strict: true } }],
              tool_choice: { type: "function", function: { name: TOOL } },
            }),
      };
    case "responses":
      return {
        ...common,
        input: prompt,
        temperature: 1.5,
        top_p: 1,
        top_k: 1000,
        max_output_tokens: 600,
        reasoning: { effort: c.thinking ? "low" : "none" },
        ...(c.kind === "output"
          ? { text: { format: { type: "json_schema", name: "form", schema, strict: true } } }
          : { tools: [{ type: "function", name: TOOL, parameters: schema, strict: true }], tool_choice: { type: "function", name: TOOL } }),
      };
    case "messages":
      return {
        model: "svc",
        stream: c.stream,
        messages: [{ role: "user", content: prompt }],
        temperature: 1,
        top_p: 1,
        top_k: 1000,
        max_tokens: 600,
        ...(c.thinking ? { thinking: { type: "enabled", budget_tokens: 64 } } : {}),
        ...(c.kind === "output"
          ? { output_config: { format: { type: "json_schema", schema } } }
          : { tools: [{ name: TOOL, input_schema: schema }], tool_choice: { type: "tool", name: TOOL } }),
      };
  }
}

/** The data of each SSE event in a stream's text. */
function sseData(text: string): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const block of text.split(/\n\n/)) {
    const data = block
      .split("\n")
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).trim())
      .join("\n");
    if (data === "" || data === "[DONE]") continue;
    out.push(JSON.parse(data) as Record<string, unknown>);
  }
  return out;
}

type Obj = Record<string, any>;

/** The JSON text written and whether it was cut by the token limit, read from a response. */
function extract(c: FuzzCase, json: Obj | null, events: Obj[]): { text: string; cut: boolean } | { error: string } {
  if (c.surface === "chat") {
    if (!c.stream) {
      const choice = json!.choices[0] as Obj;
      const text = c.kind === "tool" ? (choice.message.tool_calls?.[0]?.function?.arguments as string) : (choice.message.content as string);
      return { text, cut: choice.finish_reason === "length" };
    }
    let text = "";
    let finish: string | null = null;
    for (const e of events) {
      if (e.error) return { error: JSON.stringify(e.error) };
      const choice = (e.choices as Obj[] | undefined)?.[0];
      if (!choice) continue;
      if (c.kind === "tool") for (const call of choice.delta?.tool_calls ?? []) text += call.function?.arguments ?? "";
      else text += choice.delta?.content ?? "";
      finish = choice.finish_reason ?? finish;
    }
    return { text, cut: finish === "length" };
  }
  if (c.surface === "responses") {
    const response = c.stream ? (events.find((e) => e.type === "response.completed" || e.type === "response.incomplete" || e.type === "response.failed")?.response as Obj | undefined) : json!;
    if (!response) return { error: "no response.completed event" };
    if (response.status === "failed") return { error: JSON.stringify(response.error) };
    const output = response.output as Obj[];
    const text =
      c.kind === "tool"
        ? (output.find((o) => o.type === "function_call")?.arguments as string)
        : (output.find((o) => o.type === "message")?.content?.find((p: Obj) => p.type === "output_text")?.text as string);
    return { text, cut: response.status === "incomplete" };
  }
  if (!c.stream) {
    const content = json!.content as Obj[];
    const cut = json!.stop_reason === "max_tokens";
    if (c.kind === "tool") {
      const use = content.find((b) => b.type === "tool_use");
      return { text: use ? JSON.stringify(use.input) : "", cut };
    }
    return { text: content.filter((b) => b.type === "text").map((b) => b.text as string).join(""), cut };
  }
  let text = "";
  let stop: string | null = null;
  for (const e of events) {
    if (e.type === "error") return { error: JSON.stringify(e.error) };
    if (e.type === "content_block_delta") text += e.delta.type === "input_json_delta" ? e.delta.partial_json : e.delta.type === "text_delta" ? e.delta.text : "";
    if (e.type === "message_delta") stop = e.delta.stop_reason;
  }
  return { text, cut: stop === "max_tokens" };
}

/** Runs one case against a server and checks what came back. */
export async function runFuzzCase(baseUrl: string, key: string, c: FuzzCase): Promise<FuzzResult> {
  const path = c.surface === "chat" ? "/v1/chat/completions" : c.surface === "responses" ? "/v1/responses" : "/v1/messages";
  const res = await fetch(`${baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}`, "anthropic-version": "2023-06-01" },
    body: JSON.stringify(fuzzRequestBody(c)),
  });
  const raw = await res.text();
  const fail = (problem: string, text: string | null = null): FuzzResult => ({ fuzzCase: c, status: res.status, text, problem });
  if (res.status !== 200) return fail(`status ${res.status}: ${raw.slice(0, 400)}`);
  let extracted: ReturnType<typeof extract>;
  try {
    extracted = c.stream ? extract(c, null, sseData(raw)) : extract(c, JSON.parse(raw) as Obj, []);
  } catch (err) {
    return fail(`unreadable response (${(err as Error).message}): ${raw.slice(0, 400)}`);
  }
  if ("error" in extracted) return fail(`error in the stream: ${extracted.error}`);
  const { text, cut } = extracted;
  // Output cut by the token limit is incomplete by design (none of these schemas needs that many tokens).
  if (cut) return fail("cut by max_tokens", text);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return fail("not JSON", text);
  }
  const verdict = validateJsonAgainstSchema(FUZZ_SCHEMAS[c.schemaName]!, value);
  return verdict.valid ? { fuzzCase: c, status: 200, text, problem: null } : fail(`schema: ${verdict.errors.join("; ")}`, text);
}

/** Runs cases from..to-1 with `parallel` requests in flight; returns every result. */
export async function runFuzz(baseUrl: string, key: string, from: number, to: number, parallel = 2): Promise<FuzzResult[]> {
  const results: FuzzResult[] = [];
  let next = from;
  const worker = async () => {
    while (next < to) {
      const c = fuzzCase(next++);
      results.push(await runFuzzCase(baseUrl, key, c));
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return results.sort((a, b) => a.fuzzCase.index - b.fuzzCase.index);
}
