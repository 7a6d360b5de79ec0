// `svc serve` at its default settings on a model like issue 36's: trained on a 4096-token context, with
// 16-wide attention heads (the test model with other metadata; its answers are the same). A healthy start
// and a healthy request log no error (a q8_0 KV cache's 32-value blocks do not divide such heads, so it is
// never tried). Coding agents' prompts do not fit such a model: the start-up note and the 400s for Claude
// Code's and Codex's first prompts all say so with the same figure, and that no --context-size helps.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let key: string;
let modelDir: string;

/**
 * Agent-like text (instructions, a tool schema, code) of about this many characters: 44,000 is about Claude
 * Code's first prompt under the test model's tokenizer (43,959 tokens in issue 36), 27,000 Codex's.
 */
function agentPrompt(chars: number): string {
  const block =
    "You are an interactive agent that helps users with software engineering tasks. Read the files before you change them.\n" +
    '{"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}\n' +
    "export function load(path: string): Config { return JSON.parse(readFileSync(path, 'utf8')) as Config; }\n";
  return block.repeat(Math.ceil(chars / block.length)).slice(0, chars);
}

async function post(path: string, body: unknown): Promise<{ status: number; message: string }> {
  const res = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { error?: { message?: string } };
  return { status: res.status, message: json.error?.message ?? "" };
}

/** The server's log lines at level error ([svc] error: …), llama.cpp's included. */
const errorLines = () => server.output().split("\n").filter((line) => line.startsWith("[svc] error:"));

beforeAll(async () => {
  modelDir = mkdtempSync(join(tmpdir(), "svc-short-model-"));
  const model = join(modelDir, "short.gguf");
  writeFileSync(model, buildTinyModel({ contextLength: 4096, headSize: 16 }));
  const dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model, dataDir });
});
afterAll(async () => {
  if (server) expect(await server.stop()).toBe(0);
  rmSync(modelDir, { recursive: true, force: true });
});

describe("a model with 16-wide heads", () => {
  it("starts without an error line, with an f16 KV cache", async () => {
    expect(errorLines()).toEqual([]);
    const health = (await (await fetch(`${server.url}/health`)).json()) as { model: { state: string; kv_cache: string } };
    expect(health.model).toMatchObject({ state: "ready", kv_cache: "f16" });
  });

  it("answers a request without an error line", async () => {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "svc", messages: [{ role: "user", content: "Hello" }], max_tokens: 8 }),
    });
    expect(res.status).toBe(200);
    expect(errorLines()).toEqual([]);
  });
});

describe("coding agents on a model trained on 4096 tokens", () => {
  let note: string;
  let figure: number;

  beforeAll(async () => {
    const health = (await (await fetch(`${server.url}/health`)).json()) as { model: { context_size: number; context_note: string | null } };
    expect(health.model.context_size).toBe(4096);
    note = health.model.context_note!;
    figure = Number(/a model trained on a context of at least (\d+) tokens can/.exec(note)?.[1]);
  });

  it("one note, at start-up and in /health: the training length is the limit, and a model trained longer helps", () => {
    expect(note).toMatch(/trained on a context of 4096 tokens, so a larger --context-size cannot help/);
    expect(note).toMatch(/coding agents such as Claude Code and Codex send up to about \d+ tokens/);
    expect(figure).toBeGreaterThan(40_000); // Claude Code's ~44k-token first request under this tokenizer, and room to answer
    expect(server.output()).toContain(`[svc] warn: ${note}`);
    // No setting to try, and no word of memory: memory is not what stands in the way.
    expect(note).not.toMatch(/--context-size \d|SVC_CONTEXT_SIZE|--sequences|leave it out|memory|RAM/);
  });

  it("Claude Code's and Codex's first prompts: a 400 with the same reason and figure", async () => {
    const claude = await post("/v1/messages", {
      model: "svc",
      max_tokens: 1024,
      system: agentPrompt(44_000),
      messages: [{ role: "user", content: "List the files." }],
    });
    const codex = await post("/v1/responses", { model: "svc", instructions: agentPrompt(27_000), input: "List the files." });
    for (const { status, message } of [claude, codex]) {
      expect(status).toBe(400);
      expect(message).toMatch(/This model's context is 4096 tokens per sequence, but the prompt has more than \d+ tokens/);
      expect(message).toContain(`The model was trained on a context of 4096 tokens, so a larger --context-size cannot help; a model trained on a context of at least ${figure} tokens can.`);
      expect(message).not.toMatch(/--context-size \d|SVC_CONTEXT_SIZE|--sequences|memory/);
    }
    expect(errorLines()).toEqual([]);
  });
});
