// docs/integrations.md's SDK snippets (the Vercel AI SDK, LangChain, the OpenAI Agents SDK), run as printed
// against `svc serve` on the tiny model, through a recording proxy: each exits 0 and prints an answer, and
// what a snippet sets (the reasoning effort) reaches the server. (Its Claude Code and Codex setups run in
// coding-agents.test.ts.)
import { spawn } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { atServer, docBlock } from "../support/doc-blocks.js";
import { RecordingProxy, type Exchange } from "../support/recording-proxy.js";
import { createKey, ROOT, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

const DOC = "docs/integrations.md";
// Inside the repository, so the snippets' imports resolve from its node_modules.
const SCRATCH = join(ROOT, "test", ".artifacts", "doc-snippets");

let server: SvcServer;
let proxy: RecordingProxy;
let proxyUrl: string;
let key: string;
let dataDir: string;

beforeAll(async () => {
  dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "1", "--context-size", "4096"] });
  proxy = new RecordingProxy(server.url);
  proxyUrl = await proxy.start();
  mkdirSync(SCRATCH, { recursive: true });
});
afterAll(async () => {
  await proxy.stop();
  expect(await server.stop()).toBe(0);
  rmSync(dataDir, { recursive: true, force: true });
});

function runSnippet(name: string, code: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const file = join(SCRATCH, `${name}.mjs`);
  writeFileSync(file, atServer(code, proxyUrl));
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

const json = (text: string) => JSON.parse(text) as Record<string, any>;

/** What each snippet's inference requests must show the server: the effort the snippet asks for. */
const checks: Record<string, (inferences: Exchange[]) => void> = {
  "Vercel AI SDK": (inferences) => {
    // The AI SDK drops reasoningEffort for a model id it does not know to reason, unless forceReasoning says so.
    // One request, or two when the model called the tool (the tiny model decides).
    expect(inferences.length).toBeGreaterThan(0);
    for (const e of inferences) {
      expect(e.path).toBe("/v1/responses");
      expect(json(e.requestBody).reasoning).toEqual({ effort: "low" });
      expect(json(e.responseBody).reasoning).toMatchObject({ effort: "low" });
    }
  },
  // LangChain too drops `reasoning: {effort}` for a model name it does not know to reason; modelKwargs is sent.
  LangChain: (inferences) => {
    expect(inferences.map((e) => e.path)).toEqual(["/v1/chat/completions"]);
    expect(json(inferences[0]!.requestBody).reasoning_effort).toBe("low");
  },
  "OpenAI Agents SDK": (inferences) => {
    expect(inferences.map((e) => e.path)).toEqual(["/v1/responses"]);
  },
};

describe("docs/integrations.md", () => {
  it.each(Object.keys(checks))("the %s snippet runs as printed", { timeout: 120_000 }, async (section) => {
    const before = proxy.exchanges.length;
    const run = await runSnippet(section.replace(/\W+/g, "-").toLowerCase(), docBlock(DOC, section, "js"));
    expect(run.code, `stdout: ${run.stdout}\nstderr: ${run.stderr}`).toBe(0);
    expect(run.stdout.trim().length).toBeGreaterThan(0);
    expect(run.stderr, "the SDK warned (a setting it dropped?)").not.toMatch(/warning/i);
    const inferences = proxy.exchanges.slice(before).filter((e) => e.method === "POST" && e.path.startsWith("/v1/"));
    expect(inferences.every((e) => e.status === 200)).toBe(true);
    checks[section]!(inferences);
  });
});
