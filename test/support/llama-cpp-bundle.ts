// The llama.cpp source node-llama-cpp ships (llama/gitRelease.bundle), read from the bundle itself: a fresh
// install has no unpacked source (node-llama-cpp, or `svc engine build`, unpacks it for a build), and the
// unpacked files are these (its own patch touches another file).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nodeLlamaCppDirectory } from "../../server/engine/engine-build.js";

let clone: string | null = null;

/** A file of the shipped llama.cpp source, by its path in llama.cpp (e.g. `ggml/src/ggml.c`). */
export function llamaCppBundleFile(path: string): Buffer {
  if (clone === null) {
    clone = mkdtempSync(join(tmpdir(), "svc-llama-cpp-"));
    // --no-checkout: the history only (a second or so), no working tree.
    execFileSync("git", ["clone", "--quiet", "--no-checkout", join(nodeLlamaCppDirectory(), "llama", "gitRelease.bundle"), clone]);
  }
  return execFileSync("git", ["-C", clone, "show", `HEAD:${path}`], { maxBuffer: 64 * 1024 * 1024 });
}

/** Removes the clone llamaCppBundleFile made (call from afterAll). */
export function removeLlamaCppBundleClone(): void {
  if (clone !== null) rmSync(clone, { recursive: true, force: true });
  clone = null;
}
