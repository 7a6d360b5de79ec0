// Runs README.md's commands and snippets exactly as printed, in the README's order, the way a newcomer types
// them: every fenced block is read from the README at test time, so an edited README is what gets tested.
//
// How they run:
// - Shell lines run with bash, one at a time, as printed (comments included). `npx svc serve ...` keeps
//   running, in the background, until the next `serve` or the end (as in the README's second terminal).
//   `export SVC_API_KEY=...` runs in bash and the variable it sets is passed on to what follows.
// - JavaScript blocks are saved under the name the README's sentence before them gives ("save as
//   `hello.mjs`", "add it to `hello.mjs`") and run with node. They are saved under test/.artifacts/, inside
//   the project, so `import "openai"` finds the package as it would after the README's `npm install openai`.
// - The environment, not the commands, is what differs from a user's machine, and only as the README allows:
//   SVC_DATA_DIR (a temp data dir instead of the user's), HF_ENDPOINT (a loopback stand-in for Hugging Face
//   that answers the README's hf: sources with the tiny test model: no weights can be downloaded here),
//   SVC_THREADS=1 (two shared cores).
// - Port 8787: the README's snippets name it, so the server runs there. The test checks that the port is
//   free first; on CI it must be (the machine is the run's own), elsewhere a taken port (a developer's own
//   `svc serve` or app) skips the test with a message instead of failing or disturbing that server.
// - Not run here, each for a stated reason and checked another way: `npm install` and `npm test` (CI runs
//   them, .ci/run; running `npm test` inside itself would recurse), `npm start` and `npm run dist` (they
//   need Electron's binary, which cannot be downloaded here; test/electron covers the app), the interactive
//   `claude` session (test/e2e/coding-agents.test.ts runs `claude -p` with the same two variables),
//   `npx svc engine build` (minutes of compiling that servers started beside it would wait for or run on:
//   test/engine-build runs it alone, after `npm test`), and the Codex provider block
//   (test/e2e/coding-agents.test.ts runs Codex with docs/integrations.md's config, which must contain this
//   block as printed).
// A block or line that is neither run nor listed here fails the test; a block without a language is a
// listing (the project layout) and must hold no command. Commands quoted inline in the prose run too,
// except the ones the test names with a reason (a command's bare name in a sentence, a usage pattern with a
// placeholder such as KEY_ID, the snippets' `npm install X`, which this project's own dependencies satisfy).
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync, appendFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { isPortTaken } from "../../server/core/port.js";
import { startModelServer, type ModelServer } from "../support/model-server.js";
import { ROOT, tempDataDir } from "../support/svc-process.js";

const README = readFileSync(join(ROOT, "README.md"), "utf8");
const PORT = 8787;

interface Block {
  language: string;
  code: string;
  /** The prose just before the block (it names the file a snippet is saved as). */
  before: string;
}

function readmeBlocks(): Block[] {
  const blocks: Block[] = [];
  const fence = /```(\w*)\n([\s\S]*?)```/g;
  let last = 0;
  for (let m = fence.exec(README); m; m = fence.exec(README)) {
    blocks.push({ language: m[1]!, code: m[2]!, before: README.slice(last, m.index).trim().split(/\n\s*\n/).at(-1) ?? "" });
    last = m.index + m[0].length;
  }
  return blocks;
}

/** A shell block's commands: one per line, backslash continuations joined. */
function commandsOf(code: string): string[] {
  // A line ending in a backslash goes on: the pieces stay together, as printed, and bash reads them.
  return code
    .split(/(?<!\\)\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "");
}

/** Lines the test does not run, and how each is covered instead. */
const NOT_RUN: Array<{ match: RegExp; check: () => void }> = [
  {
    match: /^npm (install|test)$/,
    check: () => {
      const ci = readFileSync(join(ROOT, ".ci", "run"), "utf8");
      expect(ci).toMatch(/^npm install( |$)/m);
      expect(ci).toMatch(/^npm test$/m);
    },
  },
  {
    match: /^npm (start|run dist)\b/,
    check: () => {
      const scripts = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
      expect(scripts.start).toMatch(/electron \.$/);
      expect(scripts.dist).toMatch(/electron-builder$/);
      expect(existsSync(join(ROOT, "test", "electron", "shell.test.ts"))).toBe(true);
    },
  },
  {
    // Minutes of compiling, and servers started beside it would run on the new binaries:
    // test/engine-build runs it for real, alone, after `npm test` (.ci/run).
    match: /^npx svc engine build$/,
    check: () => {
      expect(readFileSync(join(ROOT, ".ci", "run"), "utf8")).toMatch(/^npm run test:engine-build$/m);
      const test = readFileSync(join(ROOT, "test", "engine-build", "engine-build.test.ts"), "utf8");
      expect(test).toContain('runSvcAsync(["engine", "build"])');
    },
  },
  {
    match: /^ANTHROPIC_BASE_URL=http:\/\/127\.0\.0\.1:8787 ANTHROPIC_API_KEY=\$SVC_API_KEY claude$/,
    check: () => {
      // test/e2e/coding-agents.test.ts runs Claude Code set up as docs/integrations.md prints it: the same two
      // variables, pointed at its server.
      const test = readFileSync(join(ROOT, "test", "e2e", "coding-agents.test.ts"), "utf8");
      expect(test).toContain('docBlock("docs/integrations.md", "Claude Code", "sh")');
      const integrations = readFileSync(join(ROOT, "docs", "integrations.md"), "utf8");
      expect(integrations).toContain("export ANTHROPIC_BASE_URL=http://127.0.0.1:8787\nexport ANTHROPIC_API_KEY=$SVC_API_KEY\n");
    },
  },
];

const skipOnTakenPort = async (): Promise<string | null> => {
  for (let waited = 0; await isPortTaken("127.0.0.1", PORT); waited += 2) {
    if (process.env.CI) throw new Error(`port ${PORT} is taken on CI: the README's snippets need it`);
    if (waited >= 30) return `port ${PORT} is in use on this machine (your own svc serve or app?)`;
    await new Promise((r) => setTimeout(r, 2000));
  }
  return null;
};

describe("README.md, every command and snippet as printed", () => {
  let hub: ModelServer;
  let dataDir: string;
  let skipReason: string | null = null;
  let server: { child: ChildProcess; output: () => string } | null = null;
  const env: NodeJS.ProcessEnv = { ...process.env };
  const scratch = join(ROOT, "test", ".artifacts", "readme");

  beforeAll(async () => {
    skipReason = await skipOnTakenPort();
    if (skipReason) {
      console.warn(`Skipping the README test: ${skipReason}.`);
      return;
    }
    hub = await startModelServer();
    // The README's Hugging Face sources, answered with the tiny model.
    for (const [repo, quant, seed] of [
      ["Qwen/Qwen3-4B-GGUF", "Q4_K_M", 21],
      ["Qwen/Qwen3-8B-GGUF", "Q4_K_M", 22],
    ] as const) {
      const file = `${repo.split("/")[1]!.replace(/-GGUF$/, "")}-${quant}.gguf`;
      hub.manifests.set(`${repo}:${quant}`, file);
      hub.files.set(`/${repo}/resolve/main/${file}`, buildTinyModel({ seed }));
    }
    dataDir = tempDataDir();
    Object.assign(env, { SVC_DATA_DIR: dataDir, HF_ENDPOINT: `${hub.url}/`, SVC_THREADS: "1", SVC_LOG_LEVEL: "warn" });
    delete env.SVC_PORT;
    delete env.SVC_API_KEY;
    rmSync(scratch, { recursive: true, force: true });
    mkdirSync(scratch, { recursive: true });
  });

  async function stopServer(): Promise<void> {
    if (!server) return;
    const { child } = server;
    server = null;
    if (child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    process.kill(-child.pid!, "SIGINT");
    await exited;
  }

  afterAll(async () => {
    await stopServer();
    await hub?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  async function startServer(line: string): Promise<void> {
    await stopServer();
    const child = spawn("bash", ["-c", line], { cwd: ROOT, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    server = { child, output: () => output };
    const end = Date.now() + 90_000;
    while (!output.includes(`svc listening on http://127.0.0.1:${PORT}`)) {
      if (child.exitCode !== null || Date.now() > end) throw new Error(`\`${line}\` did not start:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Not spawnSync: the stand-in hub answers from this process, whose event loop must keep running. */
  function run(command: string, args: string[], cwd = ROOT): Promise<{ status: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
      child.on("error", reject);
      child.on("close", (status) => {
        clearTimeout(timer);
        resolve({ status, stdout, stderr });
      });
    });
  }

  const bash = (line: string) => run("bash", ["-c", line]);

  async function runLine(line: string): Promise<void> {
    const result = await bash(line);
    const where = `\`${line}\`: exit ${result.status}\n${result.stdout}\n${result.stderr}`;
    expect(result.status, where).toBe(0);
    if (/^npx svc keys create\b/.test(line)) expect(result.stdout.trim().split("\n").at(-1), where).toMatch(/^sk-svc-[0-9a-f]{32}$/);
    if (/^npx svc models pull\b/.test(line)) expect(result.stdout, where).toMatch(/Downloaded hf_Qwen_Qwen3-[48]B\.Q4_K_M\.gguf/);
    if (/^npx svc models list\b/.test(line)) expect(result.stdout, where).toContain("hf_Qwen_Qwen3-4B.Q4_K_M.gguf");
    if (/^curl /.test(line)) expect((JSON.parse(result.stdout) as { object?: string }).object, where).toBe("chat.completion");
  }

  async function runScript(block: Block): Promise<void> {
    const save = /save as `([\w.-]+\.mjs)`/.exec(block.before);
    const add = /add it to `([\w.-]+\.mjs)`/.exec(block.before);
    const name = save?.[1] ?? add?.[1];
    if (!name) throw new Error(`The README does not say how to run this snippet:\n${block.code}`);
    const file = join(scratch, name);
    if (add) {
      expect(existsSync(file), `${name} must be saved before the README adds to it`).toBe(true);
      appendFileSync(file, `\n${block.code}`);
    } else writeFileSync(file, block.code);
    const result = await run(process.execPath, [file], scratch);
    const where = `node ${name}: exit ${result.status}\n${result.stdout}\n${result.stderr}`;
    expect(result.status, where).toBe(0);
    expect(result.stdout.trim().length, where).toBeGreaterThan(0);
  }

  it("runs them in order and gets what the README says", async (context) => {
    if (skipReason) return context.skip();
    const ran: string[] = [];
    for (const block of readmeBlocks()) {
      if (block.language === "sh") {
        for (const line of commandsOf(block.code)) {
          const exception = NOT_RUN.find((n) => n.match.test(line));
          if (exception) {
            exception.check();
            continue;
          }
          if (/^npx svc serve\b/.test(line)) await startServer(line);
          else if (/^export SVC_API_KEY=/.test(line)) {
            const result = await bash(`${line}\nprintf '%s' "$SVC_API_KEY"`);
            expect(result.status, result.stderr).toBe(0);
            expect(result.stdout.split("\n").at(-1)).toMatch(/^sk-svc-[0-9a-f]{32}$/);
            env.SVC_API_KEY = result.stdout.split("\n").at(-1);
          } else await runLine(line);
          ran.push(line);
        }
      } else if (block.language === "js") {
        await runScript(block);
        ran.push(block.code.split("\n")[0]!);
      } else if (block.language === "toml") {
        expect(block.code).toMatch(/^\[model_providers\.svc\]\n/);
        // test/e2e/coding-agents.test.ts runs Codex with docs/integrations.md's config, which must hold this
        // provider table as printed here.
        const integrations = readFileSync(join(ROOT, "docs", "integrations.md"), "utf8");
        expect(integrations).toContain(block.code);
        expect(readFileSync(join(ROOT, "test", "e2e", "coding-agents.test.ts"), "utf8")).toContain('docBlock("docs/integrations.md", "Codex CLI", "toml")');
      } else if (block.language === "") {
        // A plain block is a listing (the project layout), never something to type.
        expect(block.code).not.toMatch(/^\s*(npx|npm|svc|curl|node|export) /m);
      } else throw new Error(`A README block in a language this test does not run: \`\`\`${block.language}\n${block.code}`);
    }
    // Commands quoted inline in the prose: run too, or accounted for.
    for (const span of new Set([...README.matchAll(/`((?:npx|npm|svc) [^`]*)`/g)].map((m) => m[1]!.replace(/\s+/g, " ")))) {
      const install = /^npm install ((?:@?[\w./-]+ ?)+)$/.exec(span);
      if (install) {
        // A snippet's own `npm install X`: this project has X, which is why the snippets run from inside it.
        const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: object; devDependencies: object };
        for (const name of install[1]!.trim().split(" ")) expect(Object.keys({ ...pkg.dependencies, ...pkg.devDependencies }), span).toContain(name);
      } else if (span === "npm install" || span === "npm ci") {
        // The set-up command (run by CI), and the one the README says not to use.
      } else if (/^npm run bench(:[\w-]+)?( -- .*)?$/.test(span)) {
        // A benchmark: it rebuilds dist/ (which the other tests use at the same time), loads the machine for
        // minutes and prints ratios, not pass/fail. It must at least exist as printed.
        const script = /^npm run (bench(?::[\w-]+)?)/.exec(span)![1]!;
        const scripts = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
        expect(Object.keys(scripts), span).toContain(script);
        const file = /tsx (bench\/[\w-]+\.ts)/.exec(scripts[script]!)?.[1] ?? /(bench\/[\w-]+\.ts)/.exec(scripts[script]!)?.[1];
        expect(file && existsSync(join(ROOT, file)), `${span}: ${scripts[script]}`).toBe(true);
      } else if (NOT_RUN.some((n) => n.match.test(span))) {
        NOT_RUN.find((n) => n.match.test(span))!.check();
      } else if (/^svc \w+$/.test(span)) {
        // A command's name in a sentence ("`svc serve` flags"), not something to type.
      } else if (/\b[A-Z][A-Z_]+\b/.test(span)) {
        // A usage pattern with a placeholder the sentence explains (KEY_ID, FILE).
      } else if (/^npx svc serve\b/.test(span) && !span.endsWith("--help")) {
        expect(ran.some((line) => line.startsWith(span)), span).toBe(true);
      } else {
        const result = await bash(span);
        expect(result.status, `${span}: ${result.stderr}`).toBe(0);
        if (/--help$|^npx svc$/.test(span)) expect(result.stdout, span).toContain("Usage:");
        if (/keys create --reasoning-trace/.test(span)) expect(result.stdout).toContain("(reasoning trace on)");
        ran.push(span);
      }
    }
    // The server the README started is the one the snippets used; the models it pulled are there.
    expect(server?.output() ?? "").not.toMatch(/error/i);
    expect(ran).toEqual(expect.arrayContaining(["npx svc serve", "npx svc keys create", "npm run test-model"].map((c) => expect.stringContaining(c))));
    expect(ran.length).toBeGreaterThan(12);
  }, 420_000);
});
