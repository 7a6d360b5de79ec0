// The newest coding agents, as users run them, against `svc serve` on the tiny model with the server's
// default context sizing, set up exactly as docs/integrations.md prints it. One file, so the two heavy runs
// (tens of thousands of prompt tokens each, on a 2-core machine) never compete with each other. The model's
// text is nonsense; what is tested is that the agents work out of the box, and fast on the second turn.
//
// Claude Code (`claude -p`, its full default system prompt and tools): two different prompts in a row, both
// exit 0, and the second reads at least 90% of its prompt from the prefix cache (the billing header and the
// environment block must not break the prefix).
//
// Codex CLI (its own long base instructions and tool list): `codex exec`, then a second turn (`exec
// resume`) that reads at least 90% of its prompt from the prefix cache, then a turn that compacts the
// conversation first (remote compaction: a compaction_trigger item answered with a compaction item, which
// the next request carries back).
//
// Containment: fresh environments (no inherited credentials), HOME, config dirs, TMPDIR and working
// directories in temp folders, nonessential traffic (telemetry, updates, analytics) off, Codex in a read-only
// sandbox without approvals or retries, and hard kill timers on each agent's process group. A recording
// proxy between each agent and the server gives the usage of each request.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { atServer, docBlock } from "../support/doc-blocks.js";
import { promptUsage, RecordingProxy, type Exchange } from "../support/recording-proxy.js";
import { createKey, ROOT, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

/** The native binary from the platform package (the wrapper's postinstall only copies it to bin/claude.exe). */
const CLAUDE = join(ROOT, "node_modules", "@anthropic-ai", `claude-code-${process.platform}-${process.arch}`, "claude");
const CLAUDE_RUN_LIMIT_MS = 600_000;

const CODEX = join(ROOT, "node_modules", "@openai", "codex", "bin", "codex.js");
const CODEX_RUN_LIMIT_MS = 420_000;

function codexVersion(): string | null {
  const probe = spawnSync(process.execPath, [CODEX, "--version"], { encoding: "utf8", timeout: 30_000, env: { PATH: process.env.PATH ?? "" } });
  return probe.status === 0 ? probe.stdout.trim() : null;
}
const version = codexVersion();

interface GroupRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command in a process group of its own and collects its output. The whole group is killed when the
 * command ends (nothing of an agent, such as a sandbox helper, may outlive it and hold CI open) or after
 * limitMs.
 */
function runInGroup(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }, limitMs: number): Promise<GroupRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"], detached: true });
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
    const timer = setTimeout(killGroup, limitMs);
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
  function runClaude(prompt: string): Promise<GroupRun> {
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
      SVC_API_KEY: key,
      PROMPT: prompt,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_ERROR_REPORTING: "1",
      DISABLE_BUG_COMMAND: "1",
      CI: "1",
    };
    return runInGroup("bash", ["-c", script], { cwd: work, env }, CLAUDE_RUN_LIMIT_MS);
  }

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
      2 * CLAUDE_RUN_LIMIT_MS + 60_000,
    );
});

describe.skipIf(!version)("Codex CLI (wire_api responses, the documented setup)", () => {
  let server: SvcServer;
  let proxy: RecordingProxy;
  let key: string;
  let sandbox: string;
  let dataDir: string;

  beforeAll(async () => {
    if (!version) return;
    dataDir = tempDataDir();
    key = createKey(dataDir);
    // The default context sizing: no --context-size, no --sequences.
    server = await startSvc({ model: inject("tinyModelPath"), dataDir });
    proxy = new RecordingProxy(server.url);
    const proxyUrl = await proxy.start();
    sandbox = mkdtempSync(join(tmpdir(), "svc-codex-"));
    const codexHome = join(sandbox, "home", ".codex");
    mkdirSync(codexHome, { recursive: true });
    mkdirSync(join(sandbox, "work"), { recursive: true });
    // The documented config, then what keeps a test run contained (top-level keys before the doc's tables,
    // the provider's retry settings after its table).
    const documented = atServer(docBlock("docs/integrations.md", "Codex CLI", "toml"), proxyUrl);
    writeFileSync(
      join(codexHome, "config.toml"),
      [
        `approval_policy = "never"`,
        `sandbox_mode = "read-only"`,
        `check_for_update_on_startup = false`,
        documented.trimEnd(),
        `request_max_retries = 0`,
        `stream_max_retries = 0`,
        `stream_idle_timeout_ms = 240000`,
        ``,
        `[analytics]`,
        `enabled = false`,
        ``,
      ].join("\n"),
    );
  });
  afterAll(async () => {
    await proxy?.stop();
    if (server) expect(await server.stop()).toBe(0);
    if (sandbox) rmSync(sandbox, { recursive: true, force: true });
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  interface CodexRun {
    code: number | null;
    signal: NodeJS.Signals | null;
    events: Array<{ type: string; item?: { type: string; text?: string; message?: string }; usage?: Record<string, number> }>;
    stderr: string;
  }

  async function runCodex(args: string[]): Promise<CodexRun> {
    const home = join(sandbox, "home");
    // Only what Codex needs: no OPENAI_API_KEY or proxy settings from the developer's shell. codex.js runs
    // the native binary as a child (and that starts sandbox helpers): the whole group goes at the end.
    const run = await runInGroup(process.execPath, [CODEX, "exec", "--skip-git-repo-check", "--json", "--color", "never", "--sandbox", "read-only", ...args], {
      cwd: join(sandbox, "work"),
      env: { PATH: process.env.PATH ?? "", HOME: home, CODEX_HOME: join(home, ".codex"), SVC_API_KEY: key, NO_COLOR: "1" },
    }, CODEX_RUN_LIMIT_MS);
    const events = run.stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as CodexRun["events"][number]);
    return { code: run.code, signal: run.signal, events, stderr: run.stderr };
  }

  /**
   * For a failed turn: each request the server refused, with the shape (not the text) of its input items and
   * of the output items of the response before it, so a refusal that depends on the model's random output
   * can be traced to the item that caused it.
   */
  function refusals(): string {
    const exchanges = proxy.inferences();
    return exchanges
      .flatMap((e, i) => {
        if (e.status < 400) return [];
        const shape = (item: Record<string, unknown>) =>
          `${String(item.type ?? "message")}${"call_id" in item ? `(call_id ${JSON.stringify(item.call_id)})` : ""}{${Object.keys(item).sort().join(",")}}`;
        let input = "";
        try {
          input = ((JSON.parse(e.requestBody) as { input?: Array<Record<string, unknown>> }).input ?? []).map(shape).join(" ");
        } catch {
          input = "(unreadable body)";
        }
        const previous = exchanges[i - 1];
        const output = previous
          ? [...previous.responseBody.matchAll(/^data: (\{"type":"response\.output_item\.done".*)$/gm)]
              .map((m) => shape((JSON.parse(m[1]!) as { item: Record<string, unknown> }).item))
              .join(" ")
          : "";
        return [`refused ${e.status}: ${e.responseBody.slice(0, 600)}\n  its input: ${input}\n  the previous response's output: ${output}`];
      })
      .join("\n");
  }

  function expectCompletedTurn(run: CodexRun): void {
    const context = `exit ${run.code} ${run.signal ?? ""}\nevents: ${JSON.stringify(run.events).slice(-6000)}\nstderr: ${run.stderr.slice(-4000)}\n${refusals()}`;
    expect(run.signal, context).toBeNull();
    expect(run.code, context).toBe(0);
    const types = run.events.map((e) => e.type);
    expect(types[0], context).toBe("thread.started");
    expect(types, context).toContain("turn.started");
    expect(types.at(-1), context).toBe("turn.completed");
    expect(types, context).not.toContain("turn.failed");
    expect(types, context).not.toContain("error");
    // The only error item allowed is Codex's note that it has no metadata for a model named "svc".
    for (const e of run.events.filter((e) => e.item?.type === "error")) expect(e.item!.message ?? "", context).toMatch(/Model metadata for `svc` not found/);
    const messages = run.events.filter((e) => e.type === "item.completed" && e.item?.type === "agent_message");
    expect(messages.length, context).toBeGreaterThan(0);
    expect(messages.at(-1)!.item!.text!.trim().length, context).toBeGreaterThan(0);
  }

  const inputTypes = (exchange: Exchange) =>
    (JSON.parse(exchange.requestBody) as { input: Array<{ type?: string }> }).input.map((item) => item.type ?? "message");
  /** The bytes of the tool outputs in a request's input past its first `from` items (the tiny model reads a byte as a token at most). */
  const toolOutputBytes = (exchange: Exchange, from: number) =>
    (JSON.parse(exchange.requestBody) as { input: Array<{ type?: string; output?: unknown }> }).input
      .slice(from)
      .filter((item) => item.type === "function_call_output")
      .reduce((n, item) => n + Buffer.byteLength(typeof item.output === "string" ? item.output : JSON.stringify(item.output ?? "")), 0);

  it(
      `${version ?? "codex"}: exec, a second turn from the cache, and a turn that compacts the conversation first`,
      { timeout: 3 * CODEX_RUN_LIMIT_MS + 60_000 },
      async () => {
        expectCompletedTurn(await runCodex(["Say hello."]));
        const [first] = proxy.inferences();
        const body = JSON.parse(first!.requestBody) as { tools: Array<{ type: string }>; reasoning: unknown };
        // Codex's own request: its namespace (sub-agent) and web_search tools, reasoning without an effort.
        expect(body.tools.map((t) => t.type)).toEqual(expect.arrayContaining(["function", "namespace", "web_search"]));
        expect(body.reasoning).toEqual({ summary: "auto" });
        const firstUsage = promptUsage(first!)!;
        expect(firstUsage.prompt).toBeGreaterThan(15_000);

        const before = proxy.inferences().length;
        expectCompletedTurn(await runCodex(["resume", "--last", "Now say goodbye."]));
        const second = proxy.inferences()[before]!;
        const usage = promptUsage(second)!;
        // From the cache: all of the first turn's last request (its prompt, as the server read it), and what is
        // read anew is that request's answer (its reasoning is not sent back, so its text follows a different
        // prefix), the new message, and the output of any command Codex ran on the last answer. Not a share of
        // the prompt: the tiny model's sampled answer, or a command's output, is now and then thousands of tokens
        // long (once 6,442 new tokens after an answer of 19, a function_call_output).
        const all = proxy.inferences().map((x) => ({ ...promptUsage(x), output: Number(/"output_tokens":(\d+)/.exec(x.responseBody)?.[1]), input: inputTypes(x) }));
        const last = all[before - 1]!;
        const toolOutput = toolOutputBytes(second, last.input.length);
        expect(usage.cached, JSON.stringify({ usage, before, all })).toBeGreaterThanOrEqual(last.prompt!);
        expect(usage.prompt - usage.cached, JSON.stringify({ usage, before, all, toolOutput })).toBeLessThanOrEqual(last.output + 200 + toolOutput);

        // A long session: past the compaction limit, Codex compacts before the turn. A provider named OpenAI
        // takes the remote path: the request ends with a compaction_trigger item and gets one compaction item.
        const beforeCompaction = proxy.inferences().length;
        const compacting = await runCodex([
          "-c",
          "model_auto_compact_token_limit=20000",
          "-c",
          'model_providers.svc.name="OpenAI"',
          "resume",
          "--last",
          "And now?",
        ]);
        expectCompletedTurn(compacting);
        const exchanges = proxy.inferences().slice(beforeCompaction);
        const trigger = exchanges.find((e) => inputTypes(e).at(-1) === "compaction_trigger");
        expect(trigger, JSON.stringify(exchanges.map(inputTypes))).toBeDefined();
        expect(trigger!.responseBody).toMatch(/"type":"response\.output_item\.done"[^\n]*"type":"compaction"/);
        const after = exchanges[exchanges.indexOf(trigger!) + 1]!;
        expect(inputTypes(after)).toContain("compaction");
        // The read-only sandbox kept the working directory as it was.
        expect(readdirSync(join(sandbox, "work"))).toEqual([]);
      },
    );
});
