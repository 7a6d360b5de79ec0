// `svc engine ...`: which llama.cpp binaries the server runs, and building them on this machine (the CPU's;
// our addon for a GPU backend's prebuilt libraries, or the CPU's with --addon-only). Loaded lazily by cli.ts
// (it pulls in node-llama-cpp).
import {
  type AddonBackend,
  backendLabel,
  buildEngine,
  type EngineBuildInfo,
  engineBuildSupported,
  engineBuildOptions,
  findEngineBuilds,
  missingBuildTools,
  removeEngineBuilds,
} from "../../engine/engine-build.js";
import { backendRunsHere, buildEngineAddon } from "../../engine/engine-addon-build.js";
import { clearWarmPrefixes, listWarmPrefixes, warmStartDir } from "../../engine/warm-start.js";
import { formatBytes } from "../../core/format.js";
import { parseArgs } from "node:util";

/** Wrong usage: cli.ts prints it with the usage text and exits 2 (it matches on the name). */
class EngineUsageError extends Error {
  override name = "UsageError";
}

/** What a build is, in a line of `svc engine`. */
function describeBuild(b: EngineBuildInfo): string {
  const release = b.release ? ` (${b.release})` : "";
  const what = b.addonOnly
    ? `svc's addon built on this machine for node-llama-cpp's prebuilt llama.cpp${release}`
    : `llama.cpp built on this machine${release}`;
  return `${backendLabel(b.backend)}: ${what}: ${b.folder}`;
}

async function status(): Promise<number> {
  const builds = await findEngineBuilds();
  // Where a GPU backend runs, it is what the server uses and what a plain `svc engine build` builds for.
  const gpu = await buildBackend("auto");
  if (gpu !== "cpu" && !builds.some((b) => b.current && b.backend === gpu))
    console.log(`${backendLabel(gpu)}: node-llama-cpp's prebuilt binaries. \`svc engine build\` compiles svc's addon for them (seconds).`);
  if (!builds.some((b) => b.current && b.backend === "cpu"))
    console.log(`CPU: node-llama-cpp's prebuilt llama.cpp binaries. \`svc engine build${gpu === "cpu" ? "" : " --gpu cpu"}\` compiles them on this machine.`);
  for (const b of builds.filter((b) => b.current))
    console.log(describeBuild(b) + (b.building ? "\n(being built again now: a server started meanwhile uses the prebuilt binaries)" : ""));
  for (const b of builds.filter((b) => !b.current))
    console.log(
      `Not used: ${b.folder}, built by an earlier svc without its current changes to node-llama-cpp. \`svc engine build\` builds the current one; \`svc engine remove\` removes both.`,
    );
  return 0;
}

type BuildPreference = AddonBackend | "auto";

const isPreference = (value: string): value is BuildPreference => value === "auto" || value === "cpu" || value === "cuda" || value === "vulkan";

/** What `svc engine build` builds for: --gpu, else SVC_GPU (the server's choice, where it names one of these), else auto. */
function buildPreference(gpu: string | undefined): BuildPreference {
  if (gpu !== undefined) {
    const flag = gpu.trim().toLowerCase();
    if (isPreference(flag)) return flag;
    throw new EngineUsageError(`svc engine build --gpu takes auto, cpu, cuda or vulkan, not '${gpu}'.`);
  }
  const env = (process.env.SVC_GPU ?? "").trim().toLowerCase();
  return isPreference(env) ? env : "auto";
}

/** The backend of a preference: auto is the one the server would run (the first GPU backend that runs here, else the CPU). */
async function buildBackend(preference: BuildPreference): Promise<AddonBackend> {
  if (preference !== "auto") return preference;
  for (const backend of ["cuda", "vulkan"] as const) if (await backendRunsHere(backend)) return backend;
  return "cpu";
}

async function build(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, options: { gpu: { type: "string" }, "addon-only": { type: "boolean" } }, allowPositionals: true });
  if (positionals.length > 0) throw new EngineUsageError(`Unexpected argument '${positionals[0]}' for svc engine build.`);
  const preference = buildPreference(values.gpu);
  if (!engineBuildSupported()) {
    console.error(`svc: \`svc engine build\` is for Linux; on ${process.platform} the server uses node-llama-cpp's prebuilt binaries.`);
    return 1;
  }
  const missing = missingBuildTools();
  if (missing.length > 0) {
    console.error(
      `svc: the build needs ${missing.join(", ")}, not found on PATH. On Debian or Ubuntu: sudo apt-get install cmake build-essential git patch`,
    );
    return 1;
  }
  const backend = await buildBackend(preference);
  if (backend !== "cpu" || values["addon-only"] === true) return buildAddon(backend);
  const options = Object.entries(engineBuildOptions())
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  console.error(`Building llama.cpp for the CPU (${options}); this takes minutes. Progress follows.`);
  try {
    const result = await buildEngine();
    const minutes = (result.seconds / 60).toFixed(1);
    console.log(`Built in ${minutes} min${result.build ? `: ${result.build.folder}` : ""}.`);
    console.log("The server uses it for the CPU from its next start (/health: \"build\": \"local\", \"local_build\": \"full\"). `svc engine remove` goes back to the prebuilt binaries.");
    return 0;
  } catch (err) {
    console.error(`svc: the build failed: ${(err as Error).message}`);
    console.error("The server keeps using the prebuilt binaries.");
    return 1;
  }
}

async function buildAddon(backend: AddonBackend): Promise<number> {
  const label = backendLabel(backend);
  console.error(`Building svc's addon for node-llama-cpp's prebuilt ${label} binaries (seconds; llama.cpp is not compiled). Progress follows.`);
  try {
    const result = await buildEngineAddon(backend);
    console.log(`Built in ${result.seconds.toFixed(0)} s: ${result.build.folder}.`);
    console.log(
      result.checked
        ? `The server uses it for ${backend === "cpu" ? "the CPU" : label} from its next start (/health: "build": "local", "local_build": "addon"). \`svc engine remove\` goes back to the prebuilt binaries.`
        : `Not loaded to check it: ${label} does not run on this machine (no driver or GPU device). A server here that runs ${label} uses it from its next start.`,
    );
    return 0;
  } catch (err) {
    console.error(`svc: the build failed: ${(err as Error).message}`);
    console.error("The server keeps using the prebuilt binaries.");
    return 1;
  }
}

async function remove(): Promise<number> {
  if ((await findEngineBuilds()).some((b) => b.building)) {
    console.error("svc: a build is running (svc engine build); remove it once that has finished.");
    return 1;
  }
  const removed = await removeEngineBuilds();
  if (removed.length === 0) console.log("No llama.cpp build of `svc engine build` to remove; the server uses the prebuilt binaries.");
  for (const b of removed) console.log(`Removed ${b.folder}. The server uses the prebuilt binaries from its next start.`);
  return 0;
}

/** `svc engine warm-start [list|clear] [--data-dir DIR]`: the prefixes warm start saved (docs/configuration.md). */
function warmStart(argv: string[], defaultDir: string): number {
  const { values, positionals } = parseArgs({ args: argv, options: { "data-dir": { type: "string" } }, allowPositionals: true });
  const dir = warmStartDir(values["data-dir"] ?? defaultDir);
  const [action = "list", ...extra] = positionals;
  if (extra.length > 0) throw new EngineUsageError(`Unexpected argument '${extra[0]}' for svc engine warm-start ${action}.`);
  if (action === "clear") {
    const count = clearWarmPrefixes(dir);
    console.log(count === 0 ? "No saved prefix to remove." : `Removed ${count} saved prefix${count === 1 ? "" : "es"} (${dir}).`);
    return 0;
  }
  if (action !== "list") throw new EngineUsageError(`Unknown warm-start command '${action}'. Use list or clear.`);
  const prefixes = listWarmPrefixes(dir);
  if (prefixes.length === 0) console.log(`No saved prefix (${dir}).`);
  for (const p of prefixes)
    console.log(`${p.tokens} tokens, ${formatBytes(p.bytes)}, last used ${new Date(p.lastUsed).toISOString()}  ${p.key.slice(0, 16)}`);
  return 0;
}

export async function runEngineCommand(argv: string[], dataDir: string): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "warm-start") return warmStart(rest, dataDir);
  if (command === "build") return build(rest);
  if (rest.length > 0) throw new EngineUsageError(`Unexpected argument '${rest[0]}' for svc engine ${command}.`);
  switch (command) {
    case undefined:
    case "status":
      return status();
    case "remove":
      return remove();
    default:
      throw new EngineUsageError(`Unknown engine command '${command}'. Use status, build, remove or warm-start.`);
  }
}
