// The newest Claude Code (`claude -p`, its full default system prompt and tools) against `svc serve` on the
// tiny model with the server's default context sizing, set up exactly as docs/integrations.md prints it.
// Two different prompts in a row: both exit 0, and the second reads at least 90% of its prompt from the
// prefix cache (the billing header and the environment block must not break the prefix). The model's text
// is nonsense; what is tested is that Claude Code works out of the box, and fast on the second turn.
//
// Containment: a fresh environment (no inherited credentials), HOME, CLAUDE_CONFIG_DIR, TMPDIR and XDG dirs
// in a temporary folder, a temporary working directory, nonessential traffic (telemetry, auto-update, error
// reports) off, and a hard kill timer. A recording proxy between Claude Code and the server gives the usage
// of each request.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { atServer, docBlock } from "../support/doc-blocks.js";
import { promptUsage, RecordingProxy } from "../support/recording-proxy.js";
import { createKey, ROOT, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

/** The native binary from the platform package (the wrapper's postinstall only copies it to bin/claude.exe). */
const CLAUDE = join(ROOT, "node_modules", "@anthropic-ai", `claude-code-${process.platform}-${process.arch}`, "claude");
const RUN_LIMIT_MS = 420_000;

let server: SvcServer;
let proxy: RecordingProxy;
let proxyUrl: string;
let key: string;
let sandbox: string;
let dataDir: string;

beforeAll(async () => {
  if (!existsSync(CLAUDE)) return;
  dataDir = tempDataDir();
  key = createKey(dataDir);
  // The default context sizing: no --context-size, no --sequences.
  server = await startSvc({ model: inject("tinyModelPath"), dataDir });
  proxy = new RecordingProxy(server.url);
  proxyUrl = await proxy.start();
  sandbox = mkdtempSync(join(tmpdir(), "svc-claude-code-"));
  mkdirSync(join(sandbox, "bin"));
  symlinkSync(CLAUDE, join(sandbox, "bin", "claude"));
});
afterAll(async () => {
  await proxy?.stop();
  if (sandbox) rmSync(sandbox, { recursive: true, force: true });
  if (server) expect(await server.stop()).toBe(0);
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

interface ClaudeResult {
  type: string;
  subtype: string;
  is_error: boolean;
  result: string;
  usage: { input_tokens: number; output_tokens: number; cache_read_input_tokens: number; cache_creation_input_tokens: number };
}

/** The documented setup, with `claude` replaced by a one-shot `claude -p`. */
function runClaude(prompt: string): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  const home = join(sandbox, "home");
  const work = join(sandbox, "work");
  for (const dir of [home, work, join(home, "tmp")]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(work, "notes.txt"), "The meeting is on Tuesday.\n");
  const setup = atServer(docBlock("docs/integrations.md", "Claude Code", "sh"), proxyUrl).trimEnd();
  expect(setup.endsWith("\nclaude")).toBe(true);
  const script = `${setup} -p "$PROMPT" --output-format json --max-turns 10\n`;
  const env: NodeJS.ProcessEnv = {
    PATH: [join(sandbox, "bin"), dirname(process.execPath), process.env.PATH].join(":"),
    HOME: home,
    CLAUDE_CONFIG_DIR: join(home, ".claude"),
    TMPDIR: join(home, "tmp"),
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_CACHE_HOME: join(home, ".cache"),
    XDG_DATA_HOME: join(home, ".local", "share"),
    XDG_STATE_HOME: join(home, ".local", "state"),
    SVC_KEY: key,
    PROMPT: prompt,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_ERROR_REPORTING: "1",
    DISABLE_BUG_COMMAND: "1",
    CI: "1",
  };
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", script], { cwd: work, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const killGroup = () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(killGroup, RUN_LIMIT_MS);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      killGroup();
      resolve({ code, signal, stdout, stderr });
    });
  });
}

describe.skipIf(!existsSync(CLAUDE))("Claude Code CLI", () => {
  it(
    "two prompts in a row with its full default prompt: both exit 0, the second reads ≥ 90% of its prompt from the cache",
    async () => {
      const sizes = (await (await fetch(`${server.url}/v1/models/svc`)).json()) as { loaded_context_length: number };
      const outcomes: Array<{ result: ClaudeResult; requests: number }> = [];
      for (const prompt of ["What day is the meeting?", "Which file holds the meeting notes?"]) {
        const before = proxy.inferences().length;
        const run = await runClaude(prompt);
        const diagnostics = `exit ${run.code} (${run.signal ?? "no signal"})\nstdout:\n${run.stdout.slice(-4000)}\nstderr:\n${run.stderr.slice(-4000)}`;
        expect(run.code, diagnostics).toBe(0);
        const result = JSON.parse(run.stdout) as ClaudeResult;
        expect(result, diagnostics).toMatchObject({ type: "result", subtype: "success", is_error: false });
        expect(result.result.trim().length).toBeGreaterThan(0);
        outcomes.push({ result, requests: proxy.inferences().length - before });
      }
      const calls = proxy.inferences();
      const [first, second] = [calls[0]!, calls[outcomes[0]!.requests]!];
      // Its own system prompt, tools and environment: tens of thousands of tokens, and the server's default
      // context holds them.
      const body = JSON.parse(first.requestBody) as { system: Array<{ text: string }>; messages: Array<{ role: string }>; tools: unknown[] };
      expect(body.system[0]!.text).toMatch(/^x-anthropic-billing-header:/);
      expect(body.tools.length).toBeGreaterThan(5);
      const firstUsage = promptUsage(first)!;
      expect(firstUsage.prompt).toBeGreaterThan(30_000);
      expect(sizes.loaded_context_length).toBeGreaterThan(firstUsage.prompt);
      // The second run's first request: a new prompt, the same system prompt, tools and environment.
      const usage = promptUsage(second)!;
      expect(usage.cached / usage.prompt, JSON.stringify(usage)).toBeGreaterThanOrEqual(0.9);
      expect(outcomes[1]!.result.usage.cache_read_input_tokens).toBeGreaterThanOrEqual(usage.cached);
    },
    2 * RUN_LIMIT_MS + 60_000,
  );
});
