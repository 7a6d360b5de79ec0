// `svc engine build`: node-llama-cpp's CPU binaries compiled again on this machine, from the llama.cpp
// source node-llama-cpp ships, the way its own releases are built (a library per x64 CPU family, the one
// for this CPU chosen at load; no OpenMP; no -march=native), with this machine's compiler.
//
// Why: the prebuilt binaries come from an older compiler (GCC 11.4), and their matrix code is slower.
// Measured on a 2-core Zen 4 (docs/performance.md): prompt evaluation 0.75 of llama-server's speed with the
// prebuilt binaries, 1.43 with this build from GCC 12.2 (threads 1; 0.82 and 1.29 with 2).
// Built portable on purpose: the folder can be copied to another machine of the same OS, and the server's
// thread policy (thread-policy.ts) holds for it as for the prebuilt (no OpenMP).
//
// The server prefers this build for the CPU when it exists (`loadEngineBuild`, tried before the prebuilt
// binaries); GPU backends keep their prebuilt binaries.
//
// The build also compiles in changes of ours to node-llama-cpp's addon (resources/engine-patches/, applied
// to its source for the build and taken out again after): a thread pool kept for each context's life instead
// of threads started and joined for every decode (docs/performance.md, section 13), a lone generation's
// tokens decoded and sampled on a thread of the addon's own (section 14; step-loop.ts `solo`), and the
// tokens of a step of several sequences sampled in the job that decodes it (section 17; step-loop.ts `dispatch`);
// and one to llama.cpp's matrix code: a step of 2 to 6 sequences multiplies each weight row by all of their
// tokens in one pass (F32/F16/BF16 and Q8_0/Q4_0/Q5_0/IQ4_NL weights on x86; section 21).
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { readdir, readFile, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { getLlama, LlamaLogLevel, NoBinaryFoundError, type Llama, type LlamaOptions } from "node-llama-cpp";
import { packageRoot } from "../core/version.js";

/**
 * Our patches to node-llama-cpp's source (its addon, and the llama.cpp it ships: sgemm-few-columns), in the
 * order they apply (resources/engine-patches/NAME.patch).
 */
export const ADDON_PATCHES: readonly string[] = Object.freeze(["persistent-threadpool", "solo-loop-2", "step-sampling", "sgemm-few-columns"]);

/**
 * The CMake options of node-llama-cpp's release builds for x64 and arm64 Linux, set explicitly, and the
 * patches compiled in. CMake ignores `SVC_ADDON_PATCHES`; node-llama-cpp names a build's folder after its
 * options, so a build with other patches is another build.
 */
export const ENGINE_BUILD_OPTIONS: Readonly<Record<string, string>> = Object.freeze({
  GGML_NATIVE: "OFF",
  GGML_OPENMP: "OFF",
  GGML_BACKEND_DL: "ON",
  GGML_CPU_ALL_VARIANTS: "ON",
  SVC_ADDON_PATCHES: ADDON_PATCHES.join(","),
});

/** node-llama-cpp's package folder (its addon source is in llama/addon, its local builds in llama/localBuilds). */
export function nodeLlamaCppDirectory(): string {
  const entry = createRequire(import.meta.url).resolve("node-llama-cpp");
  return join(dirname(entry), "..");
}

/** Where node-llama-cpp keeps builds made on this machine (inside its own package folder). */
export function localBuildsDirectory(): string {
  return join(nodeLlamaCppDirectory(), "llama", "localBuilds");
}

/** resources/engine-patches in the svc-desktop package. */
export function enginePatchesDirectory(): string {
  const root = packageRoot();
  const dir = root === null ? null : join(root, "resources", "engine-patches");
  if (dir === null || !existsSync(dir)) throw new Error("resources/engine-patches not found beside the server's files");
  return dir;
}

/**
 * Where node-llama-cpp builds llama.cpp from: the source it ships as a git bundle (llama/gitRelease.bundle),
 * unpacked by its first build. A fresh install has only the bundle.
 */
export function llamaCppSourceDirectory(): string {
  return join(nodeLlamaCppDirectory(), "llama", "llama.cpp");
}

/**
 * Unpacks the llama.cpp source from node-llama-cpp's bundle (offline) unless it is there, so that our patch
 * to it can apply before the build: node-llama-cpp would unpack it only inside the build, and it unpacks it
 * again (over a patched file) when its info file is missing, so both are checked as it checks them.
 */
export async function ensureLlamaCppSource(): Promise<void> {
  if (existsSync(join(llamaCppSourceDirectory(), ".git")) && existsSync(join(nodeLlamaCppDirectory(), "llama", "llama.cpp.info.json"))) return;
  const { DownloadLlamaCppCommand } = await import("node-llama-cpp/commands");
  // It reports on stdout; the build's progress goes to stderr.
  const log = console.log;
  console.log = console.error;
  try {
    await DownloadLlamaCppCommand({ skipBuild: true, noUsageExample: true });
  } finally {
    console.log = log;
  }
  if (!existsSync(join(llamaCppSourceDirectory(), ".git"))) throw new Error(`node-llama-cpp did not unpack the llama.cpp source to ${llamaCppSourceDirectory()}`);
}

/** The files a unified diff changes, relative to the folder it applies to (its `+++ b/...` lines, -p1). */
export function patchedFiles(patch: string): string[] {
  return [...patch.matchAll(/^\+\+\+ [^/\s]+\/(\S+)/gm)].map((m) => m[1]!);
}

/**
 * Applies ADDON_PATCHES to node-llama-cpp's source in `packageDir` and returns what puts the files back as
 * they were. Throws, naming the patch, when one does not apply (another node-llama-cpp version than the one
 * they were written for: 3.22.1), after putting back what it had changed.
 */
export function applyAddonPatches(packageDir: string = nodeLlamaCppDirectory(), patchesDir: string = enginePatchesDirectory()): () => void {
  const originals = new Map<string, Buffer>();
  const restore = () => {
    for (const [file, content] of originals) writeFileSync(file, content);
  };
  try {
    for (const name of ADDON_PATCHES) {
      const patchFile = join(patchesDir, `${name}.patch`);
      for (const file of patchedFiles(readFileSync(patchFile, "utf8"))) {
        const path = join(packageDir, file);
        if (!originals.has(path)) originals.set(path, readFileSync(path));
      }
      const result = spawnSync("patch", ["-p1", "--forward", "--batch", "--no-backup-if-mismatch", "-r", "-", "-d", packageDir, "-i", patchFile], {
        encoding: "utf8",
      });
      if (result.error) throw result.error;
      if (result.status !== 0)
        throw new Error(`the patch ${name}.patch does not apply to node-llama-cpp in ${packageDir}: ${(result.stdout + result.stderr).trim()}`);
    }
  } catch (err) {
    restore();
    throw err;
  }
  return restore;
}

/** Tools the build needs that are not on PATH (each with what it is for). */
export function missingBuildTools(): string[] {
  const has = (cmd: string) => spawnSync(cmd, ["--version"], { stdio: "ignore" }).status === 0;
  const missing: string[] = [];
  if (!has("cmake")) missing.push("cmake");
  if (!["c++", "g++", "clang++"].some(has)) missing.push("a C++ compiler (g++ or clang++)");
  if (!has("make") && !has("ninja")) missing.push("make");
  if (!has("git")) missing.push("git (to unpack the llama.cpp source node-llama-cpp ships)");
  if (!has("patch")) missing.push("patch");
  return missing;
}

/** Whether `svc engine build` can build here (Linux only: elsewhere the prebuilt binaries are what is tested). */
export function engineBuildSupported(platform: NodeJS.Platform = process.platform): boolean {
  return platform === "linux";
}

/**
 * What the server says after loading a model on node-llama-cpp's prebuilt CPU binaries where `svc engine
 * build` can build (Linux): that a build of this machine's own exists to be made, and what it gives.
 * Null on a GPU, with a local build, and elsewhere.
 */
export function engineBuildHint(gpu: { backend: string; build?: "prebuilt" | "local" }, platform: NodeJS.Platform = process.platform): string | null {
  if (gpu.backend !== "cpu" || gpu.build !== "prebuilt" || !engineBuildSupported(platform)) return null;
  return (
    "The CPU runs node-llama-cpp's prebuilt llama.cpp binaries. `svc engine build` compiles them on this machine " +
    "(about 10 minutes on 2 cores; needs cmake, make, git, patch and a C++ compiler): on a 2-core machine such a build " +
    "read prompts 1.7 to 1.9 times as fast and generated several answers at once faster (svc engine --help)."
  );
}

export interface EngineBuildInfo {
  /** The build's folder under node-llama-cpp's localBuilds. */
  folder: string;
  /** The llama.cpp release it was built from. */
  release: string | null;
  /** Being built again now (node-llama-cpp holds its lock, refreshed every few seconds). */
  building: boolean;
  /**
   * Made with this version's patches. False for a build of an earlier svc (the same CMake options, other or
   * no patches): the server does not load it; `svc engine build` makes the current one, `remove` removes both.
   */
  current: boolean;
}

/** node-llama-cpp's build lock (proper-lockfile: a `.lock` folder whose time is refreshed while held). */
function lockHeld(folder: string): boolean {
  try {
    return statSync(`${folder}.lock`).mtimeMs > Date.now() - 60_000;
  } catch {
    return false;
  }
}

function sameOptions(a: Record<string, unknown>, expected: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(expected);
  return Object.keys(a).length === keys.length && keys.every((k) => a[k] === expected[k]);
}

/** Whether a build's CMake options are ours: "current", "earlier" (ours, other patches) or null (not ours). */
export function engineBuildKind(options: Record<string, unknown> | undefined): "current" | "earlier" | null {
  if (!options) return null;
  if (sameOptions(options, ENGINE_BUILD_OPTIONS)) return "current";
  const { SVC_ADDON_PATCHES: _ours, ...base } = ENGINE_BUILD_OPTIONS;
  const { SVC_ADDON_PATCHES: theirs, ...rest } = options;
  return (theirs === undefined || typeof theirs === "string") && sameOptions(rest, base) ? "earlier" : null;
}

/** The builds of `svc engine build` that exist (normally one; another node-llama-cpp version's may linger). */
export async function findEngineBuilds(): Promise<EngineBuildInfo[]> {
  const root = localBuildsDirectory();
  let names: string[];
  try {
    names = await readdir(root);
  } catch {
    return [];
  }
  const found: EngineBuildInfo[] = [];
  for (const name of names) {
    try {
      const metadata = JSON.parse(await readFile(join(root, name, "Release", "_nlcBuildMetadata.json"), "utf8")) as {
        buildOptions?: { customCmakeOptions?: Record<string, unknown>; gpu?: unknown; llamaCpp?: { release?: string } };
      };
      const options = metadata.buildOptions;
      const kind = engineBuildKind(options?.customCmakeOptions);
      if (options?.gpu === false && kind)
        found.push({ folder: join(root, name), release: options.llamaCpp?.release ?? null, building: lockHeld(join(root, name)), current: kind === "current" });
    } catch {
      // Not a finished build of ours.
    }
  }
  return found;
}

type LoadOptions = Pick<LlamaOptions, "logLevel" | "logger">;

/**
 * Loads this machine's build for the CPU, or returns null when there is none (the prebuilt binaries then).
 * Throws when one exists and does not load.
 */
export async function loadEngineBuild(options: LoadOptions = {}): Promise<Llama | null> {
  // Only a finished build that is not being made again: node-llama-cpp would otherwise wait for the
  // build's lock, minutes in which the server would not start.
  const builds = await findEngineBuilds();
  if (!builds.some((b) => b.current && !b.building)) return null;
  try {
    return await getLlama({
      ...options,
      gpu: false,
      build: "never",
      usePrebuiltBinaries: false,
      progressLogs: false,
      cmakeOptions: { ...ENGINE_BUILD_OPTIONS },
    });
  } catch (err) {
    if (err instanceof NoBinaryFoundError) return null;
    throw err;
  }
}

/**
 * Unpacks the llama.cpp source if needed, compiles the build (minutes: about 10 on 2 cores) and loads it once
 * to check it. Progress goes to stderr (node-llama-cpp's and CMake's own logs). Throws when a tool is missing
 * or the compilation fails.
 */
export async function buildEngine(): Promise<{ seconds: number; build: EngineBuildInfo | null }> {
  const started = performance.now();
  await ensureLlamaCppSource();
  const restore = applyAddonPatches();
  try {
    const llama = await getLlama({
      gpu: false,
      build: "forceRebuild",
      progressLogs: "stderr",
      logLevel: LlamaLogLevel.warn,
      cmakeOptions: { ...ENGINE_BUILD_OPTIONS },
    });
    await llama.dispose();
  } finally {
    restore();
  }
  const build = (await findEngineBuilds()).find((b) => b.current);
  return { seconds: (performance.now() - started) / 1000, build: build ?? null };
}

/** Deletes the builds of `svc engine build`; the server goes back to the prebuilt binaries on its next start. */
export async function removeEngineBuilds(): Promise<EngineBuildInfo[]> {
  const builds = await findEngineBuilds();
  for (const b of builds) {
    await rm(b.folder, { recursive: true, force: true });
    await rm(`${b.folder}.lock`, { recursive: true, force: true });
  }
  return builds;
}
