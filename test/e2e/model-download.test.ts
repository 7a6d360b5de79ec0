// `svc models pull` against a file server on loopback serving generated GGUF models: progress, resume after
// a cut connection, verification, hf: URIs, and what the user reads when the network is not there.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { ModelsService, type PullEvent } from "../../server/features/models/models-service.js";
import { Store } from "../../server/store/store.js";
import { startModelServer, type ModelServer } from "../support/model-server.js";
import { runSvc, runSvcAsync, SVC_BIN, tempDataDir } from "../support/svc-process.js";

const tiny = buildTinyModel({ seed: 11 });
// Large enough for three of the downloader's 5 MiB chunks, so a cut download has whole chunks to keep.
const big = buildTinyModel({ seed: 12, padBytes: 9_000_000 });
let server: ModelServer;
const dirs: string[] = [];

function dataDir(): string {
  const dir = tempDataDir();
  dirs.push(dir);
  return dir;
}

/** Files in the models folder and in its downloads folder (nothing else lives there). */
function leftovers(dir: string): { models: string[]; downloads: string[] } {
  const list = (path: string) => (existsSync(path) ? readdirSync(path).filter((f) => f !== ".downloads") : []);
  return { models: list(join(dir, "models")), downloads: list(join(dir, "models", ".downloads")) };
}

beforeAll(async () => {
  server = await startModelServer();
  server.files.set("/m/tiny.gguf", tiny);
  server.files.set("/m/big.gguf", big);
  server.files.set("/m/page.gguf", Buffer.from("<!doctype html><title>Sign in</title>"));
  server.files.set("/m/short.gguf", tiny);
  server.announceLength.set("/m/short.gguf", 2_000_000);
  server.files.set("/test/tiny-GGUF/resolve/main/tiny-Q8_0.gguf", tiny);
  server.manifests.set("test/tiny-GGUF:Q8_0", "tiny-Q8_0.gguf");
});

afterAll(async () => {
  await server.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("pull through the service (what the desktop app calls)", () => {
  it("reports progress (size, speed, ETA), verifies, keeps the file and makes it active; a second pull downloads nothing", async () => {
    const dir = dataDir();
    const store = Store.open(dir);
    try {
      const models = new ModelsService({ store, dataDir: dir });
      expect(await models.needsModel()).toBe(true); // what the desktop app asks on its first run
      expect(models.recommended().source).toBe("hf:Qwen/Qwen3-4B-GGUF:Q4_K_M");
      server.bytesPerSecond = 4_000_000; // about a second for the 3.6 MB file
      const events: PullEvent[] = [];
      const result = await models.pull(`${server.url}/m/tiny.gguf`, { onEvent: (e) => events.push(e) });
      server.bytesPerSecond = null;

      expect(result).toMatchObject({ file: "tiny.gguf", alreadyPresent: false, madeActive: true, resumedFromBytes: 0, sizeBytes: tiny.length });
      expect(result.summary).toMatchObject({ architecture: "llama", quantization: "F32", name: "svc tiny test model" });
      expect(readFileSync(join(dir, "models", "tiny.gguf")).equals(tiny)).toBe(true);

      const phases = events.map((e) => e.phase).filter((p, i, all) => p !== all[i - 1]);
      expect(phases).toEqual(["resolving", "downloading", "verifying", "done"]);
      const progress = events.flatMap((e) => (e.phase === "downloading" ? [e.progress] : []));
      expect(progress.length).toBeGreaterThan(3);
      expect(progress.every((p) => p.totalBytes === tiny.length)).toBe(true);
      for (let i = 1; i < progress.length; i++) expect(progress[i]!.downloadedBytes).toBeGreaterThanOrEqual(progress[i - 1]!.downloadedBytes);
      expect(progress.at(-1)!.downloadedBytes).toBe(tiny.length);
      const measured = progress.filter((p) => p.bytesPerSecond > 0 && p.etaSeconds !== null);
      expect(measured.length).toBeGreaterThan(0);
      // Throttled to 4 MB/s: the measured speed is of that order, not a bogus figure.
      expect(measured.at(-1)!.bytesPerSecond).toBeGreaterThan(400_000);
      expect(measured.at(-1)!.bytesPerSecond).toBeLessThan(40_000_000);

      expect(await models.needsModel()).toBe(false);
      const listing = await models.list();
      expect(listing.active).toBe("tiny.gguf");
      expect(listing.models).toEqual([
        expect.objectContaining({ file: "tiny.gguf", active: true, source: `${server.url}/m/tiny.gguf`, architecture: "llama", sizeBytes: tiny.length }),
      ]);
      expect(leftovers(dir).downloads).toEqual([]);

      const before = server.requests.length;
      const again = await models.pull(`${server.url}/m/tiny.gguf`);
      expect(again).toMatchObject({ alreadyPresent: true, madeActive: false });
      expect(server.requests.slice(before).filter((r) => r.range !== null)).toEqual([]);
    } finally {
      store.close();
    }
  });
});

describe("a download's first moments", () => {
  it("lists the announced size before ipull has written its first progress record", async () => {
    const dir = dataDir();
    const store = Store.open(dir);
    try {
      // What a pull leaves in the instant after it began: the empty partial file and its own record.
      mkdirSync(join(dir, "models", ".downloads"), { recursive: true });
      writeFileSync(join(dir, "models", ".downloads", "big.gguf.ipull"), "");
      store.modelFiles.upsert({ file: "big.gguf", source: `${server.url}/m/big.gguf`, state: "downloading", size_bytes: big.length, sha256: null, updated_at: Date.now() });
      const listing = await new ModelsService({ store, dataDir: dir }).list();
      expect(listing.partial).toEqual([expect.objectContaining({ file: "big.gguf", keptBytes: 0, totalBytes: big.length })]);
    } finally {
      store.close();
    }
  });
});

describe("svc models pull", () => {
  it("resumes an interrupted download: the second pull asks only for what is missing", async () => {
    const dir = dataDir();
    const url = `${server.url}/m/big.gguf`;
    server.cutAt = 11_500_000; // the connection drops here, and nothing beyond it is served
    const first = await runSvcAsync(["models", "pull", url, "--data-dir", dir], { SVC_DOWNLOAD_STALL_TIMEOUT: "2" });
    server.cutAt = null;
    expect(first.status).toBe(1);
    expect(first.stderr).toContain(`Downloading big.gguf (${(big.length / 1e6).toFixed(1)} MB)`);
    expect(first.stderr).toMatch(/svc: The download stopped: no data arrived for 2 s\..*run the same command again/);
    expect(server.requests.some((r) => r.cut)).toBe(true);
    expect(leftovers(dir)).toEqual({ models: [], downloads: ["big.gguf.ipull"] });
    const listed = runSvc(["models", "list", "--data-dir", dir]);
    expect(listed.stdout).toContain(`big.gguf`);
    expect(listed.stdout).toContain(`10.5 MB of 12.6 MB kept so far  (resume: svc models pull ${url})`);

    const mark = server.requests.length;
    const second = await runSvcAsync(["models", "pull", url, "--data-dir", dir]);
    expect(second.status).toBe(0);
    expect(second.stderr).toMatch(/Resuming: 10\.5 MB of 12\.6 MB already downloaded\./);
    expect(second.stdout).toMatch(/Downloaded big\.gguf \(12\.6 MB, llama F32\) in .*, resumed after 10\.5 MB\./);
    expect(readFileSync(join(dir, "models", "big.gguf")).equals(big)).toBe(true);
    expect(leftovers(dir)).toEqual({ models: ["big.gguf"], downloads: [] });

    const ranged = server.requests.slice(mark).filter((r) => r.path === "/m/big.gguf" && r.range !== null);
    expect(ranged.length).toBeGreaterThan(0);
    expect(ranged.every((r) => r.start >= 10 * 1024 * 1024)).toBe(true);
    expect(ranged.reduce((n, r) => n + r.bytesSent, 0)).toBeLessThan(big.length / 2);
  });

  it("Ctrl+C stops a download with exit code 130, keeping it for the next pull", async () => {
    const dir = dataDir();
    const url = `${server.url}/m/big.gguf`;
    server.bytesPerSecond = 3_000_000; // a few seconds for the whole file
    try {
      const child = spawn(process.execPath, [SVC_BIN, "models", "pull", url, "--data-dir", dir], { stdio: ["ignore", "pipe", "pipe"] });
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
      // Once a first 5 MiB piece is complete there is something to keep.
      while (!/  [5-9]\d%|Resuming/.test(stderr)) {
        if (child.exitCode !== null) throw new Error(`pull ended early: ${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      child.kill("SIGINT");
      expect(await exited).toBe(130);
      expect(stderr).toMatch(/svc: Download stopped; [\d.]+ MB of 12\.6 MB are kept\. Run the same command again to resume from there\./);
      expect(leftovers(dir).models).toEqual([]);
      expect(leftovers(dir).downloads).toContain("big.gguf.ipull");
    } finally {
      server.bytesPerSecond = null;
    }
    const resumed = await runSvcAsync(["models", "pull", url, "--data-dir", dir]);
    expect(resumed.status).toBe(0);
    expect(resumed.stderr).toMatch(/Resuming: [\d.]+ MB of 12\.6 MB already downloaded\./);
    expect(readFileSync(join(dir, "models", "big.gguf")).equals(big)).toBe(true);
  });

  it("refuses a download that is not a GGUF model, and leaves nothing behind", async () => {
    const dir = dataDir();
    const result = await runSvcAsync(["models", "pull", `${server.url}/m/page.gguf`, "--data-dir", dir]);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/svc: The download from .*page\.gguf is not a usable model: page\.gguf is not a GGUF model file\. The file was deleted\./);
    expect(leftovers(dir)).toEqual({ models: [], downloads: [] });
    expect(runSvc(["models", "list", "--data-dir", dir]).stdout).toContain("No models in");
  });

  it("refuses a file cut short even when the server announces the short length", async () => {
    const dir = dataDir();
    const result = await runSvcAsync(["models", "pull", `${server.url}/m/short.gguf`, "--data-dir", dir]);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/short\.gguf is incomplete: its header lists \d+ bytes of model data but the file has 2000000\. The file was deleted\./);
    expect(leftovers(dir)).toEqual({ models: [], downloads: [] });
  });

  it("checks --sha256: a mismatch deletes the file, the right hash keeps it", async () => {
    const dir = dataDir();
    const wrong = "0".repeat(64);
    const bad = await runSvcAsync(["models", "pull", `${server.url}/m/tiny.gguf`, "--sha256", wrong, "--data-dir", dir]);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain(`not the expected ${wrong}. The file was deleted.`);
    expect(leftovers(dir)).toEqual({ models: [], downloads: [] });

    const { createHash } = await import("node:crypto");
    const right = createHash("sha256").update(tiny).digest("hex");
    const good = await runSvcAsync(["models", "pull", `${server.url}/m/tiny.gguf`, "--sha256", right.toUpperCase(), "--data-dir", dir]);
    expect(good.status).toBe(0);
    expect(good.stdout).toContain("It is now the active model");
    expect(leftovers(dir).models).toEqual(["tiny.gguf"]);
  });

  it("resolves hf: URIs through the Hugging Face endpoint (HF_ENDPOINT), by quantisation or by file", async () => {
    const dir = dataDir();
    const env = { HF_ENDPOINT: `${server.url}/` };
    const byQuant = await runSvcAsync(["models", "pull", "hf:test/tiny-GGUF:Q8_0", "--data-dir", dir], env);
    expect(byQuant.status).toBe(0);
    expect(byQuant.stdout).toContain("Downloaded hf_test_tiny.Q8_0.gguf");
    expect(server.requests.some((r) => r.path === "/v2/test/tiny-GGUF/manifests/Q8_0")).toBe(true);
    const byFile = await runSvcAsync(["models", "pull", "hf:test/tiny-GGUF/tiny-Q8_0.gguf", "--data-dir", dir], env);
    expect(byFile.status).toBe(0);
    expect(byFile.stdout).toContain("Downloaded hf_test_tiny-Q8_0.gguf");
    expect(byFile.stdout).toContain("svc models use hf_test_tiny-Q8_0.gguf");
    const missing = await runSvcAsync(["models", "pull", "hf:test/tiny-GGUF:Q2_K", "--data-dir", dir], env);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain("svc: hf:test/tiny-GGUF:Q2_K was not found on Hugging Face");
    expect(leftovers(dir).models.sort()).toEqual(["hf_test_tiny-Q8_0.gguf", "hf_test_tiny.Q8_0.gguf"]);
  });

  it("says clearly when the network or the file is not there", async () => {
    const dir = dataDir();
    const closed = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const refused = await runSvcAsync(["models", "pull", `http://127.0.0.1:${closed}/m.gguf`, "--data-dir", dir]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain(`svc: Cannot reach 127.0.0.1:${closed}: the connection was refused. Check the network connection`);

    // The recommended model, from a Hugging Face endpoint whose name cannot resolve (.invalid never does).
    const offline = await runSvcAsync(["models", "pull", "--data-dir", dir], { HF_ENDPOINT: "https://hf.invalid/" });
    expect(offline.status).toBe(1);
    expect(offline.stderr).toContain("Resolving hf:Qwen/Qwen3-4B-GGUF:Q4_K_M");
    expect(offline.stderr).toMatch(/svc: Cannot reach hf\.invalid: its name (does not resolve|could not be looked up)/);

    const notFound = await runSvcAsync(["models", "pull", `${server.url}/m/nothing.gguf`, "--data-dir", dir]);
    expect(notFound.status).toBe(1);
    expect(notFound.stderr).toContain("was not found: 127.0.0.1");
    expect(notFound.stderr).toContain("answered HTTP 404");

    const nonsense = await runSvcAsync(["models", "pull", "ftp://example.com/m.gguf", "--data-dir", dir]);
    expect(nonsense.status).toBe(1);
    expect(nonsense.stderr).toContain("is not a model source");
    expect(leftovers(dir)).toEqual({ models: [], downloads: [] });
  });
});
