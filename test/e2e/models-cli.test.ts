// `svc models list / use / remove / bench-threads` through the real CLI (models-serve.test.ts covers a
// running server following the active model).
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { runSvc, tempDataDir } from "../support/svc-process.js";

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
