// `svc engine build` for a GPU backend (CUDA, Vulkan), and for the CPU with `--addon-only`: node-llama-cpp's
// addon alone, with our C++ in it (resources/engine-native, hooked in by addon-hooks.patch), compiled against
// the llama.cpp libraries of node-llama-cpp's prebuilt binaries for that backend (resources/engine-addon's
// CMake project). Seconds on 2 cores, a C++ compiler and cmake; no CUDA or Vulkan SDK, since nothing of
// llama.cpp is compiled. What it gives is our addon's paths (a thread pool kept per context, a lone answer's
// solo runs, each step's sampling in its decode's job: engine-build.ts, docs/performance.md sections 13, 14
// and 17) on the backend's own kernels; the full CPU build also compiles llama.cpp with this machine's
// compiler and our kernel patches.
//
// The build is a local build node-llama-cpp finds by its options (engineAddonBuildOptions): a folder under its
// localBuilds named as node-llama-cpp names it, holding our addon, the prebuilt libraries as links to
// node-llama-cpp's package (the same version it was compiled against: the build's identity holds the version)
// and the metadata node-llama-cpp reads. It is kept in the engine build store and loaded as the CPU build is
// (engine-build.ts: keepInStore, loadEngineBuild).
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { copyFile, cp, mkdir, mkdtemp, readdir, rename, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { availableParallelism, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { getLlamaGpuTypes } from "node-llama-cpp";
import {
  ADDON_HOOKS_PATCH,
  type AddonBackend,
  applyAddonPatches,
  backendLabel,
  engineAddonBuildOptions,
  engineAddonProjectDirectory,
  type EngineBuildInfo,
  ensureLlamaCppSource,
  keepInStore,
  llamaCppSourceDirectory,
  localBuildsDirectory,
  nodeLlamaCppDirectory,
  nodeLlamaCppVersion,
} from "./engine-build.js";
import { gpuDeviceFilePresent } from "./llama-runtime.js";

export interface PrebuiltBinaries {
  /** Their folder: the addon, the llama.cpp libraries and the build's metadata. */
  folder: string;
  /** CUDA's fallback libraries (its -ext package), loaded where the main ones do not run; null elsewhere. */
  fallback: string | null;
}

/** node-llama-cpp's prebuilt binaries for a backend on this machine, or null when npm did not install them. */
export function prebuiltBinaries(backend: AddonBackend, platform: NodeJS.Platform = process.platform, arch: string = process.arch): PrebuiltBinaries | null {
  const name = `${platform}-${arch}${backend === "cpu" ? "" : `-${backend}`}`;
  const require = createRequire(join(nodeLlamaCppDirectory(), "package.json"));
  const packageRoot = (pkg: string) => {
    try {
      // Its entry is dist/index.js.
      return join(dirname(require.resolve(pkg)), "..");
    } catch {
      return null;
    }
  };
  const root = packageRoot(`@node-llama-cpp/${name}`);
  if (root === null) return null;
  const folder = join(root, "bins", name);
  if (!existsSync(join(folder, "llama-addon.node")) || !existsSync(join(folder, "_nlcBuildMetadata.json"))) return null;
  const extRoot = backend === "cuda" ? packageRoot(`@node-llama-cpp/${name}-ext`) : null;
  const fallback = extRoot === null ? null : join(extRoot, "bins", name, "fallback");
  return { folder, fallback: fallback !== null && existsSync(fallback) ? fallback : null };
}

/**
 * The folder name node-llama-cpp gives a local build of these options (its own function, read from its
 * package: node-llama-cpp is pinned to one version, test/unit/node-llama-cpp-pin.test.ts).
 */
export async function localBuildFolderName(buildOptions: Record<string, unknown>, cmakeOptions: Readonly<Record<string, string>>): Promise<string> {
  const file = join(nodeLlamaCppDirectory(), "dist", "bindings", "utils", "getBuildFolderNameForBuildOptions.js");
  const { getBuildFolderNameForBuildOptions } = (await import(pathToFileURL(file).href)) as {
    getBuildFolderNameForBuildOptions(options: Record<string, unknown>): Promise<{ withCustomCmakeOptions: string }>;
  };
  return (await getBuildFolderNameForBuildOptions({ ...buildOptions, customCmakeOptions: new Map(Object.entries(cmakeOptions)) })).withCustomCmakeOptions;
}

/**
 * Whether the backend can run on this machine: the CPU always; a GPU backend where a device file and its driver
 * are there and its prebuilt binaries offer a device, as the server checks (llama-runtime.ts: Mesa's Vulkan
 * loader with only its CPU renderer offers none).
 */
export async function backendRunsHere(backend: AddonBackend): Promise<boolean> {
  if (backend === "cpu") return true;
  if (!gpuDeviceFilePresent()) return false;
  const supported: Array<string | false> = await getLlamaGpuTypes("supported").catch(() => []);
  if (!supported.includes(backend)) return false;
  return ((await probeLlama({ gpu: backend }))?.devices ?? 0) > 0;
}

/**
 * Loads node-llama-cpp with `options` (never building) in a process of its own, as node-llama-cpp tests its
 * binaries: a GPU backend's prebuilt addon and our build of it are not loaded into one process. Says which kind
 * of binaries loaded and how many GPU devices they offer; null when none loaded.
 */
export function probeLlama(options: Record<string, unknown>): { buildType: string; devices: number } | null {
  const entry = pathToFileURL(join(nodeLlamaCppDirectory(), "dist", "index.js")).href;
  const script =
    `const { getLlama, LlamaLogLevel } = await import(${JSON.stringify(entry)});` +
    `const llama = await getLlama({ ...${JSON.stringify(options)}, build: "never", progressLogs: false, logLevel: LlamaLogLevel.error });` +
    `const devices = await llama.getGpuDeviceNames().catch(() => []);` +
    `console.log(JSON.stringify({ buildType: llama.buildType, devices: devices.length }));` +
    `await llama.dispose();`;
  // A file, not `node -e`: node-llama-cpp tests a binary in a process forked with this one's Node options.
  const dir = mkdtempSync(join(tmpdir(), "svc-probe-"));
  const file = join(dir, "probe.mjs");
  writeFileSync(file, script);
  const result = spawnSync(process.execPath, [file], { encoding: "utf8", env: { ...process.env, ELECTRON_RUN_AS_NODE: "1" } });
  rmSync(dir, { recursive: true, force: true });
  if (result.status !== 0) return null;
  try {
    return JSON.parse(result.stdout.trim().split("\n").at(-1) ?? "") as { buildType: string; devices: number };
  } catch {
    return null;
  }
}

function run(command: string, args: string[], cwd: string): void {
  // Progress goes to stderr, as the CPU build's does.
  const result = spawnSync(command, args, { cwd, stdio: ["ignore", process.stderr, process.stderr] });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`${command} ${args[0]} ${args[1] ?? ""} failed (exit ${result.status ?? result.signal})`);
}

export interface AddonBuildResult {
  seconds: number;
  build: EngineBuildInfo;
  /** Loaded once to check it: false where the backend cannot run here (no such GPU), so it was compiled only. */
  checked: boolean;
}

/**
 * Compiles our addon against the backend's prebuilt libraries, places it where node-llama-cpp loads local
 * builds from, loads it once where the backend runs here, and keeps it in the engine build store (replacing an
 * earlier addon build for the backend). Throws when the prebuilt binaries are missing or compiling fails.
 */
export async function buildEngineAddon(backend: AddonBackend): Promise<AddonBuildResult> {
  const started = performance.now();
  const prebuilt = prebuiltBinaries(backend);
  const label = backendLabel(backend);
  if (prebuilt === null)
    throw new Error(
      `node-llama-cpp's prebuilt ${label} binaries for ${process.platform}-${process.arch} are not installed (npm installs them with node-llama-cpp where they exist)`,
    );
  const nodeLlamaCpp = nodeLlamaCppDirectory();
  const version = nodeLlamaCppVersion();
  const prebuiltVersion = (JSON.parse(readFileSync(join(prebuilt.folder, "..", "..", "package.json"), "utf8")) as { version: string }).version;
  if (prebuiltVersion !== version)
    throw new Error(`node-llama-cpp is ${version} but its prebuilt ${label} binaries are ${prebuiltVersion}: reinstall the packages (npm ci)`);
  // llama.cpp's headers, from the source node-llama-cpp ships (the same release as its prebuilt libraries).
  await ensureLlamaCppSource();
  const work = await mkdtemp(join(tmpdir(), "svc-addon-build-"));
  const metadata = JSON.parse(readFileSync(join(prebuilt.folder, "_nlcBuildMetadata.json"), "utf8")) as { buildOptions: Record<string, unknown> };
  const cmakeOptions = engineAddonBuildOptions(backend);
  const target = join(localBuildsDirectory(), await localBuildFolderName(metadata.buildOptions, cmakeOptions));
  const staging = `${target}.svc-copy`;
  try {
    // A copy of node-llama-cpp's addon source with our C++ and its hooks: the package's own files stay as they are.
    await mkdir(join(work, "llama"), { recursive: true });
    await cp(join(nodeLlamaCpp, "llama", "addon"), join(work, "llama", "addon"), { recursive: true });
    applyAddonPatches(work, undefined, undefined, [ADDON_HOOKS_PATCH]);
    const require = createRequire(join(nodeLlamaCpp, "package.json"));
    const build = join(work, "build");
    run(
      "cmake",
      [
        "-S",
        engineAddonProjectDirectory(),
        "-B",
        build,
        `-DADDON_SRC=${join(work, "llama", "addon")}`,
        `-DLLAMA_SRC=${llamaCppSourceDirectory()}`,
        `-DNODE_API_INC=${join(dirname(require.resolve("node-api-headers")), "include")}`,
        `-DNODE_ADDON_API_INC=${dirname(require.resolve("node-addon-api"))}`,
        `-DLIBS=${prebuilt.folder}`,
      ],
      work,
    );
    run("cmake", ["--build", build, "--parallel", String(availableParallelism())], work);
    // The build folder: our addon, the prebuilt libraries (links), the metadata node-llama-cpp reads.
    await rm(staging, { recursive: true, force: true });
    const release = join(staging, "Release");
    await mkdir(release, { recursive: true });
    for (const file of await readdir(prebuilt.folder))
      if (file !== "llama-addon.node" && file !== "_nlcBuildMetadata.json") await symlink(join(prebuilt.folder, file), join(release, file));
    if (prebuilt.fallback !== null) await symlink(prebuilt.fallback, join(release, "fallback"));
    await copyFile(join(build, "llama-addon.node"), join(release, "llama-addon.node"));
    await writeFile(join(release, "_nlcBuildMetadata.json"), JSON.stringify({ buildOptions: { ...metadata.buildOptions, customCmakeOptions: cmakeOptions } }));
    await writeFile(join(staging, "buildDone.status"), "");
    await rm(target, { recursive: true, force: true });
    await rename(staging, target);
  } finally {
    await rm(work, { recursive: true, force: true });
    await rm(staging, { recursive: true, force: true });
  }
  const checked = await backendRunsHere(backend);
  if (checked) {
    const loaded = probeLlama({ gpu: backend === "cpu" ? false : backend, usePrebuiltBinaries: false, cmakeOptions: { ...cmakeOptions } });
    if (loaded?.buildType !== "localBuild") throw new Error(`node-llama-cpp did not load the addon build from ${target}`);
  }
  return { seconds: (performance.now() - started) / 1000, build: await keepInStore(target), checked };
}
