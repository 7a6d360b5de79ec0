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
import { spawnSync } from "node:child_process";
import { statSync } from "node:fs";
import { readdir, readFile, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { getLlama, LlamaLogLevel, NoBinaryFoundError, type Llama, type LlamaOptions } from "node-llama-cpp";

/** The CMake options of node-llama-cpp's release builds for x64 and arm64 Linux, set explicitly. */
export const ENGINE_BUILD_OPTIONS: Readonly<Record<string, string>> = Object.freeze({
  GGML_NATIVE: "OFF",
  GGML_OPENMP: "OFF",
  GGML_BACKEND_DL: "ON",
  GGML_CPU_ALL_VARIANTS: "ON",
});

/** Where node-llama-cpp keeps builds made on this machine (inside its own package folder). */
export function localBuildsDirectory(): string {
  const entry = createRequire(import.meta.url).resolve("node-llama-cpp");
  return join(dirname(entry), "..", "llama", "localBuilds");
}

/** Tools the build needs that are not on PATH (each with what it is for). */
export function missingBuildTools(): string[] {
  const has = (cmd: string) => spawnSync(cmd, ["--version"], { stdio: "ignore" }).status === 0;
  const missing: string[] = [];
  if (!has("cmake")) missing.push("cmake");
  if (!["c++", "g++", "clang++"].some(has)) missing.push("a C++ compiler (g++ or clang++)");
  if (!has("make") && !has("ninja")) missing.push("make");
  if (!has("git")) missing.push("git (to unpack the llama.cpp source node-llama-cpp ships)");
  return missing;
}

/** Whether `svc engine build` can build here (Linux only: elsewhere the prebuilt binaries are what is tested). */
export function engineBuildSupported(platform: NodeJS.Platform = process.platform): boolean {
  return platform === "linux";
}

export interface EngineBuildInfo {
  /** The build's folder under node-llama-cpp's localBuilds. */
  folder: string;
  /** The llama.cpp release it was built from. */
  release: string | null;
  /** Being built again now (node-llama-cpp holds its lock, refreshed every few seconds). */
  building: boolean;
}

/** node-llama-cpp's build lock (proper-lockfile: a `.lock` folder whose time is refreshed while held). */
function lockHeld(folder: string): boolean {
  try {
    return statSync(`${folder}.lock`).mtimeMs > Date.now() - 60_000;
  } catch {
    return false;
  }
}

function sameOptions(a: Record<string, unknown> | undefined): boolean {
  if (!a) return false;
  const keys = Object.keys(ENGINE_BUILD_OPTIONS);
  return Object.keys(a).length === keys.length && keys.every((k) => a[k] === ENGINE_BUILD_OPTIONS[k]);
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
      if (options?.gpu === false && sameOptions(options.customCmakeOptions))
        found.push({ folder: join(root, name), release: options.llamaCpp?.release ?? null, building: lockHeld(join(root, name)) });
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
  if (!builds.some((b) => !b.building)) return null;
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
 * Compiles the build (minutes: about 7 on 2 cores) and loads it once to check it. Progress goes to stderr
 * (node-llama-cpp's and CMake's own logs). Throws when a tool is missing or the compilation fails.
 */
export async function buildEngine(): Promise<{ seconds: number; build: EngineBuildInfo | null }> {
  const started = performance.now();
  const llama = await getLlama({
    gpu: false,
    build: "forceRebuild",
    progressLogs: "stderr",
    logLevel: LlamaLogLevel.warn,
    cmakeOptions: { ...ENGINE_BUILD_OPTIONS },
  });
  await llama.dispose();
  const [build] = await findEngineBuilds();
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
