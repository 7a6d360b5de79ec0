// On Linux on the CPU `svc serve` reads the model into its own memory and puts it in transparent huge
// pages (server/engine/huge-pages.ts); `--mmap on` maps the file as before. Seen from outside the server:
// its log, its /proc/PID/maps (the model file mapped or not), its AnonHugePages, and the same answers.
import { readFileSync } from "node:fs";
import { release } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensurePeerModel } from "../../bench/peer-model.js";
import { transparentHugePageMode } from "../../server/engine/huge-pages.js";
import { createKey, enginePid, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

const linux = process.platform === "linux";
const MiB = 1024 ** 2;
// About 28 MB of F32 weights: two layers of the bench's shape, large enough for several huge pages.
const modelPath = ensurePeerModel(join(tempDataDir(), "two-layers.gguf"), { nEmbd: 512, nLayers: 2, nHead: 8, nFf: 1536, contextLength: 4096, seed: 7 });
const servers: SvcServer[] = [];

async function start(args: string[]) {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  const server = await startSvc({
    model: modelPath,
    dataDir,
    args: ["--gpu", "cpu", "--sequences", "1", "--context-size", "1024", ...args],
    // SVC_MMAP empty: the default (auto), whatever the environment running the tests says.
    env: { SVC_LOG_LEVEL: "info", SVC_MMAP: "" },
  });
  servers.push(server);
  return { server, openai: new OpenAI({ baseURL: `${server.url}/v1`, apiKey: key }) };
}

// The weights are in the engine process (the server's child), not the server's own.
const proc = (server: SvcServer, file: string) => readFileSync(`/proc/${enginePid(server)}/${file}`, "utf8");
const ask = (openai: OpenAI) =>
  openai.chat.completions
    .create({ model: "svc", messages: [{ role: "user", content: "Count to five." }], reasoning_effort: "none", temperature: 0, max_tokens: 32 })
    .then((r) => r.choices[0]!.message.content);

describe.runIf(linux)("the model's weights on the CPU (Linux)", () => {
  let inMemory: Awaited<ReturnType<typeof start>>;
  let mapped: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    inMemory = await start([]);
    mapped = await start(["--mmap", "on"]);
  });
  afterAll(async () => {
    for (const server of servers) expect(await server.stop()).toBe(0);
  });

  const thp = transparentHugePageMode();
  const hugePages = thp === "madvise" || thp === "always";

  it("are read into memory by default where there are transparent huge pages (mapped where not), and the log says so", () => {
    if (!hugePages) {
      console.warn(`transparent huge pages are ${thp ?? "absent"} here: the default maps the file`);
      expect(proc(inMemory.server, "maps")).toContain(modelPath);
      expect(inMemory.server.output()).not.toContain("Model read into memory");
      return;
    }
    expect(proc(inMemory.server, "maps")).not.toContain(modelPath);
    expect(inMemory.server.output()).toMatch(/info: Model read into memory(, \d+ MiB of it in huge pages)? \(--mmap on maps the file instead\)\./);
  });

  it("are in huge pages where the system has transparent huge pages", () => {
    const line = /Model read into memory, (\d+) MiB of it in huge pages/.exec(inMemory.server.output());
    if (!hugePages) return;
    const [major = 0, minor = 0] = release().split(".").map(Number);
    if (major < 6 || (major === 6 && minor < 1)) {
      console.warn(`Linux ${release()} has no MADV_COLLAPSE (6.1): the weights reach huge pages later, through khugepaged`);
      return;
    }
    // MADV_COLLAPSE (Linux 6.1) moves the weights into huge pages at once; the model is about 28 MB, of which
    // 24 MiB or more fill whole huge pages wherever its buffer starts. (What the log counts may also hold
    // memory next to the weights that the load freed again later: the server's AnonHugePages are checked
    // against the model, not against the log.)
    expect(line, inMemory.server.output()).not.toBeNull();
    expect(Number(line![1]) * MiB).toBeGreaterThanOrEqual(24 * MiB);
    const huge = Number(/^AnonHugePages:\s+(\d+) kB/m.exec(proc(inMemory.server, "smaps_rollup"))![1]) * 1024;
    expect(huge).toBeGreaterThanOrEqual(24 * MiB);
  });

  it("are mapped from the file with --mmap on, and answer the same", async () => {
    expect(proc(mapped.server, "maps")).toContain(modelPath);
    expect(mapped.server.output()).not.toContain("Model read into memory");
    const [a, b] = await Promise.all([ask(inMemory.openai), ask(mapped.openai)]);
    expect(a).toBeTruthy();
    expect(a).toBe(b);
  });
});

describe.skipIf(linux)("the model's weights (not Linux)", () => {
  it("skip: reading the weights into huge pages is Linux only", () => {
    console.warn("skipped: reading the weights into huge pages is Linux only");
  });
});
