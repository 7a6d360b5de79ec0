// The llama.cpp runtime of this process: one per process, the preferred GPU backends tried in turn (prebuilt
// binaries, or a build of `svc engine build` first: for the CPU, or an addon build for CUDA or Vulkan), and what it runs on (GPU figures for
// /health). Moved out of llama-engine.ts, which loads models on it.
import { getLlama, getLlamaGpuTypes, LlamaLogLevel, type Llama, type LlamaOptions } from "node-llama-cpp";
import type { Log } from "../core/log.js";
import { loadEngineBuild, localBuildKind } from "./engine-build.js";
import { readdirSync } from "node:fs";
import { gpuCandidates, linuxGpuDeviceFiles, NO_GPU_DEVICE_FILE, type GpuBackend, type GpuPreference } from "./resource-plan.js";
import type { GpuInfo } from "./types.js";

/** Where the runtime's lines go (the engine's log). */
export type RuntimeLog = Log;

export interface Runtime {
  llama: Llama;
  /** Backends tried before the one in use, and why each was passed over. */
  skipped: Array<{ backend: string; reason: string }>;
}

let runtimePromise: Promise<Runtime> | null = null;
let runtimePreference: GpuPreference | null = null;

/** A folder's names; none where it is not there. */
function entries(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Whether a Vulkan or CUDA device can exist here: on Linux, a GPU's device file (linuxGpuDeviceFiles); elsewhere, yes. */
export function gpuDeviceFilePresent(): boolean {
  return process.platform !== "linux" || linuxGpuDeviceFiles(entries("/dev"), entries("/dev/dri"));
}

function backendName(gpu: GpuBackend): string {
  return gpu === false ? "cpu" : gpu;
}

/**
 * One Llama runtime per process. Tries the preferred GPU backends in turn (prebuilt binaries only: nothing is
 * compiled at run time) and falls back to the CPU, remembering why each backend was passed over.
 */
export async function loadRuntime(preference: GpuPreference, log?: RuntimeLog): Promise<Runtime> {
  if (runtimePromise && runtimePreference === preference) return runtimePromise;
  runtimePreference = preference;
  const logger = (level: LlamaLogLevel, message: string) => {
    const text = message.trim();
    if (!text || !log) return;
    if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) log("error", `llama.cpp: ${text}`);
    else if (level === LlamaLogLevel.warn) log("debug", `llama.cpp: ${text}`);
  };
  const common = { build: "never" as const, progressLogs: false, logLevel: LlamaLogLevel.warn, logger };
  runtimePromise = (async () => {
    const skipped: Runtime["skipped"] = [];
    let supported: GpuBackend[] = [];
    if (preference === "auto") {
      const [valid, found] = await Promise.all([
        getLlamaGpuTypes("allValid").catch((): GpuBackend[] => []),
        getLlamaGpuTypes("supported").catch((): GpuBackend[] => [false]),
      ]);
      supported = found;
      for (const gpu of valid)
        if (gpu !== false && !found.includes(gpu)) skipped.push({ backend: gpu, reason: "no driver or prebuilt binary found" });
    }
    const noDeviceFile = !gpuDeviceFilePresent();
    for (const gpu of gpuCandidates(preference, supported)) {
      if ((gpu === "vulkan" || gpu === "cuda") && noDeviceFile) {
        skipped.push({ backend: gpu, reason: NO_GPU_DEVICE_FILE });
        log?.("debug", `The ${gpu} backend is not tried: ${NO_GPU_DEVICE_FILE}.`);
        continue;
      }
      try {
        const llama = (gpu !== "metal" ? await engineBuildOrNull(common, gpu, log) : null) ?? (await getLlama({ ...common, gpu }));
        if (gpu !== false && (await llama.getGpuDeviceNames().catch((): string[] => [])).length === 0) {
          // A driver with no device (Mesa's Vulkan loader where only its CPU renderer, llvmpipe, is installed, which
          // ggml does not use): the backend would run everything on the CPU while saying "vulkan".
          await llama.dispose().catch(() => undefined);
          throw new Error("the driver offers no GPU device");
        }
        if (gpu === false && preference !== "cpu") {
          const why = skipped.map((s) => `${s.backend}: ${s.reason}`).join("; ") || "none found";
          log?.(preference === "auto" ? "info" : "warn", `No usable ${preference === "auto" ? "GPU" : preference} backend (${why}); using the CPU.`);
        }
        return { llama, skipped };
      } catch (err) {
        if (gpu === false) throw err;
        skipped.push({ backend: backendName(gpu), reason: (err as Error).message || (err as Error).name });
        log?.("debug", `The ${backendName(gpu)} backend is not usable: ${(err as Error).message}`);
      }
    }
    throw new Error("No llama.cpp backend could be loaded.");
  })();
  runtimePromise.catch(() => {
    runtimePromise = null;
    runtimePreference = null;
  });
  return runtimePromise;
}

/**
 * A build made on this machine (`svc engine build`: for the CPU, or our addon for a GPU backend's prebuilt
 * libraries) comes before the prebuilt binaries; one that does not load is reported and passed over.
 */
async function engineBuildOrNull(options: Pick<LlamaOptions, "logLevel" | "logger">, gpu: false | "cuda" | "vulkan", log?: RuntimeLog): Promise<Llama | null> {
  try {
    return await loadEngineBuild(options, gpu);
  } catch (err) {
    const why = `did not load (${(err as Error).message}); using the prebuilt binaries.`;
    log?.("warn", `The llama.cpp built on this machine (svc engine build) ${why}`, `The llama.cpp built on this machine ${why}`);
    return null;
  }
}

/** One Llama runtime per process; GPU auto-detection falls back to the CPU binaries. */
export async function loadLlamaRuntime(preference: GpuPreference = "auto", log?: RuntimeLog): Promise<Llama> {
  return (await loadRuntime(preference, log)).llama;
}

export async function describeGpu(llama: Llama, skipped: Runtime["skipped"] = []): Promise<GpuInfo> {
  const backend = llama.gpu === false ? "cpu" : llama.gpu;
  const build = llama.buildType === "localBuild" ? "local" : "prebuilt";
  const kind = localBuildKind(llama);
  const local = build === "local" && kind !== null ? { localBuild: kind } : {};
  if (backend === "cpu") return { backend, devices: [], vramTotalBytes: 0, vramFreeBytes: 0, skipped, build, ...local };
  const [devices, vram] = await Promise.all([llama.getGpuDeviceNames(), llama.getVramState()]);
  return { backend, devices, vramTotalBytes: vram.total, vramFreeBytes: vram.free, skipped, build, ...local };
}

/** Loads the runtime (if needed) and says what it runs on; the health probe shows this before any model loads. */
export async function detectGpu(preference: GpuPreference = "auto", log?: RuntimeLog): Promise<GpuInfo> {
  const runtime = await loadRuntime(preference, log);
  return describeGpu(runtime.llama, runtime.skipped);
}

/** Fresh free-memory figures for the runtime already loaded; null before one is. */
export async function currentGpu(): Promise<GpuInfo | null> {
  if (!runtimePromise) return null;
  const runtime = await runtimePromise.catch(() => null);
  return runtime ? describeGpu(runtime.llama, runtime.skipped) : null;
}
