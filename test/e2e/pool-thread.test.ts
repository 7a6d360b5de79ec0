// The `svc` command gives the engine one libuv pool thread (server/engine/thread-policy.ts): what its log
// says, that a size the user set is kept (and brings back the lone-step thread split), and that answers
// are the same either way, for one stream and for two generating together with threads on every core; and
// that the threads back off while another process keeps a core busy.
import { spawn } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, statSync, truncateSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ALL_CORES_MIN_MODEL_BYTES, chooseThreads } from "../../server/engine/resource-plan.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

const cores = availableParallelism();
const servers: SvcServer[] = [];

async function start(env: NodeJS.ProcessEnv) {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  const server = await startSvc({
    model: inject("tinyModelPath"),
    dataDir,
    args: ["--sequences", "2", "--context-size", "2048"],
    env: { SVC_THREADS: String(cores), SVC_LOG_LEVEL: "info", ...env },
  });
  servers.push(server);
  return { server, openai: new OpenAI({ baseURL: `${server.url}/v1`, apiKey: key }) };
}

let onePool: Awaited<ReturnType<typeof start>>;
let fourPool: Awaited<ReturnType<typeof start>>;

beforeAll(async () => {
  onePool = await start({});
  fourPool = await start({ UV_THREADPOOL_SIZE: "4" });
});
afterAll(async () => {
  for (const server of servers) expect(await server.stop()).toBe(0);
});

const ask = (openai: OpenAI, content: string) =>
  openai.chat.completions
    .create({ model: "svc", messages: [{ role: "user", content }], reasoning_effort: "none", temperature: 0, max_tokens: 24 })
    .then((r) => r.choices[0]!.message.content);

describe("the engine's libuv pool", () => {
  it("is one thread unless UV_THREADPOOL_SIZE is set, and the log says so", () => {
    const loaded = (s: SvcServer) => s.output().split("\n").find((l) => l.includes("loaded on"))!;
    expect(loaded(onePool.server)).toContain(`${cores} thread(s)${cores > 1 ? ", fewer while other processes keep cores busy" : ""}, decoding on one libuv pool thread`);
    expect(loaded(onePool.server)).not.toContain("for a lone sequence's steps");
    expect(loaded(fourPool.server)).toContain("decoding on a libuv pool of 4 threads");
    if (cores > 1) expect(loaded(fourPool.server)).toContain(`${cores} thread(s) (${cores - 1} for a lone sequence's steps)`);
  });

  it("is followed by a word on `svc engine build` where the CPU runs the prebuilt binaries on Linux", async () => {
    const health = (await (await fetch(`${onePool.server.url}/health`)).json()) as { gpu: { backend: string; build: string } };
    const lines = onePool.server.output().split("\n");
    const hint = lines.findIndex((l) => l.includes("`svc engine build` compiles them on this machine"));
    if (health.gpu.backend === "cpu" && health.gpu.build === "prebuilt" && process.platform === "linux") {
      expect(lines[hint]).toContain("info: The CPU runs node-llama-cpp's prebuilt llama.cpp binaries.");
      expect(hint).toBe(lines.findIndex((l) => l.includes("loaded on")) + 1);
    } else expect(hint).toBe(-1);
  });

  it("gives the same greedy answers, alone and with two streams generating together", async () => {
    const prompts = ["Name three colors.", "Count from one to five."];
    const alone = await ask(onePool.openai, prompts[0]!);
    expect(alone).toBeTruthy();
    expect(await ask(fourPool.openai, prompts[0]!)).toBe(alone);
    const together = await Promise.all(prompts.map((p) => ask(onePool.openai, p)));
    expect(together).toEqual(await Promise.all(prompts.map((p) => ask(fourPool.openai, p))));
  });
});

describe("threads on every core, with another process busy", () => {
  it.skipIf(cores < 2)("decode with fewer threads while it keeps a core busy, and the debug log says so", async () => {
    const { server, openai } = await start({ SVC_LOG_LEVEL: "debug" });
    const spinner = spawn(process.execPath, ["-e", "for (;;);"], { stdio: "ignore" });
    try {
      const backedOff = () => /Other processes keep [\d.]+ of \d+ cores busy: decoding with (\d+) thread\(s\) instead of (\d+)\./.exec(server.output());
      // Generate until the cap shows (a quarter second's reading, taken while decodes run), for at most 20 s.
      const until = Date.now() + 20_000;
      while (!backedOff() && Date.now() < until) {
        await openai.chat.completions.create({ model: "svc", messages: [{ role: "user", content: "Tell a long story." }], reasoning_effort: "none", max_tokens: 200 });
      }
      const found = backedOff();
      expect(found, server.output().slice(-2000)).not.toBeNull();
      expect(Number(found![1])).toBeLessThan(cores);
      expect(Number(found![2])).toBe(cores);
    } finally {
      spinner.kill();
    }
  });
});

describe("the threads svc picks without --threads", () => {
  it("uses both cores of a 2-core machine for a model of real size, with one pool thread only", async () => {
    // The tiny test model padded past the size rule's bar (llama.cpp reads tensors by offset; the tail is never read).
    const dir = mkdtempSync(join(tmpdir(), "svc-test-threads-"));
    const padded = join(dir, "padded.gguf");
    copyFileSync(inject("tinyModelPath"), padded);
    truncateSync(padded, ALL_CORES_MIN_MODEL_BYTES + 1024 * 1024);
    const threadsOf = async (model: string, env: NodeJS.ProcessEnv) => {
      const server = await startSvc({ model, dataDir: tempDataDir(), autoThreads: true, env: { SVC_LOG_LEVEL: "info", ...env } });
      servers.push(server);
      const line = server.output().split("\n").find((l) => l.includes("loaded on"))!;
      return Number(/ (\d+) thread\(s\)/.exec(line)![1]);
    };
    try {
      const big = await threadsOf(padded, {});
      const tiny = await threadsOf(inject("tinyModelPath"), {});
      const bigOnFourPool = await threadsOf(padded, { UV_THREADPOOL_SIZE: "4" });
      expect([big, tiny, bigOnFourPool]).toEqual([
        chooseThreads({ cores, modelBytes: statSync(padded).size, poolThreads: 1 }),
        chooseThreads({ cores, modelBytes: statSync(inject("tinyModelPath")).size, poolThreads: 1 }),
        chooseThreads({ cores, modelBytes: statSync(padded).size, poolThreads: 4 }),
      ]);
      if (cores === 2) expect([big, tiny, bigOnFourPool]).toEqual([2, 1, 1]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
