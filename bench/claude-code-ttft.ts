// Benchmark: Claude Code's second turn against its first, on one server with its default context sizing, and
// its first turn after a restart with warm start off and on (issue 43).
// Runs the real Claude Code (`claude -p`, its full default system prompt and tools) with different prompts and
// prints the time to first token of each run's first request, as measured between Claude Code and the server:
// second ÷ first (goal ≤ 0.2: the new prompt re-reads only itself from the cache), and after a restart, warm
// start on ÷ off (the prefix saved by the first server is restored instead of read again).
// Usage: npm run bench:agents [-- --model PATH.gguf] [--threads N]
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { writeTinyModel } from "../resources/test-model/cli.js";
import { defaultThreads } from "../server/config.js";
import { startServer, type RunningServer } from "../server/index.js";
import { promptUsage, RecordingProxy } from "../test/support/recording-proxy.js";
import { ROOT } from "../test/support/svc-process.js";

const { values } = parseArgs({ options: { model: { type: "string" }, threads: { type: "string" } } });
const modelPath = values.model ?? writeTinyModel();
const threads = values.threads ? Number(values.threads) : defaultThreads();
const claude = join(ROOT, "node_modules", "@anthropic-ai", `claude-code-${process.platform}-${process.arch}`, "claude");
if (!existsSync(claude)) throw new Error(`Claude Code's binary is not installed (${claude}); run npm install.`);

const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-agents-"));
const sandbox = mkdtempSync(join(tmpdir(), "svc-bench-claude-"));

/** A server on the bench's data dir, with warm start on or off, and a recording proxy in front of it. */
async function serve(warmStart: boolean): Promise<{ server: RunningServer; proxy: RecordingProxy; proxyUrl: string }> {
  const server = await startServer({ host: "127.0.0.1", port: 0, dataDir, modelPath, threads, gpu: "auto", logLevel: "warn", warmStart });
  const proxy = new RecordingProxy(server.url);
  return { server, proxy, proxyUrl: await proxy.start() };
}

let current = await serve(true);
const key = current.server.keys.create({ name: "bench" }).key;
const loaded = current.server.engineHost.status().model!;

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
    ANTHROPIC_BASE_URL: current.proxyUrl,
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

/** Claude Code's first request of one run: time to first token and prompt usage. */
async function firstRequestOf(prompt: string): Promise<{ ttft: number; usage: NonNullable<ReturnType<typeof promptUsage>> }> {
  const before = current.proxy.inferences().length;
  const code = await runClaude(prompt);
  if (code !== 0) throw new Error(`claude -p exited with ${code}`);
  const exchange = current.proxy.inferences()[before]!;
  return { ttft: exchange.firstTokenMs!, usage: promptUsage(exchange)! };
}

async function restart(warmStart: boolean): Promise<void> {
  await current.proxy.stop();
  await current.server.close();
  current = await serve(warmStart);
}

const line = (label: string, r: { ttft: number; usage: { prompt: number; cached: number } }) =>
  console.log(`${label} prompt ${r.usage.prompt} tokens, ${r.usage.cached} cached, time to first token ${r.ttft} ms`);

try {
  const first = await firstRequestOf("What day is the meeting?");
  const second = await firstRequestOf("Which file holds the meeting notes?");
  console.log(`model ${loaded.name}: ${loaded.sequences} sequence(s) of ${loaded.contextSize} tokens, ${threads} thread(s)`);
  line("first turn: ", first);
  line("second turn:", second);
  console.log(`second ÷ first time to first token: ${(second.ttft / first.ttft).toFixed(3)} (goal ≤ 0.2)`);
  // After a restart: the first server (warm start on) saved the prefix; off reads it again, on restores it.
  await restart(false);
  const cold = await firstRequestOf("Who is in the meeting?");
  await restart(true);
  const warm = await firstRequestOf("Where is the meeting?");
  line("after a restart, warm start off:", cold);
  line("after a restart, warm start on: ", warm);
  console.log(`after a restart, on ÷ off time to first token: ${(warm.ttft / cold.ttft).toFixed(3)}`);
} finally {
  await current.proxy.stop();
  await current.server.close();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(sandbox, { recursive: true, force: true });
}
