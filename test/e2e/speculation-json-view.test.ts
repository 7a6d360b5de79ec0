// Prompt lookup inside a JSON string that quotes the prompt (issue 44): a coding agent's Write call repeats a
// file the prompt holds as it is (real line breaks), while the call's arguments hold it escaped (`\n`). The
// engine guesses from the request's texts as JSON quotes them too (jsonQuotedText), so the guesses go on
// across the escapes instead of stopping at each line's end.
//
// The model is bench:spec's echo model (bench/spec-model.ts) in a small shape: whatever the prompt, its greedy
// answer is a fixed chain, which a forced write_file call writes into its `content` with a `\n` escape (the
// chain's backslash, then the grammar's choice of escape: `n` in this shape and seed). The conversation quotes the file as it is: with
// the view, every guess after the first line break is kept; without it the escape is written token by token.
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureEchoModel, ECHO_MODEL } from "../../bench/spec-model.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

interface Side {
  server: SvcServer;
  openai: OpenAI;
}
let on: Side;
let off: Side;

async function side(model: string, speculation: "prompt-lookup" | "off"): Promise<Side> {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  // Every guess checked (not priced by this machine's timings): the counts below are exact.
  const server = await startSvc({ model, dataDir, args: ["--sequences", "1", "--context-size", "4096", "--speculation", speculation], env: { SVC_ENGINE_TEST_KEEP_GUESSES: "1" } });
  return { server, openai: new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 }) };
}

beforeAll(async () => {
  const model = ensureEchoModel(join(tempDataDir(), "echo-small.gguf"), { nEmbd: 512, nLayers: 2, nHead: 4, nFf: 512, contextLength: 4096, seed: ECHO_MODEL.seed });
  [on, off] = await Promise.all([side(model, "prompt-lookup"), side(model, "off")]);
}, 120_000);
afterAll(async () => {
  expect(await on?.server.stop()).toBe(0);
  expect(await off?.server.stop()).toBe(0);
});

const writeFile = { type: "function" as const, function: { name: "write_file", parameters: { type: "object", properties: { content: { type: "string" } }, required: ["content"] } } };
const forced = { tools: [writeFile], tool_choice: { type: "function" as const, function: { name: "write_file" } } };

function rewrite(file: string, tag: string): OpenAI.ChatCompletionMessageParam[] {
  return [
    { role: "system", content: "You edit files. Reply with the whole edited file and nothing else." },
    { role: "user", content: `Rewrite this file with one change: keep every line as it is, except fix the typo if you find one.\n\n\`\`\`\n${file}\n\`\`\`\n\n(${tag})` },
  ];
}

const argumentsOf = (r: OpenAI.ChatCompletion) => (r.choices[0]!.message.tool_calls![0] as { function: { arguments: string } }).function.arguments;

describe("prompt lookup inside a tool call's JSON string", () => {
  it("guesses across the escaped line break of a file the prompt quotes as it is, and writes the same call", async () => {
    const body = { model: "svc", temperature: 0, reasoning_effort: "none" as const, max_tokens: 400, ...forced };
    // The file: what the call writes, whatever the prompt (the model's chain, closed by its own quote).
    const first = await off.openai.chat.completions.create({ ...body, messages: [{ role: "user", content: "Say anything." }] });
    expect(first.choices[0]!.finish_reason).toBe("tool_calls");
    const written = argumentsOf(first);
    expect(written).toContain("\\n");
    const file = (JSON.parse(written) as { content: string }).content;
    expect(file).toContain("\n");

    // Quoted as it is (a real line break) and quoted as the call writes it (escaped): the same call on both
    // servers, and with the view as many guesses kept for the raw quote as for the escaped one, less the
    // escape's backslash, written where the raw copy guessed the line break.
    const raw = await Promise.all([on, off].map((s) => s.openai.chat.completions.create({ ...body, messages: rewrite(file, "raw") })));
    const escaped = await on.openai.chat.completions.create({ ...body, messages: rewrite(written.replace(/^\{"content":"/, "").replace(/"\}$/, ""), "escaped") });
    expect(argumentsOf(raw[0]!)).toBe(written);
    expect(argumentsOf(raw[1]!)).toBe(written);
    expect(argumentsOf(escaped)).toBe(written);
    const kept = (r: OpenAI.ChatCompletion) => r.usage!.completion_tokens_details!.accepted_prediction_tokens!;
    expect(kept(escaped)).toBeGreaterThan(raw[0]!.usage!.completion_tokens / 2);
    expect(kept(raw[0]!)).toBeGreaterThanOrEqual(kept(escaped) - 1);
  });
});
