// `svc models list / use / remove` through the real CLI, and a real `svc serve` that loads the active model
// and follows it when `svc models use` changes it from another process.
import { mkdirSync, rmSync, unlinkSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { buildTinyModel, greedyTexts } from "../../resources/test-model/tiny-model.js";
import { createKey, runSvc, startSvc, tempDataDir } from "../support/svc-process.js";

const SEED_A = 101;
const SEED_B = 202;
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A data dir whose models folder holds a.gguf and b.gguf (two tiny models that answer differently). */
function dataDirWithModels(): string {
  const dir = tempDataDir();
  dirs.push(dir);
  mkdirSync(join(dir, "models"), { recursive: true });
  writeFileSync(join(dir, "models", "a.gguf"), buildTinyModel({ seed: SEED_A }));
  writeFileSync(join(dir, "models", "b.gguf"), buildTinyModel({ seed: SEED_B }));
  return dir;
}

async function ask(url: string, key: string): Promise<{ status: number; content?: string }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], reasoning_effort: "none", temperature: 0 }),
  });
  const body = (await res.json()) as { choices?: Array<{ message: { content: string } }> };
  return { status: res.status, content: body.choices?.[0]?.message.content };
}

async function health(url: string): Promise<{ model: { state: string; file: string | null; error: string | null } }> {
  return (await (await fetch(`${url}/health`)).json()) as { model: { state: string; file: string | null; error: string | null } };
}

async function waitFor<T>(probe: () => Promise<T>, ok: (value: T) => boolean, what: string, ms = 30_000): Promise<T> {
  const until = Date.now() + ms;
  let last: T = await probe();
  while (!ok(last)) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 100));
    last = await probe();
  }
  return last;
}

describe("svc models list / use / remove", () => {
  it("lists models with their GGUF metadata, marks the active one, and removes them", () => {
    const dir = dataDirWithModels();
    writeFileSync(join(dir, "models", "notes.gguf"), "this is not a model");

    const empty = runSvc(["models", "list", "--data-dir", dir]);
    expect(empty.status).toBe(0);
    expect(empty.stdout).toMatch(/^  a\.gguf +3\.60 MB  llama F32  "svc tiny test model"$/m);
    expect(empty.stdout).toMatch(/^  notes\.gguf .*is not a GGUF model file\.$/m);
    expect(empty.stdout).toContain("No active model: choose one with `svc models use FILE`.");

    const used = runSvc(["models", "use", "a", "--data-dir", dir]);
    expect(used.status).toBe(0);
    expect(used.stdout).toContain("Active model: a.gguf (3.60 MB, llama F32");
    const listed = runSvc(["models", "list", "--data-dir", dir, "--json"]);
    const json = JSON.parse(listed.stdout) as { active: string; models: Array<{ file: string; active: boolean; architecture: string | null; error: string | null }> };
    expect(json.active).toBe("a.gguf");
    expect(json.models.map((m) => [m.file, m.active])).toEqual([
      ["a.gguf", true],
      ["b.gguf", false],
      ["notes.gguf", false],
    ]);
    expect(json.models[2]!.error).toContain("not a GGUF");
    expect(runSvc(["models", "list", "--data-dir", dir]).stdout).toMatch(/^\* a\.gguf/m);

    const junk = runSvc(["models", "use", "notes.gguf", "--data-dir", dir]);
    expect(junk.status).toBe(1);
    expect(junk.stderr).toContain("is not a GGUF model file");
    const missing = runSvc(["models", "use", "zzz", "--data-dir", dir]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain("No model named 'zzz'");
    expect(runSvc(["models", "use", "--data-dir", dir]).status).toBe(2);

    const activeRemoval = runSvc(["models", "remove", "a.gguf", "--data-dir", dir]);
    expect(activeRemoval.status).toBe(1);
    expect(activeRemoval.stderr).toContain("a.gguf is the active model");
    expect(existsSync(join(dir, "models", "a.gguf"))).toBe(true);

    const removed = runSvc(["models", "remove", "b", "--data-dir", dir]);
    expect(removed.status).toBe(0);
    expect(removed.stdout).toContain("Removed b.gguf.");
    expect(existsSync(join(dir, "models", "b.gguf"))).toBe(false);
    expect(runSvc(["models", "remove", "b", "--data-dir", dir]).status).toBe(1);
    expect(runSvc(["models", "remove", "../svc.sqlite3", "--data-dir", dir]).status).toBe(1);
    expect(existsSync(join(dir, "svc.sqlite3"))).toBe(true);

    const forced = runSvc(["models", "remove", "a", "--force"], { SVC_DATA_DIR: dir });
    expect(forced.status).toBe(0);
    expect(forced.stdout).toContain("It was the active model");
    const after = runSvc(["models", "list", "--data-dir", dir, "--json"]);
    expect(JSON.parse(after.stdout)).toMatchObject({ active: null, models: [{ file: "notes.gguf" }] });
  });

  it("accepts a model file outside the models folder by path", () => {
    const dir = dataDirWithModels();
    const outside = join(dir, "elsewhere.gguf");
    writeFileSync(outside, buildTinyModel({ seed: SEED_A }));
    expect(runSvc(["models", "use", outside, "--data-dir", dir]).status).toBe(0);
    const json = JSON.parse(runSvc(["models", "list", "--data-dir", dir, "--json"]).stdout) as { active: string; models: Array<{ file: string; active: boolean }> };
    expect(json.active).toBe(outside);
    expect(json.models.find((m) => m.active)?.file).toBe(outside);
  });
});

describe("svc models bench-threads", () => {
  it("measures generation speed per thread count and names the fastest", () => {
    const dir = dataDirWithModels();
    const result = runSvc(["models", "bench-threads", "--model", "a", "--threads", "1", "--tokens", "16", "--data-dir", dir]);
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^ +1 thread\(s\): +\d+\.\d tokens\/s generating, +\d+ tokens\/s reading the prompt/m);
    expect(result.stdout).toContain("Fastest: 1 thread(s). Start the server with --threads 1");
    const bad = runSvc(["models", "bench-threads", "--threads", "0", "--data-dir", dir]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("--threads takes a list of counts");
  });
});

describe("svc serve and the active model", () => {
  it("loads the active model, switches when `svc models use` changes it, and reloads on SIGHUP", async () => {
    const dir = dataDirWithModels();
    expect(runSvc(["models", "use", "a.gguf", "--data-dir", dir]).status).toBe(0);
    const server = await startSvc({ dataDir: dir, args: ["--context-size", "2048", "--sequences", "1"], env: { SVC_LOG_LEVEL: "info" } });
    try {
      const key = createKey(dir);
      expect((await health(server.url)).model).toMatchObject({ state: "ready", file: "a.gguf" });
      expect(await ask(server.url, key)).toEqual({ status: 200, content: greedyTexts(SEED_A).answer.trim() });

      // Another process changes the setting; the running server follows within a few seconds.
      expect(runSvc(["models", "use", "b", "--data-dir", dir]).status).toBe(0);
      await waitFor(() => health(server.url), (h) => h.model.state === "ready" && h.model.file === "b.gguf", "the switch to b.gguf");
      expect(await ask(server.url, key)).toEqual({ status: 200, content: greedyTexts(SEED_B).answer.trim() });

      // A model that cannot load: the server keeps b and says so; the setting goes back to b.
      writeFileSync(join(dir, "models", "c.gguf"), buildTinyModel({ seed: 303 }).subarray(0, 1_000_000));
      expect(runSvc(["models", "use", "c", "--data-dir", dir]).status).toBe(0);
      const failed = await waitFor(() => health(server.url), (h) => h.model.error !== null, "the failed switch to be reported");
      expect(failed.model).toMatchObject({ state: "ready", file: "b.gguf" });
      expect(failed.model.error).toContain("c.gguf");
      expect(await ask(server.url, key)).toEqual({ status: 200, content: greedyTexts(SEED_B).answer.trim() });
      expect(JSON.parse(runSvc(["models", "list", "--data-dir", dir, "--json"]).stdout).active).toBe("b.gguf");

      server.process.kill("SIGHUP");
      await waitFor(async () => server.output(), (out) => out.includes("SIGHUP: reloading the model."), "the SIGHUP log line");
      await waitFor(() => health(server.url), (h) => h.model.state === "ready" && h.model.error === null, "the reload");
      expect(await ask(server.url, key)).toEqual({ status: 200, content: greedyTexts(SEED_B).answer.trim() });
      expect(server.process.exitCode).toBeNull();
    } finally {
      expect(await server.stop("SIGTERM")).toBe(0);
    }
  });

  it("starts without its active model when that file is gone, says why, and recovers with `svc models use`", async () => {
    const dir = dataDirWithModels();
    expect(runSvc(["models", "use", "a.gguf", "--data-dir", dir]).status).toBe(0);
    unlinkSync(join(dir, "models", "a.gguf"));
    const server = await startSvc({ dataDir: dir, args: ["--context-size", "2048", "--sequences", "1"] });
    try {
      const key = createKey(dir);
      const state = await health(server.url);
      expect(state.model.state).toBe("error");
      expect(state.model.error).toContain("a.gguf");
      const refused = await ask(server.url, key);
      expect(refused.status).toBe(503);
      expect(runSvc(["models", "use", "b.gguf", "--data-dir", dir]).status).toBe(0);
      await waitFor(() => health(server.url), (h) => h.model.state === "ready" && h.model.file === "b.gguf", "b.gguf to load");
      expect(await ask(server.url, key)).toEqual({ status: 200, content: greedyTexts(SEED_B).answer.trim() });
    } finally {
      expect(await server.stop("SIGTERM")).toBe(0);
    }
  });
});
