// docs/integrations.md's SDK snippets (the Vercel AI SDK, LangChain, the OpenAI Agents SDK), run as printed
// against `svc serve` on the tiny model: each exits 0 and prints an answer. (Its Claude Code and Codex
// setups run in coding-agents.test.ts.)
import { spawn } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { atServer, docBlock } from "../support/doc-blocks.js";
import { createKey, ROOT, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

const DOC = "docs/integrations.md";
// Inside the repository, so the snippets' imports resolve from its node_modules.
const SCRATCH = join(ROOT, "test", ".artifacts", "doc-snippets");

let server: SvcServer;
let key: string;
let dataDir: string;

beforeAll(async () => {
  dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "1", "--context-size", "4096"] });
  mkdirSync(SCRATCH, { recursive: true });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
  rmSync(dataDir, { recursive: true, force: true });
});

function runSnippet(name: string, code: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const file = join(SCRATCH, `${name}.mjs`);
  writeFileSync(file, atServer(code, server.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], { cwd: ROOT, env: { PATH: process.env.PATH, HOME: process.env.HOME, SVC_API_KEY: key }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
    child.on("error", reject);
    child.on("close", (exit) => {
      clearTimeout(timer);
      resolve({ code: exit, stdout, stderr });
    });
  });
}

describe("docs/integrations.md", () => {
  it.each(["Vercel AI SDK", "LangChain", "OpenAI Agents SDK"])("the %s snippet runs as printed", { timeout: 120_000 }, async (section) => {
    const run = await runSnippet(section.replace(/\W+/g, "-").toLowerCase(), docBlock(DOC, section, "js"));
    expect(run.code, `stdout: ${run.stdout}\nstderr: ${run.stderr}`).toBe(0);
    expect(run.stdout.trim().length).toBeGreaterThan(0);
  });
});
