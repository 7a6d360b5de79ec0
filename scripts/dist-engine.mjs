// `npm run dist`, before electron-builder packs the app: on Linux the installers carry `svc engine build`'s
// llama.cpp binaries for the CPU, so the app's users get them without a compiler of their own.
//
// Why: node-llama-cpp's prebuilt binaries come from an older compiler and lack our changes to its addon;
// measured against llama-server on the same model (docs/performance.md), they read prompts at 0.79 to 0.82
// of its speed where the engine build reads them at 1.23 to 1.60. The build is portable (a library per x64
// CPU family, the one for the user's CPU chosen when it loads; no -march=native), so it runs on other
// machines than the one that packed it, given a glibc at least as new as the packing machine's; where it
// does not load, the server says so and uses the prebuilt binaries (server/engine/llama-engine.ts).
// macOS and Windows keep the prebuilt binaries (Metal, CUDA and Vulkan are theirs on every platform).
//
// SVC_DIST_ENGINE=prebuilt packs the prebuilt binaries on Linux too (no build, no compiler needed).
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * What to do, from the platform, SVC_DIST_ENGINE and the builds `svc engine build` has made here:
 * "pack" (a current build exists), "build" (make it first) or "skip" (pack the prebuilt binaries), with
 * the line to print.
 */
export function distEngineStep({ platform, setting, builds }) {
  if (platform !== "linux") return { action: "skip", message: `Packing node-llama-cpp's prebuilt binaries (svc engine build is for Linux; this is ${platform}).` };
  if (setting === "prebuilt") return { action: "skip", message: "SVC_DIST_ENGINE=prebuilt: packing node-llama-cpp's prebuilt binaries." };
  if (setting !== undefined && setting !== "" && setting !== "build")
    return { action: "fail", message: `SVC_DIST_ENGINE is 'build' (the default on Linux) or 'prebuilt', not '${setting}'.` };
  // The CPU's full build is what the installers carry; an addon build (a GPU backend's, or --addon-only) links
  // to this machine's node_modules and is no use packed.
  const cpu = (b) => b.backend !== "cuda" && b.backend !== "vulkan" && b.addonOnly !== true;
  const stale = builds.filter((b) => !b.current && cpu(b)).map((b) => b.folder);
  const addons = builds.filter((b) => !cpu(b)).map((b) => b.folder);
  const staleNote =
    (stale.length ? ` An earlier build would be packed beside it (${stale.join(", ")}): \`npx svc engine remove\`, then npm run dist again, leaves it out.` : "") +
    (addons.length ? ` An addon build would be packed beside it (${addons.join(", ")}), with links into this machine's node_modules: \`npx svc engine remove\`, then npm run dist again, leaves it out.` : "");
  const current = builds.find((b) => b.current && !b.building && cpu(b));
  if (current) return { action: "pack", message: `Packing the llama.cpp built by svc engine build: ${current.folder}.${staleNote}` };
  return { action: "build", message: `No svc engine build yet: building it now (minutes), then packing it.${staleNote}` };
}

async function main() {
  let builds = [];
  if (process.platform === "linux") {
    const { findEngineBuilds } = await import(pathToFileURL(join(ROOT, "dist", "server", "engine", "engine-build.js")).href);
    builds = await findEngineBuilds();
  }
  const step = distEngineStep({ platform: process.platform, setting: process.env.SVC_DIST_ENGINE, builds });
  console.log(`dist: ${step.message}`);
  if (step.action === "fail") return 1;
  if (step.action !== "build") return 0;
  const built = spawnSync(process.execPath, [join(ROOT, "bin", "svc.js"), "engine", "build", "--gpu", "cpu"], { stdio: "inherit" });
  if (built.status === 0) return 0;
  console.error("dist: svc engine build failed (above). Install what it names, or run SVC_DIST_ENGINE=prebuilt npm run dist to pack the prebuilt binaries.");
  return 1;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = await main();
