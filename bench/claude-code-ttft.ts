// Benchmark: Claude Code's second turn against its first, on one server with its default context sizing.
// Runs the real Claude Code (`claude -p`, its full default system prompt and tools) twice with two different
// prompts and prints the time to first token of each run's first request, as measured between Claude Code
// and the server, and second ÷ first (goal ≤ 0.2: the new prompt re-reads only itself from the cache).
// Usage: npm run bench:agents [-- --model PATH.gguf] [--threads N]
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { writeTinyModel } from "../resources/test-model/cli.js";
import { defaultThreads } from "../server/config.js";
import { startServer } from "../server/index.js";
import { promptUsage, RecordingProxy } from "../test/support/recording-proxy.js";
import { ROOT } from "../test/support/svc-process.js";

const { values } = parseArgs({ options: { model: { type: "string" }, threads: { type: "string" } } });
const modelPath = values.model ?? writeTinyModel();
const threads = values.threads ? Number(values.threads) : defaultThreads();
const claude = join(ROOT, "node_modules", "@anthropic-ai", `claude-code-${process.platform}-${process.arch}`, "claude");
if (!existsSync(claude)) throw new Error(`Claude Code's binary is not installed (${claude}); run npm install.`);

const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-agents-"));
const sandbox = mkdtempSync(join(tmpdir(), "svc-bench-claude-"));
const server = await startServer({ host: "127.0.0.1", port: 0, dataDir, modelPath, threads, gpu: "auto", logLevel: "warn" });
const proxy = new RecordingProxy(server.url);
const proxyUrl = await proxy.start();
const key = server.keys.create({ name: "bench" }).key;
const loaded = server.engineHost.status().model!;

function runClaude(prompt: string): Promise<number | null> {
  const home = join(sandbox, "home");
  const work = join(sandbox, "work");
  for (const dir of [home, work, join(home, "tmp")]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(work, "notes.txt"), "The meeting is on Tuesday.\n");
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    CLAUDE_CONFIG_DIR: join(home, ".claude"),
    TMPDIR: join(home, "tmp"),
    ANTHROPIC_BASE_URL: proxyUrl,
    ANTHROPIC_API_KEY: key,
    CLAUDE_CODE_AUTO_COMPACT_WINDOW: String(loaded.contextSize),
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_ERROR_REPORTING: "1",
    CI: "1",
  };
  return new Promise((resolve, reject) => {
    const child = spawn(claude, ["-p", prompt, "--output-format", "json", "--max-turns", "10"], { cwd: work, env, stdio: "ignore" });
    child.on("error", reject);
    child.on("close", resolve);
  });
}

try {
  const firsts = [];
  for (const prompt of ["What day is the meeting?", "Which file holds the meeting notes?"]) {
    const before = proxy.inferences().length;
    const code = await runClaude(prompt);
    if (code !== 0) throw new Error(`claude -p exited with ${code}`);
    firsts.push(proxy.inferences()[before]!);
  }
  const [first, second] = firsts.map((e) => ({ ttft: e!.firstTokenMs!, usage: promptUsage(e!)! }));
  console.log(`model ${loaded.name}: ${loaded.sequences} sequence(s) of ${loaded.contextSize} tokens, ${threads} thread(s)`);
  console.log(`first turn:  prompt ${first!.usage.prompt} tokens, ${first!.usage.cached} cached, time to first token ${first!.ttft} ms`);
  console.log(`second turn: prompt ${second!.usage.prompt} tokens, ${second!.usage.cached} cached, time to first token ${second!.ttft} ms`);
  console.log(`second ÷ first time to first token: ${(second!.ttft / first!.ttft).toFixed(3)} (goal ≤ 0.2)`);
} finally {
  await proxy.stop();
  await server.close();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(sandbox, { recursive: true, force: true });
}
