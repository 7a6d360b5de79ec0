// Smoke test: the real Codex CLI (`codex exec`) runs a turn to completion against `svc serve` on the tiny
// model, through a custom model provider with wire_api "responses". The model's text is nonsense; what is
// tested is that Codex's requests (its own tool list with function, namespace and web_search tools,
// developer messages, reasoning and include options, and function_call_output round trips when the model
// happens to call a tool) are accepted, and that our event stream carries Codex to the end of the turn.
//
// Codex runs with HOME, CODEX_HOME and its working directory in temp dirs, a read-only sandbox, no
// approvals, no retries, no update check or analytics, and a hard kill timer, so it can neither hang CI
// nor write anything outside those dirs.
//
// Codex's own base instructions are ~27,000 tokens under the tiny model's byte-level tokenizer, close to
// the model's whole 32k context, and slow to evaluate on CI. The test swaps in short base instructions
// (model_instructions_file, a documented Codex setting); everything else Codex sends is its own.
//
// The provider is the README's own `[model_providers.svc]` block, read from README.md as printed; only its
// base URL's port is this test server's (the README's is the default 8787), and settings that keep the test
// bounded (no retries, an idle timeout) are added to the same table.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createKey, ROOT, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

const CODEX = join(ROOT, "node_modules", "@openai", "codex", "bin", "codex.js");
const RUN_LIMIT_MS = 150_000;

function codexVersion(): string | null {
  const probe = spawnSync(process.execPath, [CODEX, "--version"], { encoding: "utf8", timeout: 30_000, env: { PATH: process.env.PATH ?? "" } });
  return probe.status === 0 ? probe.stdout.trim() : null;
}
const version = codexVersion();

/** The README's Codex provider block, exactly as printed. */
function readmeCodexProvider(): string {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const block = /```toml\n(\[model_providers\.svc\][\s\S]*?)```/.exec(readme);
  if (!block) throw new Error("README.md has no ```toml [model_providers.svc] block");
  return block[1]!;
}

let server: SvcServer;
let key: string;
let sandbox: string;

beforeAll(async () => {
  if (!version) return;
  const dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "1", "--context-size", "32768"] });
  sandbox = mkdtempSync(join(tmpdir(), "svc-codex-"));
});
afterAll(async () => {
  if (server) expect(await server.stop()).toBe(0);
  if (sandbox) rmSync(sandbox, { recursive: true, force: true });
});

interface CodexRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  events: Array<{ type: string; item?: { type: string; text?: string; message?: string }; usage?: Record<string, number> }>;
  stderr: string;
}

function runCodex(prompt: string): Promise<CodexRun> {
  const home = join(sandbox, "home");
  const codexHome = join(home, ".codex");
  const work = join(sandbox, "work");
  mkdirSync(codexHome, { recursive: true });
  mkdirSync(work, { recursive: true });
  const instructions = join(home, "instructions.md");
  writeFileSync(instructions, "You are a coding agent running in the Codex CLI. Answer briefly.\n");
  writeFileSync(
    join(codexHome, "config.toml"),
    [
      `model = "svc"`,
      `model_provider = "svc"`,
      `approval_policy = "never"`,
      `sandbox_mode = "read-only"`,
      `check_for_update_on_startup = false`,
      `model_instructions_file = ${JSON.stringify(instructions)}`,
      ``,
      readmeCodexProvider().replace("http://127.0.0.1:8787/v1", `${server.url}/v1`).trimEnd(),
      `request_max_retries = 0`,
      `stream_max_retries = 0`,
      `stream_idle_timeout_ms = 120000`,
      ``,
      `[analytics]`,
      `enabled = false`,
      ``,
      `[history]`,
      `persistence = "none"`,
      ``,
    ].join("\n"),
  );
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [CODEX, "exec", "--skip-git-repo-check", "--ephemeral", "--json", "--color", "never", "--sandbox", "read-only", prompt],
      {
        cwd: work,
        // Only what Codex needs: no OPENAI_API_KEY or proxy settings from the developer's shell.
        env: { PATH: process.env.PATH ?? "", HOME: home, CODEX_HOME: codexHome, SVC_API_KEY: key, NO_COLOR: "1" },
        stdio: ["ignore", "pipe", "pipe"],
        // Its own process group: on Node 20 codex.js runs the native binary as a child (and that starts
        // sandbox helpers), so the kill timer must reach the whole group, not just the wrapper.
        detached: true,
      },
    );
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
      // Nothing of Codex may outlive the run (a stray sandbox helper would hold CI open).
      killGroup();
      const events = stdout
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as CodexRun["events"][number]);
      resolve({ code, signal, events, stderr });
    });
  });
}

describe("Codex CLI (codex exec, wire_api responses)", () => {
  it.skipIf(!version)(`${version ?? "codex"} runs a turn to completion against the local server`, { timeout: RUN_LIMIT_MS + 30_000 }, async () => {
    const run = await runCodex("Say hello.");
    const context = `exit ${run.code} ${run.signal ?? ""}\nevents: ${JSON.stringify(run.events)}\nstderr: ${run.stderr.slice(-4000)}`;
    expect(run.signal, context).toBeNull();
    expect(run.code, context).toBe(0);
    const types = run.events.map((e) => e.type);
    expect(types[0], context).toBe("thread.started");
    expect(types, context).toContain("turn.started");
    expect(types.at(-1), context).toBe("turn.completed");
    expect(types, context).not.toContain("turn.failed");
    expect(types, context).not.toContain("error");
    // The only error item allowed is Codex's note that it has no metadata for a model named "svc".
    const errors = run.events.filter((e) => e.item?.type === "error").map((e) => e.item!.message ?? "");
    for (const message of errors) expect(message, context).toMatch(/Model metadata for `svc` not found/);
    const messages = run.events.filter((e) => e.type === "item.completed" && e.item?.type === "agent_message");
    expect(messages.length, context).toBeGreaterThan(0);
    expect(messages.at(-1)!.item!.text!.trim().length, context).toBeGreaterThan(0);
    // Usage comes from our response.completed: Codex's prompt and tool list are thousands of tokens.
    const usage = run.events.at(-1)!.usage!;
    expect(usage.input_tokens, context).toBeGreaterThan(2000);
    expect(usage.output_tokens, context).toBeGreaterThan(0);
    // The read-only sandbox kept the working directory as it was.
    expect(readdirSync(join(sandbox, "work"))).toEqual([]);
  });
});
