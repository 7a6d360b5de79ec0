// Small pieces the benchmarks share.
import { spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { buildVocab } from "../resources/test-model/tiny-model.js";

/** The median of the samples (the upper one of the middle two for an even count). */
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * A JSON schema for a long answer of a fixed length on any model: an array of `items` integers, which the
 * grammar makes the model finish (about two tokens an item).
 */
export function fixedLengthSchema(items: number): Record<string, unknown> {
  return {
    type: "object",
    properties: { xs: { type: "array", items: { type: "integer" }, minItems: items, maxItems: items } },
    required: ["xs"],
  };
}

/** A process's resident memory, MiB (from /proc, else ps). */
export function rssMiB(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
  } catch {
    const ps = spawnSync("ps", ["-o", "rss=", "-p", String(pid)], { encoding: "utf8" });
    return Number(ps.stdout.trim()) / 1024;
  }
}

/** A free loopback port (the benches start their servers on one). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A pause before each measure of servers that take turns. svc caps its decodes' threads at the cores other
 * processes kept busy over its last quarter second (server/engine/thread-policy.ts CoreContention), and
 * forgets what it saw once a second passes without a decode. Measured straight after another server's turn,
 * svc saw that server's work as another process's load and ran its first quarter second or more on one
 * thread of two: bench:spec's draft workload, one stream, against llama-server with nothing between them, had
 * svc capped for most of each 0.2 s answer. A user's server does not follow another's turn.
 */
export async function settle(): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 1200));
}

/** Stops a server the bench started: SIGTERM, then SIGKILL after 10 s. */
export function stopProcess(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

const vocab = buildVocab();
const words = [...vocab.thoughtWords, ...vocab.answerWords].map((id) => vocab.tokens[id]!.replace("\u2581", " "));

/**
 * Text of about n tokens of the test vocabulary's words (bench:peer's and bench:spec's prompts). The
 * vocabulary has no merges below its whole words, so the tokenizer spells running text byte by byte: one
 * token per character.
 */
export function wordsText(n: number, seed: number): string {
  let x = seed >>> 0 || 1;
  let out = "";
  while (out.length < n) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out += words[(x >>> 0) % words.length];
  }
  return out.slice(0, n).trimStart();
}

/** The benches' --gpu: cpu, cuda or vulkan; a GPU backend needs a llama-server built with it (`peer`: one is run). */
export function gpuOption(value: string, llamaServer: string | undefined, peer = true): "cpu" | "cuda" | "vulkan" {
  if (value !== "cpu" && value !== "cuda" && value !== "vulkan") throw new Error(`--gpu takes cpu, cuda or vulkan, not ${value}`);
  if (value !== "cpu" && peer && !llamaServer) throw new Error(`--gpu ${value} needs --llama-server: a llama-server built with that backend`);
  return value;
}

export interface SvcHealth {
  gpu?: { build?: string | null; backend?: string; devices?: string[] } | null;
  model?: { gpu_layers?: number | null } | null;
}

/** svc's /health, and why it does not run the model on `gpu` with at least `minLayers` layers (null: it does, or `gpu` is cpu). */
export async function offloadCheck(url: string, headers: Record<string, string>, gpu: string, minLayers: number): Promise<{ health: SvcHealth; problem: string | null }> {
  const health = (await (await fetch(`${url}/health`, { headers })).json()) as SvcHealth;
  const layers = health.model?.gpu_layers ?? 0;
  const problem = gpu !== "cpu" && (health.gpu?.backend !== gpu || layers < minLayers) ? `did not load the model onto ${gpu}: backend ${health.gpu?.backend}, ${layers} layers offloaded` : null;
  return { health, problem };
}
