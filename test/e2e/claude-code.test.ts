// Smoke test: the real Claude Code CLI (`claude -p`) against `svc serve` on the tiny model. Its text is
// nonsense; what is checked is that the protocol holds: Claude Code streams every turn (including its
// "Warmup" sub-agent requests), reads the usage, and exits 0 with a successful result.
//
// Containment: Claude Code gets a fresh environment (no inherited credentials), HOME, CLAUDE_CONFIG_DIR,
// TMPDIR and XDG dirs in a temporary folder, a temporary working directory, only the read-only Read tool,
// no MCP servers, nonessential traffic (telemetry, auto-update, error reports) off, and a hard kill timer.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { buildVocab } from "../../resources/test-model/tiny-model.js";
import { createKey, ROOT, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

const CLAUDE_CLI = join(ROOT, "node_modules", "@anthropic-ai", "claude-code", "cli.js");
const KILL_AFTER_MS = 150_000;

let server: SvcServer;
let key: string;
let sandbox: string;
let dataDir: string;

beforeAll(async () => {
  if (!existsSync(CLAUDE_CLI)) return;
  dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "8192"] });
  sandbox = mkdtempSync(join(tmpdir(), "svc-claude-code-"));
});
afterAll(async () => {
  if (sandbox) rmSync(sandbox, { recursive: true, force: true });
  if (server) expect(await server.stop()).toBe(0);
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

function runClaude(args: string[]): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  const home = join(sandbox, "home");
  const work = join(sandbox, "work");
  for (const dir of [home, work, join(home, "tmp")]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(work, "notes.txt"), "The meeting is on Tuesday.\n");
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    CLAUDE_CONFIG_DIR: join(home, ".claude"),
    TMPDIR: join(home, "tmp"),
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_CACHE_HOME: join(home, ".cache"),
    XDG_DATA_HOME: join(home, ".local", "share"),
    XDG_STATE_HOME: join(home, ".local", "state"),
    ANTHROPIC_BASE_URL: server.url,
    ANTHROPIC_API_KEY: key,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_ERROR_REPORTING: "1",
    DISABLE_BUG_COMMAND: "1",
    CI: "1",
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLAUDE_CLI, ...args], { cwd: work, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), KILL_AFTER_MS);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

describe.skipIf(!existsSync(CLAUDE_CLI))("Claude Code CLI", () => {
  it(
    "claude -p runs to completion against the local server, exit code 0",
    async () => {
      const run = await runClaude([
        "-p",
        "Read notes.txt and tell me what day the meeting is.",
        "--output-format",
        "json",
        "--max-turns",
        "8",
        // Claude Code's own system prompt and full tool set are ~65k characters, which the tiny model
        // (about one token per character) evaluates in minutes; a short prompt and one tool keep it quick.
        "--system-prompt",
        "You are a test assistant. Be brief.",
        "--tools",
        "Read",
        "--strict-mcp-config",
      ]);
      const diagnostics = `exit ${run.code} (${run.signal ?? "no signal"})\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`;
      expect(run.code, diagnostics).toBe(0);
      const result = JSON.parse(run.stdout) as {
        type: string;
        subtype: string;
        is_error: boolean;
        num_turns: number;
        result: string;
        usage: { input_tokens: number; output_tokens: number; cache_creation_input_tokens: number };
      };
      expect(result, diagnostics).toMatchObject({ type: "result", subtype: "success", is_error: false });
      expect(result.num_turns).toBeGreaterThanOrEqual(1);
      // The answer is the tiny model's: every word comes from its answer vocabulary.
      const vocab = buildVocab();
      const vocabulary = new Set(vocab.answerWords.map((id) => vocab.tokens[id]!.replace("\u2581", "")));
      const words = result.result.trim().split(/\s+/);
      expect(words.length).toBeGreaterThan(0);
      for (const word of words) expect(vocabulary.has(word), `unexpected word '${word}' in ${result.result}`).toBe(true);
      // Usage went through: Claude Code marks cache breakpoints, so the first run writes its prefix.
      expect(result.usage.output_tokens).toBeGreaterThan(0);
      expect(result.usage.cache_creation_input_tokens).toBeGreaterThan(100);
    },
    KILL_AFTER_MS + 30_000,
  );
});
