// The layer rules (.dependency-cruiser.cjs) hold on the real tree, and each rule really catches what it
// forbids: a throwaway tree with one violation per rule must fail with every rule named.
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "../support/svc-process.js";

const DEPCRUISE = join(ROOT, "node_modules", "dependency-cruiser", "bin", "dependency-cruise.mjs");
const CONFIG = join(ROOT, ".dependency-cruiser.cjs");

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

function cruise(cwd: string, paths: string[]): Violation[] {
  const result = spawnSync(process.execPath, [DEPCRUISE, ...paths, "--config", CONFIG, "--output-type", "json"], { cwd, encoding: "utf8" });
  const report = JSON.parse(result.stdout) as { summary: { violations: Violation[] } };
  return report.summary.violations;
}

/** What `npm run lint:layers` runs: its exit status is the number of errors. */
function lintStatus(cwd: string, paths: string[]): number | null {
  return spawnSync(process.execPath, [DEPCRUISE, ...paths, "--config", CONFIG, "--output-type", "err"], { cwd, encoding: "utf8" }).status;
}

const scratch: string[] = [];
afterAll(() => scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

describe("layer rules", () => {
  it("hold on the project's own code", () => {
    expect(cruise(ROOT, ["server", "main", "renderer/src"])).toEqual([]);
  });

  it("catch each forbidden import", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-layers-"));
    scratch.push(dir);
    symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
    cpSync(join(ROOT, "tsconfig.base.json"), join(dir, "tsconfig.base.json"));
    const files: Record<string, string> = {
      "server/engine/engine.ts": 'export const engine = 1;\n',
      "server/store/store.ts": 'import Database from "better-sqlite3";\nexport const store = Database;\n',
      "server/core/bad.ts": 'import { engine } from "../engine/engine.js";\nexport const x = engine;\n',
      "server/pipeline/bad.ts": 'import { getLlama } from "node-llama-cpp";\nexport const y = getLlama;\n',
      "server/features/bad.ts": 'import Database from "better-sqlite3";\nexport const z = Database;\n',
      "server/surfaces/chat/bad.ts": 'import { m } from "../messages/codec.js";\nexport const c = m;\n',
      "server/surfaces/messages/codec.ts": 'export const m = 1;\n',
      "server/http/bad.ts": 'import { app } from "electron";\nimport { w } from "../../renderer/window.js";\nexport const h = [app, w];\n',
      "server/features/console/contract.ts": 'export interface Api { ping(): void }\nexport const value = 1;\n',
      "renderer/window.ts": 'import { value } from "../server/features/console/contract.js";\nimport { engine } from "../server/engine/engine.js";\nexport const w = [value, engine];\n',
      "renderer/types-ok.ts": 'import type { Api } from "../server/features/console/contract.js";\nexport type A = Api;\n',
      // The direction root → features → surfaces → http → pipeline → engine/store/ingest → core: one import
      // against it per rule, a circle, and a layer importing the composition root.
      "server/index.ts": 'export const root = 1;\n',
      "server/features/root-user.ts": 'import { root } from "../index.js";\nexport const r = root;\n',
      "server/surfaces/feature-user.ts": 'import { z } from "../features/bad.js";\nexport const f = z;\n',
      "server/http/surface-user.ts": 'import { m } from "../surfaces/messages/codec.js";\nexport const s = m;\n',
      "server/http/helper.ts": 'export const helper = 1;\n',
      "server/pipeline/http-user.ts": 'import { helper } from "../http/helper.js";\nexport const h = helper;\n',
      "server/engine/pipeline-user.ts": 'import { y } from "../pipeline/bad.js";\nexport const p = y;\n',
      "server/engine/llama-engine.ts": 'export const detectGpu = 1;\n',
      "server/features/models/gpu.ts": 'import { detectGpu } from "../../engine/llama-engine.js";\nexport const g = detectGpu;\n',
      "server/ingest/ring-a.ts": 'import type { B } from "./ring-b.js";\nexport type A = { b?: B };\n',
      "server/ingest/ring-b.ts": 'import type { A } from "./ring-a.js";\nexport type B = { a?: A };\n',
    };
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const violations = cruise(dir, ["server", "renderer"]);
    // A circle counts once, however many modules it passes through.
    expect(lintStatus(dir, ["server", "renderer"])).toBe(15);
    const caught = new Set(violations.map((v) => `${v.rule.name} ${v.from}`));
    expect([...caught].sort()).toEqual(
      [
        "better-sqlite3-only-in-store server/features/bad.ts",
        "core-imports-nothing server/core/bad.ts",
        "electron-only-in-main server/http/bad.ts",
        "features-above-surfaces server/surfaces/feature-user.ts",
        "features-reach-the-engine-through-its-host server/features/models/gpu.ts",
        "http-above-pipeline server/pipeline/http-user.ts",
        "no-circular server/ingest/ring-a.ts",
        "nothing-imports-the-composition-root server/features/root-user.ts",
        "pipeline-above-engine-store-ingest server/engine/pipeline-user.ts",
        "surfaces-above-http server/http/surface-user.ts",
        "node-llama-cpp-only-in-engine server/pipeline/bad.ts",
        "renderer-contract-types-only renderer/window.ts",
        "renderer-only-ipc-contract renderer/window.ts",
        "server-never-imports-main-or-renderer server/http/bad.ts",
        "surfaces-never-import-each-other server/surfaces/chat/bad.ts",
      ].sort(),
    );
  });
});
