// Why one file (over 400 lines): it is `svc engine build` from end to end, and each part reads the others:
// where node-llama-cpp keeps its source and builds, our C++ and patches put in and taken out, the identity
// made from them, the store outside node_modules and the copy node-llama-cpp loads, finding, loading and
// removing builds. Splitting it would scatter one lifecycle over files that all import each other.
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
// binaries). For a GPU backend (CUDA, Vulkan), and for the CPU with `--addon-only`, `svc engine build` compiles
// node-llama-cpp's addon alone, with our C++ in it, against that backend's prebuilt llama.cpp libraries
// (engine-addon-build.ts: seconds, no CUDA or Vulkan SDK): an "addon build", kept and loaded the same way.
//
// The build also compiles in changes of ours to node-llama-cpp's addon: our own C++ (resources/engine-native/,
// copied into the addon's source as llama/addon/svc/ for the build) with the declarations and call sites it
// needs added by one small patch (resources/engine-patches/addon-hooks.patch): a thread pool kept for each
// context's life instead of threads started and joined for every decode (docs/performance.md, section 13), a
// lone generation's tokens decoded and sampled on a thread of the addon's own (section 14; slot-loop.ts
// `solo`), and the tokens of a step of several sequences sampled in the job that decodes it (section 17;
// slot-loop.ts `dispatch`); and changes to llama.cpp's CPU code: a step of 2 to 6 sequences multiplies
// each weight row by all of their tokens in one pass (F32/F16/BF16 and Q8_0/Q4_0/Q5_0/IQ4_NL weights on x86;
// section 21), a step's few tokens of one sequence attend to the context together (flash attention,
// section 41), and kernels of ours in resources/engine-native/ (q4k-vnni.h, q6k-cols.h: Q4_K and Q6_K
// weights' products, sections 50 and 51) that their patches only include and call. Everything is put back as
// it was after the build.
//
// A build's identity is a hash of what went into it (engineBuildId: our C++ sources, the patches,
// node-llama-cpp's version and llama.cpp release, the CMake options), passed to CMake as SVC_BUILD_ID, so
// node-llama-cpp names its folder after it: a build of other sources is another folder, never loaded. The
// finished build is kept outside node_modules, in the engine build store (engineBuildStore: the platform's
// cache folder), and copied back into node-llama-cpp's localBuilds (where node-llama-cpp loads builds from)
// whenever a reinstall of the packages has removed it there.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cp, readdir, readFile, rename, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { createRequire } from "node:module";
import { basename, dirname, join } from "node:path";
import { getLlama, LlamaLogLevel, NoBinaryFoundError, type Llama, type LlamaOptions } from "node-llama-cpp";
import { packageRoot } from "../core/version.js";

/**
 * Our patches to node-llama-cpp's source (the hooks for our C++ in its addon, and eight to the llama.cpp it
 * ships: sgemm-few-columns and flash-attn-few-queries, speed-ups that also give a token the same sums in a step
 * of any shape; sgemm-q6k-cols, the call of our products of Q6_K weights with a step's tokens (q6k-cols.h, the
 * same bits as llama.cpp's, 1.2 to 2.6 times as fast); repack-gemv-order, the same sums for a lone token of Q4_K
 * and Q2_K weights as for several; repack-q4k-vnni, the products of Q4_K weights with tokens about twice as fast
 * on CPUs with AVX512-VNNI or AVX-VNNI, with the same sums; repack-lone-column-split, one contiguous share of
 * repacked weights a thread for a lone token, and mul-mat-lone-column-split the same in llama.cpp's generic
 * product (Q5_K, Q3_K and other types without code of ours); amx-tile-config, a fix without which GCC 12 and later
 * build AMX kernels that crash on their first tile instruction), in the order they apply
 * (resources/engine-patches/NAME.patch).
 */
export const ADDON_PATCHES: readonly string[] = Object.freeze(["addon-hooks", "sgemm-few-columns", "sgemm-q6k-cols", "amx-tile-config", "flash-attn-few-queries", "repack-gemv-order", "repack-q4k-vnni", "repack-lone-column-split", "mul-mat-lone-column-split"]);

/** The patch of ADDON_PATCHES that adds our C++'s hooks to node-llama-cpp's addon (all an addon build needs). */
export const ADDON_HOOKS_PATCH = "addon-hooks";

/** The prebuilt binaries an addon build is made against: node-llama-cpp's CPU, CUDA or Vulkan libraries. */
export type AddonBackend = "cpu" | "cuda" | "vulkan";

/** A backend as the user reads it. */
export function backendLabel(backend: AddonBackend): string {
  return backend === "cpu" ? "CPU" : backend === "cuda" ? "CUDA" : "Vulkan";
}

/** Where our C++ goes in node-llama-cpp's package for a build (its CMake compiles llama/addon/ and one level below). */
export const NATIVE_SOURCE_FOLDER = "llama/addon/svc";

/** The CMake options of node-llama-cpp's release builds for x64 and arm64 Linux, set explicitly. */
export const ENGINE_BASE_OPTIONS: Readonly<Record<string, string>> = Object.freeze({
  GGML_NATIVE: "OFF",
  GGML_OPENMP: "OFF",
  GGML_BACKEND_DL: "ON",
  GGML_CPU_ALL_VARIANTS: "ON",
});

/** The files of resources/engine-native (our C++), sorted. */
export function nativeSourceFiles(nativeDir: string = engineNativeDirectory()): string[] {
  return readdirSync(nativeDir)
    .filter((f) => /\.(cpp|h)$/.test(f))
    .sort();
}

/**
 * A build's identity: a hash of everything that decides what it is: our C++ sources and patches (names and
 * contents), node-llama-cpp's version and the llama.cpp release it ships (its source comes with the version),
 * and the CMake options. 16 hex digits.
 */
export function engineBuildId(
  dirs: { patches?: string; native?: string; nodeLlamaCpp?: string } = {},
): string {
  const patchesDir = dirs.patches ?? enginePatchesDirectory();
  return buildIdentity(dirs.nodeLlamaCpp ?? nodeLlamaCppDirectory(), dirs.native ?? engineNativeDirectory(), (part) => {
    part("options", JSON.stringify(ENGINE_BASE_OPTIONS));
    for (const name of ADDON_PATCHES) part(`patch ${name}`, readFileSync(join(patchesDir, `${name}.patch`)));
  });
}

/**
 * An addon build's identity: a hash of our C++ sources, the hooks' patch, the CMake project that compiles the
 * addon alone (resources/engine-addon), node-llama-cpp's version and llama.cpp release (its addon source and
 * the prebuilt libraries come with the version) and the backend. 16 hex digits.
 */
export function engineAddonBuildId(
  backend: AddonBackend,
  dirs: { patches?: string; native?: string; nodeLlamaCpp?: string; project?: string } = {},
): string {
  return buildIdentity(dirs.nodeLlamaCpp ?? nodeLlamaCppDirectory(), dirs.native ?? engineNativeDirectory(), (part) => {
    part("backend", backend);
    part("project", readFileSync(join(dirs.project ?? engineAddonProjectDirectory(), "CMakeLists.txt")));
    part(`patch ${ADDON_HOOKS_PATCH}`, readFileSync(join(dirs.patches ?? enginePatchesDirectory(), `${ADDON_HOOKS_PATCH}.patch`)));
  });
}

type IdentityPart = (name: string, content: string | Buffer) => void;

/**
 * A hash of node-llama-cpp's version and the llama.cpp release it ships, the parts `parts` adds, and our C++
 * sources, each part named and with its length: 16 hex digits.
 */
function buildIdentity(packageDir: string, nativeDir: string, parts: (part: IdentityPart) => void): string {
  const hash = createHash("sha256");
  const part: IdentityPart = (name, content) => {
    hash.update(`${name}\0${Buffer.byteLength(content)}\0`);
    hash.update(content);
  };
  part("node-llama-cpp", (JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as { version: string }).version);
  part("llama.cpp", readFileSync(join(packageDir, "llama", "binariesGithubRelease.json")));
  parts(part);
  for (const file of nativeSourceFiles(nativeDir)) part(`native ${file}`, readFileSync(join(nativeDir, file)));
  return hash.digest("hex").slice(0, 16);
}

/**
 * The CMake options an addon build is named by (node-llama-cpp names a local build's folder after its options,
 * and finds it by them): SVC_ADDON_BUILD_ID alone, never compiled with (the libraries are prebuilt).
 */
export function engineAddonBuildOptions(backend: AddonBackend): Readonly<Record<string, string>> {
  let options = addonBuildOptions.get(backend);
  if (!options) addonBuildOptions.set(backend, (options = Object.freeze({ SVC_ADDON_BUILD_ID: engineAddonBuildId(backend) })));
  return options;
}
const addonBuildOptions = new Map<AddonBackend, Readonly<Record<string, string>>>();

let buildOptions: Readonly<Record<string, string>> | null = null;

/**
 * The CMake options of `svc engine build`: node-llama-cpp's release options and the build's identity
 * (CMake ignores SVC_BUILD_ID; node-llama-cpp names a build's folder after its options, so a build of other
 * sources is another folder).
 */
export function engineBuildOptions(): Readonly<Record<string, string>> {
  buildOptions ??= Object.freeze({ ...ENGINE_BASE_OPTIONS, SVC_BUILD_ID: engineBuildId() });
  return buildOptions;
}

/** node-llama-cpp's package folder (its addon source is in llama/addon, its local builds in llama/localBuilds). */
export function nodeLlamaCppDirectory(): string {
  const entry = createRequire(import.meta.url).resolve("node-llama-cpp");
  return join(dirname(entry), "..");
}

let installedVersion: string | null = null;
/** The installed node-llama-cpp's version (read once). */
export function nodeLlamaCppVersion(): string {
  installedVersion ??= (JSON.parse(readFileSync(join(nodeLlamaCppDirectory(), "package.json"), "utf8")) as { version: string }).version;
  return installedVersion;
}

/** Where node-llama-cpp keeps builds made on this machine (inside its own package folder). */
export function localBuildsDirectory(): string {
  return join(nodeLlamaCppDirectory(), "llama", "localBuilds");
}

function resourcesFolder(name: string): string {
  const root = packageRoot();
  const dir = root === null ? null : join(root, "resources", name);
  if (dir === null || !existsSync(dir)) throw new Error(`resources/${name} not found beside the server's files`);
  return dir;
}

/** resources/engine-patches in the svc-desktop package. */
export function enginePatchesDirectory(): string {
  return resourcesFolder("engine-patches");
}

/** resources/engine-addon (the CMake project that compiles node-llama-cpp's addon alone) in the svc-desktop package. */
export function engineAddonProjectDirectory(): string {
  return resourcesFolder("engine-addon");
}

/** resources/engine-native (our C++ in node-llama-cpp's addon) in the svc-desktop package. */
export function engineNativeDirectory(): string {
  return resourcesFolder("engine-native");
}

/**
 * Where finished builds are kept, outside node_modules: SVC_ENGINE_BUILDS_DIR, else the platform's cache
 * folder ($XDG_CACHE_HOME or ~/.cache)/svc-desktop/engine-builds. (Builds are for Linux.)
 */
export function engineBuildStore(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SVC_ENGINE_BUILDS_DIR) return env.SVC_ENGINE_BUILDS_DIR;
  return join(svcCacheDirectory(env), "engine-builds");
}

/** The platform's cache folder for svc: ($XDG_CACHE_HOME or ~/.cache)/svc-desktop. */
export function svcCacheDirectory(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "svc-desktop");
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
 * Copies our C++ into node-llama-cpp's addon source in `packageDir` (NATIVE_SOURCE_FOLDER) and applies
 * `patches` (ADDON_PATCHES; an addon build, ADDON_HOOKS_PATCH alone); returns what puts the files back as they
 * were (and removes the copy). Throws, naming the
 * patch, when one does not apply (another node-llama-cpp version than the one they were written for: 3.22.1),
 * after putting back what it had changed.
 */
export function applyAddonPatches(
  packageDir: string = nodeLlamaCppDirectory(),
  patchesDir: string = enginePatchesDirectory(),
  nativeDir: string = engineNativeDirectory(),
  patches: readonly string[] = ADDON_PATCHES,
): () => void {
  const originals = new Map<string, Buffer>();
  const nativeTarget = join(packageDir, NATIVE_SOURCE_FOLDER);
  const restore = () => {
    for (const [file, content] of originals) writeFileSync(file, content);
    rmSync(nativeTarget, { recursive: true, force: true });
  };
  try {
    rmSync(nativeTarget, { recursive: true, force: true });
    mkdirSync(nativeTarget, { recursive: true });
    for (const file of nativeSourceFiles(nativeDir)) cpSync(join(nativeDir, file), join(nativeTarget, file));
    for (const name of patches) {
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

/** The binaries the build hints are about (prebuilt ones, on Linux, of a backend `svc engine build` builds for), or null. */
function hintFor(gpu: { backend: string; build?: "prebuilt" | "local" }, platform: NodeJS.Platform): AddonBackend | null {
  if (gpu.build !== "prebuilt" || !engineBuildSupported(platform)) return null;
  return gpu.backend === "cpu" || gpu.backend === "cuda" || gpu.backend === "vulkan" ? gpu.backend : null;
}

/**
 * What the server says after loading a model on node-llama-cpp's prebuilt binaries where `svc engine build`
 * can build (Linux): that a build of this machine's own exists to be made, and what it gives: on the CPU
 * llama.cpp compiled here, on CUDA or Vulkan our addon for their prebuilt libraries (engine-addon-build.ts).
 * Null with a local build, on Metal, and elsewhere.
 */
export function engineBuildHint(gpu: { backend: string; build?: "prebuilt" | "local" }, platform: NodeJS.Platform = process.platform): string | null {
  const backend = hintFor(gpu, platform);
  if (backend === null) return null;
  if (backend !== "cpu")
    return (
      `${backendLabel(backend)} runs node-llama-cpp's prebuilt addon. \`svc engine build\` compiles svc's addon for its prebuilt libraries ` +
      "(about 15 seconds; needs cmake, make, git, patch and a C++ compiler, no GPU SDK): a lone answer's tokens are then " +
      "decoded and sampled on a thread of their own, not each through Node's thread pool (svc engine --help)."
    );
  return (
    "The CPU runs node-llama-cpp's prebuilt llama.cpp binaries. `svc engine build` compiles them on this machine " +
    "(about 10 minutes on 2 cores; needs cmake, make, git, patch and a C++ compiler): on a 2-core machine such a build " +
    "read prompts 1.7 to 1.9 times as fast and generated several answers at once faster (svc engine --help)."
  );
}

/** engineBuildHint in the desktop window's words (its log and Model page have no command line to name); null where it is null. */
export function engineBuildHintInWindow(gpu: { backend: string; build?: "prebuilt" | "local" }, platform: NodeJS.Platform = process.platform): string | null {
  const backend = hintFor(gpu, platform);
  if (backend === null) return null;
  if (backend === "cpu") return ENGINE_BUILD_HINT_IN_WINDOW;
  return (
    `${backendLabel(backend)} runs node-llama-cpp's prebuilt addon. svc's own addon for it compiles on this machine in about 15 seconds, ` +
    `from the command line (docs/configuration.md, "The addon alone"): a lone answer's tokens are then decoded and sampled on a thread of their own.`
  );
}

/** engineBuildHint for the CPU in the desktop window's log, which has no command line to name. */
export const ENGINE_BUILD_HINT_IN_WINDOW =
  "The CPU runs node-llama-cpp's prebuilt llama.cpp binaries. Compiled on this machine (about 10 minutes on 2 cores, " +
  "from the command line: docs/configuration.md, \"The engine's CPU binaries\"), they read prompts 1.7 to 1.9 times as fast on a 2-core machine.";

export interface EngineBuildInfo {
  /** The libraries it runs: the CPU's, or a GPU backend's (an addon build's prebuilt ones). */
  backend: AddonBackend;
  /** Our addon alone, compiled against node-llama-cpp's prebuilt libraries (engine-addon-build.ts), not llama.cpp too. */
  addonOnly: boolean;
  /** Where the build is kept: its folder in the engine build store, or (a build being made, or one of an earlier svc) under node-llama-cpp's localBuilds. */
  folder: string;
  /** The llama.cpp release it was built from. */
  release: string | null;
  /** Being built again now (node-llama-cpp holds its lock, refreshed every few seconds). */
  building: boolean;
  /**
   * Made from this version's sources (its SVC_BUILD_ID is engineBuildId()). False for a build of an earlier
   * svc (the same CMake options, other sources): the server does not load it; `svc engine build` makes the
   * current one, `remove` removes both.
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

/**
 * Whether a build's CMake options are ours: "current" (this version's identity), "earlier" (ours, from other
 * sources: another SVC_BUILD_ID, or an earlier svc's SVC_ADDON_PATCHES) or null (not ours).
 */
export function engineBuildKind(options: Record<string, unknown> | undefined, current: Readonly<Record<string, string>> = engineBuildOptions()): "current" | "earlier" | null {
  if (!options) return null;
  if (sameOptions(options, current)) return "current";
  const { SVC_BUILD_ID: id, SVC_ADDON_PATCHES: patches, ...rest } = options;
  if (id !== undefined && patches !== undefined) return null;
  const marker = id ?? patches;
  return (marker === undefined || typeof marker === "string") && sameOptions(rest, ENGINE_BASE_OPTIONS) ? "earlier" : null;
}

type BuildFacts = Pick<EngineBuildInfo, "backend" | "addonOnly" | "release"> & { kind: "current" | "earlier" };

/** A build folder's metadata, when it is a finished build of ours: the CPU's, or an addon build (any backend). */
async function readBuild(folder: string): Promise<BuildFacts | null> {
  try {
    const metadata = JSON.parse(await readFile(join(folder, "Release", "_nlcBuildMetadata.json"), "utf8")) as {
      buildOptions?: { customCmakeOptions?: Record<string, unknown>; gpu?: unknown; llamaCpp?: { release?: string } };
    };
    const options = metadata.buildOptions;
    const release = options?.llamaCpp?.release ?? null;
    const addonId = options?.customCmakeOptions?.SVC_ADDON_BUILD_ID;
    if (typeof addonId === "string" && Object.keys(options!.customCmakeOptions!).length === 1) {
      const backend = options?.gpu === false ? "cpu" : options?.gpu;
      if (backend !== "cpu" && backend !== "cuda" && backend !== "vulkan") return null;
      return { backend, addonOnly: true, release, kind: addonId === engineAddonBuildOptions(backend).SVC_ADDON_BUILD_ID ? "current" : "earlier" };
    }
    const kind = engineBuildKind(options?.customCmakeOptions);
    return options?.gpu === false && kind ? { backend: "cpu", addonOnly: false, release, kind } : null;
  } catch {
    return null;
  }
}

/** One build of each kind is in use: the CPU's, and an addon build for each backend. */
const sameKind = (a: Pick<EngineBuildInfo, "backend" | "addonOnly">, b: Pick<EngineBuildInfo, "backend" | "addonOnly">) =>
  a.backend === b.backend && a.addonOnly === b.addonOnly;

async function folders(root: string): Promise<string[]> {
  try {
    return (await readdir(root, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => join(root, d.name));
  } catch {
    return [];
  }
}

/**
 * The builds of `svc engine build` that exist: those in the store, and under node-llama-cpp's localBuilds
 * those not in the store (being built now, or an earlier svc's). A store build's working copy in localBuilds
 * is not listed apart.
 */
export async function findEngineBuilds(): Promise<EngineBuildInfo[]> {
  const found: EngineBuildInfo[] = [];
  const stored = new Set<string>();
  for (const folder of await folders(engineBuildStore())) {
    const build = await readBuild(folder);
    if (!build) continue;
    stored.add(basename(folder));
    found.push({ backend: build.backend, addonOnly: build.addonOnly, folder, release: build.release, building: false, current: build.kind === "current" });
  }
  for (const folder of await folders(localBuildsDirectory())) {
    const building = lockHeld(folder);
    // A store build's working copy (unless being made again right now).
    if (stored.has(basename(folder)) && !building) continue;
    const build = await readBuild(folder);
    if (build) found.push({ backend: build.backend, addonOnly: build.addonOnly, folder, release: build.release, building, current: build.kind === "current" });
  }
  return found;
}

/**
 * Puts the store's current build of a kind where node-llama-cpp loads builds from (its localBuilds), when a
 * reinstall of the packages removed it there. Returns whether a current build of that kind is in place.
 */
async function placeStoredBuild(found: EngineBuildInfo[], kind: Pick<EngineBuildInfo, "backend" | "addonOnly">): Promise<boolean> {
  const builds = found.filter((b) => sameKind(b, kind));
  const stored = builds.find((b) => b.current && !b.building && b.folder.startsWith(engineBuildStore()));
  if (!stored) return builds.some((b) => b.current && !b.building);
  const target = join(localBuildsDirectory(), basename(stored.folder));
  if (lockHeld(target)) return false;
  if ((await readBuild(target))?.kind !== "current") {
    const staging = `${target}.svc-copy`;
    await rm(staging, { recursive: true, force: true });
    await cp(stored.folder, staging, { recursive: true, verbatimSymlinks: true });
    await rm(target, { recursive: true, force: true });
    await rename(staging, target);
  }
  return true;
}

type LoadOptions = Pick<LlamaOptions, "logLevel" | "logger">;

/** Which of our builds each runtime loadEngineBuild returned runs: the full CPU build, or our addon alone. */
const loadedKinds = new WeakMap<Llama, "full" | "addon">();

/** "full" (llama.cpp and our addon built here) or "addon" (our addon on prebuilt libraries); null: not ours. */
export function localBuildKind(llama: Llama): "full" | "addon" | null {
  return loadedKinds.get(llama) ?? null;
}

/**
 * Loads this machine's build for a backend (the CPU: `svc engine build`'s, else an addon build; a GPU backend:
 * its addon build), or returns null when there is none (the prebuilt binaries then). Throws when one exists
 * and does not load.
 */
export async function loadEngineBuild(options: LoadOptions = {}, gpu: false | "cuda" | "vulkan" = false): Promise<Llama | null> {
  const backend: AddonBackend = gpu === false ? "cpu" : gpu;
  const found = await findEngineBuilds();
  for (const addonOnly of backend === "cpu" ? [false, true] : [true]) {
    // Only a finished build that is not being made again: node-llama-cpp would otherwise wait for the
    // build's lock, minutes in which the server would not start.
    if (!(await placeStoredBuild(found, { backend, addonOnly }))) continue;
    try {
      const llama = await getLlama({
        ...options,
        gpu,
        build: "never",
        usePrebuiltBinaries: false,
        progressLogs: false,
        cmakeOptions: { ...(addonOnly ? engineAddonBuildOptions(backend) : engineBuildOptions()) },
      });
      loadedKinds.set(llama, addonOnly ? "addon" : "full");
      return llama;
    } catch (err) {
      if (!(err instanceof NoBinaryFoundError)) throw err;
    }
  }
  return null;
}

/**
 * Unpacks the llama.cpp source if needed, compiles the build (minutes: about 10 on 2 cores), loads it once
 * to check it, and keeps it in the engine build store (replacing earlier builds there). Progress goes to
 * stderr (node-llama-cpp's and CMake's own logs). Throws when a tool is missing or the compilation fails.
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
      cmakeOptions: { ...engineBuildOptions() },
    });
    await llama.dispose();
  } finally {
    restore();
  }
  // The folder node-llama-cpp just built into (read directly: findEngineBuilds passes over the working copy
  // of a build the store holds already, which a second `svc engine build` of the same sources makes).
  let made: string | null = null;
  for (const folder of await folders(localBuildsDirectory())) {
    const build = lockHeld(folder) ? null : await readBuild(folder);
    if (build?.kind === "current" && !build.addonOnly) made = folder;
  }
  return { seconds: (performance.now() - started) / 1000, build: made === null ? null : await keepInStore(made) };
}

/**
 * Copies a finished build from node-llama-cpp's localBuilds into the engine build store, where it outlives a
 * reinstall of the packages. The store keeps one build of each kind: earlier ones of its kind go.
 */
export async function keepInStore(made: string): Promise<EngineBuildInfo> {
  const build = await readBuild(made);
  if (build?.kind !== "current") throw new Error(`${made} is not a finished build of this svc`);
  const store = engineBuildStore();
  mkdirSync(store, { recursive: true });
  for (const folder of await folders(store)) {
    const other = await readBuild(folder);
    if (other === null || sameKind(other, build)) await rm(folder, { recursive: true, force: true });
  }
  const kept = join(store, basename(made));
  // (An addon build's libraries are links to node-llama-cpp's prebuilt ones: copied as links.)
  await cp(made, kept, { recursive: true, verbatimSymlinks: true });
  return { backend: build.backend, addonOnly: build.addonOnly, folder: kept, release: build.release, building: false, current: true };
}

/**
 * Deletes the builds of `svc engine build` (in the store, and their copies and earlier builds under
 * node-llama-cpp's localBuilds); the server goes back to the prebuilt binaries on its next start.
 */
export async function removeEngineBuilds(): Promise<EngineBuildInfo[]> {
  const builds = await findEngineBuilds();
  const copies = (await folders(localBuildsDirectory())).filter((f) => builds.some((b) => basename(b.folder) === basename(f)));
  for (const folder of new Set([...builds.map((b) => b.folder), ...copies])) {
    await rm(folder, { recursive: true, force: true });
    await rm(`${folder}.lock`, { recursive: true, force: true });
  }
  return builds;
}
