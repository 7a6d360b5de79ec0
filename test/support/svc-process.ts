// Runs the real CLI (`node bin/svc.js`) as users do: a server on a free loopback port, keys from the CLI.
import { spawn, spawnSync, type ChildProcess, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const SVC_BIN = join(ROOT, "bin", "svc.js");

export interface SvcServer {
  url: string;
  dataDir: string;
  process: ChildProcessWithoutNullStreams;
  output: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const tempDirs = new Set<string>();

/** A fresh data dir under the system's temp folder, removed after the test file (test/support/cleanup.ts). */
export function tempDataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-test-"));
  tempDirs.add(dir);
  return dir;
}

/** Servers startSvc started in this test file that have not exited yet. */
const liveServers = new Set<ChildProcess>();

/**
 * Removes every data dir tempDataDir made in this test file. A server the file did not stop (its afterAll
 * failed or timed out) is killed first: left running, it would write its lock and database into the removed
 * dir again, and the folder would stay behind in the temp folder.
 */
export async function removeTempDataDirs(): Promise<void> {
  await Promise.all(
    [...liveServers].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once("exit", () => resolve());
          child.kill("SIGKILL");
        }),
    ),
  );
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  tempDirs.clear();
}

export function runSvc(args: string[], env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [SVC_BIN, ...args], { encoding: "utf8", env: { ...process.env, ...env } });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** runSvc without blocking this process's event loop (needed when the test itself serves HTTP to the CLI). */
export function runSvcAsync(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SVC_BIN, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

export function createKey(dataDir: string, ...extra: string[]): string {
  const result = runSvc(["keys", "create", "--data-dir", dataDir, ...extra]);
  if (result.status !== 0) throw new Error(`keys create failed: ${result.stderr}`);
  return result.stdout.trim().split("\n").at(-1)!;
}

/**
 * `svc serve` arguments every startSvc in this test file adds: the upstream tests (test/e2e/upstream-*.test.ts)
 * set --upstream URL here and run another file's tests unchanged on a llama-server.
 */
export const serveDefaults: { args: string[]; beforeStart?: () => Promise<void> } = { args: [] };

export async function startSvc(
  options: { model?: string; dataDir?: string; args?: string[]; env?: NodeJS.ProcessEnv; /** Let svc choose the threads (no --threads 1). */ autoThreads?: boolean } = {},
): Promise<SvcServer> {
  const dataDir = options.dataDir ?? tempDataDir();
  const env = options.env ?? {};
  await serveDefaults.beforeStart?.();
  const args = ["serve", "--host", "127.0.0.1", "--data-dir", dataDir, ...serveDefaults.args, ...(options.args ?? [])];
  if (env.SVC_PORT === undefined) args.push("--port", "0");
  if (env.SVC_THREADS === undefined && !options.autoThreads) args.push("--threads", "1");
  if (options.model) args.push("--model", options.model);
  const child = spawn(process.execPath, [SVC_BIN, ...args], {
    env: { ...process.env, SVC_LOG_LEVEL: "warn", ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  liveServers.add(child);
  child.once("exit", () => liveServers.delete(child));
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (out += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    // A server that never says it is ready is killed: left running, it would go on writing into a data
    // dir the file's cleanup has already removed (and hold the machine's cores).
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`svc did not start in time:\n${out}`));
    }, 60_000);
    const onData = () => {
      // The line that says where it listens (logs before it may name other servers, such as an upstream's URL).
      const match = /svc listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        child.stdout.off("data", onData);
        resolve(match[1]!);
      }
    };
    child.stdout.on("data", onData);
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`svc exited with ${code}:\n${out}`));
    });
  });
  return {
    url,
    dataDir,
    process: child,
    output: () => out,
    stop(signal: NodeJS.Signals = "SIGTERM") {
      return new Promise((resolve) => {
        // A process already gone (exited, or killed by a signal) has nothing left to stop.
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        child.once("exit", (code) => {
          if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
          resolve(code);
        });
        child.kill(signal);
      });
    },
  };
}

/**
 * The pid of a server's engine process (Linux: the child of the server whose command runs engine-child), where
 * the model's weights and the context live.
 */
export function enginePid(server: SvcServer): number {
  const parent = server.process.pid!;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === parent && readFileSync(`/proc/${entry}/cmdline`, "utf8").includes("engine-child")) return Number(entry);
    } catch {
      // Gone meanwhile.
    }
  }
  throw new Error(`no engine process under the server ${parent}`);
}

/** Polls a server's /health back to back (every intervalMs) until stopped; returns each answer's latency in ms. */
export function pollHealth(url: string, intervalMs = 5): { stop: () => Promise<number[]> } {
  const latencies: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      await (await fetch(`${url}/health`)).text();
      latencies.push(performance.now() - started);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return latencies;
    },
  };
}
