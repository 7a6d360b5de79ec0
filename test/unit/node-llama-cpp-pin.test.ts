// node-llama-cpp is pinned to one exact version: our patches (resources/engine-patches/) and the engine's reads
// of its internals are made for it, so a new version comes in only on purpose (docs/configuration.md, "The
// engine's CPU binaries", says how to upgrade).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { expect, it } from "vitest";
import { nodeLlamaCppDirectory } from "../../server/engine/engine-build.js";

const ROOT = join(import.meta.dirname, "..", "..");

it("is pinned to an exact version, and that version is the one installed", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  const pinned = pkg.dependencies["node-llama-cpp"]!;
  expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
  const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, { version?: string; dependencies?: Record<string, string> }> };
  expect(lock.packages[""]!.dependencies!["node-llama-cpp"]).toBe(pinned);
  expect(lock.packages["node_modules/node-llama-cpp"]!.version).toBe(pinned);
  const installed = JSON.parse(readFileSync(join(nodeLlamaCppDirectory(), "package.json"), "utf8")) as { version: string };
  expect(installed.version).toBe(pinned);
  // The server resolves the same copy.
  expect(createRequire(join(ROOT, "server", "engine", "x.js")).resolve("node-llama-cpp")).toContain(nodeLlamaCppDirectory());
});
