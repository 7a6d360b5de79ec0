// Skips: the upstream tests skip when .cache/upstream/bin/llama-server or .cache/upstream/bin/ggml-rpc-server
// does not exist (check: `ls .cache/upstream/bin`; SVC_TEST_UPSTREAM_BIN names another folder), and
// upstreamMissing() warns "Skipping the upstream tests: ..." with the folder and `npm run upstream:build`, the
// command that builds them. With CI=1 their absence fails the test instead, so CI always proves them.
// llama.cpp's own llama-server and rpc-server, built from the source node-llama-cpp ships with the RPC backend
// (`npm run upstream:build`, which CI runs before `npm test`), on loopback for the upstream tests.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { freePort } from "../../bench/common.js";
import { ROOT, serveDefaults } from "./svc-process.js";

/** SVC_TEST_UPSTREAM_BIN: another folder with both binaries. */
export const UPSTREAM_BIN = process.env.SVC_TEST_UPSTREAM_BIN ?? join(ROOT, ".cache", "upstream", "bin");
export const LLAMA_SERVER = join(UPSTREAM_BIN, "llama-server");
/** llama.cpp names the rpc-server tool's target and binary ggml-rpc-server. */
export const RPC_SERVER = join(UPSTREAM_BIN, "ggml-rpc-server");

/** Why the upstream tests cannot run here (null: they can). On CI a missing build is an error, not a skip. */
export function upstreamMissing(): string | null {
  if (existsSync(LLAMA_SERVER) && existsSync(RPC_SERVER)) return null;
  const why = `llama-server and rpc-server are not built in ${UPSTREAM_BIN}: run \`npm run upstream:build\` (about 10 minutes on 2 cores)`;
  if (process.env.CI) throw new Error(`${why}. CI builds them in .ci/run before npm test.`);
  console.warn(`Skipping the upstream tests: ${why}.`);
  return why;
}

export interface Child {
  url: string;
  port: number;
  process: ChildProcessWithoutNullStreams;
  output: () => string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Whether something accepts connections on the port (the connection is closed at once). */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

function launch(binary: string, args: string[], port: number, ready: (out: string) => boolean, timeoutMs = 60_000): Promise<Child> {
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] }) as unknown as ChildProcessWithoutNullStreams;
  let out = "";
  const stop = (signal: NodeJS.Signals = "SIGTERM") =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill(signal);
    });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${binary} did not start in time:\n${out.slice(-3000)}`));
    }, timeoutMs);
    let poll: NodeJS.Timeout | undefined;
    const onData = (d: Buffer) => {
      out += d.toString();
      if (ready(out)) {
        clearTimeout(timer);
        clearInterval(poll);
        child.stdout.off("data", onData);
        child.stderr.off("data", onData);
        // Keep draining, so a full pipe never blocks it.
        child.stdout.on("data", (x: Buffer) => (out = (out + x.toString()).slice(-200_000)));
        child.stderr.on("data", (x: Buffer) => (out = (out + x.toString()).slice(-200_000)));
        resolve({ url: `http://127.0.0.1:${port}`, port, process: child, output: () => out, stop });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    // A tool that writes nothing through a pipe until it exits (rpc-server buffers its stdout): ready when its
    // port takes connections.
    poll = setInterval(() => {
      void listening(port).then((up) => {
        if (up && child.exitCode === null) {
          clearInterval(poll);
          out += "\n[port open]\n";
          onData(Buffer.from(""));
        }
      });
    }, 100);
    child.once("exit", () => clearInterval(poll));
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${binary} exited (${code ?? signal}) while starting:\n${out.slice(-3000)}`));
    });
  });
}

/**
 * A llama-server on loopback: `slots` parallel slots of `contextPerSlot` tokens each, one thread, the model
 * file given; `rpc`: host:port of rpc-server workers its layers go to (all of them: -ngl 99).
 */
export async function startLlamaServer(options: { model: string; slots?: number; contextPerSlot?: number; rpc?: string[]; apiKey?: string; port?: number }): Promise<Child> {
  const port = options.port ?? (await freePort());
  const slots = options.slots ?? 2;
  const args = [
    "-m", options.model,
    "--host", "127.0.0.1",
    "--port", String(port),
    "-np", String(slots),
    "-c", String(slots * (options.contextPerSlot ?? 4096)),
    "-t", "1",
    "-tb", "1",
    "--no-webui",
    // Our slots are leased by id: llama-server's own choice by similarity is not used.
    ...(options.rpc ? ["--rpc", options.rpc.join(","), "-ngl", "99"] : []),
    ...(options.apiKey ? ["--api-key", options.apiKey] : []),
  ];
  return launch(LLAMA_SERVER, args, port, (out) => /server is listening|listening on/i.test(out));
}

/** An rpc-server worker on loopback (a "machine" a model's layers can live on), one thread. */
export async function startRpcServer(): Promise<Child> {
  const port = await freePort();
  return launch(RPC_SERVER, ["-H", "127.0.0.1", "-p", String(port), "-t", "1"], port, (out) => out.includes("[port open]"));
}

/**
 * Runs another test file's tests unchanged on `svc serve --upstream` (the files start their servers with
 * startSvc, which adds serveDefaults.args): `replicas` llama-servers of `slots` slots each, their layers on
 * `rpcWorkers` rpc-server workers each when given. The servers start before the file's own beforeAll (this
 * hook is registered first) and stop after its afterAll. Skipped, with why, where the binaries are not built.
 */
export async function runOnUpstream(
  importTests: () => Promise<unknown>,
  options: { replicas?: number; slots?: number; contextPerSlot?: number; rpcWorkers?: number } = {},
): Promise<void> {
  const { describe, it, expect, beforeAll, afterAll, inject } = await import("vitest");
  const missing = upstreamMissing();
  // Skipped where llama.cpp's llama-server and ggml-rpc-server are not built in UPSTREAM_BIN (check: `ls
  // .cache/upstream/bin`; build: `npm run upstream:build`); on CI their absence fails in upstreamMissing.
  // The file's own tests are then not imported at all (they would run on the built-in engine).
  describe.skipIf(missing !== null)(`on an upstream llama-server${missing ? ` (skipped: ${missing})` : ""}`, () => {
    it("has llama-server and ggml-rpc-server to run on", () => expect([existsSync(LLAMA_SERVER), existsSync(RPC_SERVER)]).toEqual([true, true]));
  });
  if (missing) return;
  const children: Child[] = [];
  beforeAll(async () => {
    const urls: string[] = [];
    for (let r = 0; r < (options.replicas ?? 1); r++) {
      const workers: Child[] = [];
      for (let w = 0; w < (options.rpcWorkers ?? 0); w++) workers.push(await startRpcServer());
      children.push(...workers);
      const server = await startLlamaServer({
        model: inject("tinyModelPath"),
        slots: options.slots ?? 2,
        contextPerSlot: options.contextPerSlot ?? 4096,
        rpc: workers.length > 0 ? workers.map((w) => `127.0.0.1:${w.port}`) : undefined,
      });
      children.push(server);
      urls.push(server.url);
    }
    serveDefaults.args = ["--upstream", urls.join(",")];
    // Each server meets upstreams with empty caches, as each meets a fresh engine of its own locally (a file
    // that starts two servers would otherwise see the second served from the first one's prompt cache).
    serveDefaults.beforeStart = async () => {
      for (const url of urls)
        for (let slot = 0; slot < (options.slots ?? 2); slot++) {
          const res = await fetch(`${url}/slots/${slot}?action=erase`, { method: "POST" });
          await res.text();
        }
    };
  });
  afterAll(async () => {
    serveDefaults.args = [];
    serveDefaults.beforeStart = undefined;
    for (const child of children.reverse()) await child.stop();
  });
  await importTests();
}
