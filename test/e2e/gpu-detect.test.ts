// GPU detection on the machine the tests run on: a backend is only "in use" with a device behind it. A Vulkan
// loader whose only driver is Mesa's CPU renderer (llvmpipe, which ggml does not use) offers no device; the
// server must say "cpu" there, and why Vulkan was passed over, rather than "vulkan" with 0 bytes of VRAM.
import { getLlama, getLlamaGpuTypes, LlamaLogLevel } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { readdirSync } from "node:fs";
import { detectGpu } from "../../server/engine/llama-runtime.js";
import { linuxGpuDeviceFiles, NO_GPU_DEVICE_FILE } from "../../server/engine/resource-plan.js";

const names = (dir: string) => {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
};

describe("GPU detection (auto)", () => {
  it("names a backend only with a device behind it, and says why a deviceless one was passed over", async () => {
    const supported = await getLlamaGpuTypes("supported");
    const deviceless: string[] = [];
    for (const gpu of supported) {
      if (gpu === false) continue;
      const llama = await getLlama({ gpu, build: "never", progressLogs: false, logLevel: LlamaLogLevel.error }).catch(() => null);
      if (llama && (await llama.getGpuDeviceNames()).length === 0) deviceless.push(gpu);
      await llama?.dispose();
    }
    const info = await detectGpu("auto");
    if (info.backend !== "cpu") expect(info.devices.length).toBeGreaterThan(0);
    // Where Linux has no GPU device file, Vulkan and CUDA are passed over without loading their binaries.
    const noDeviceFile = process.platform === "linux" && !linuxGpuDeviceFiles(names("/dev"), names("/dev/dri"));
    const reason = noDeviceFile ? NO_GPU_DEVICE_FILE : "the driver offers no GPU device";
    for (const gpu of deviceless) expect(info.skipped).toContainEqual({ backend: gpu, reason });
    if (noDeviceFile) expect(info.backend).toBe("cpu");
    // What this machine had, so a reader of the log knows which branch ran.
    console.log(`supported ${JSON.stringify(supported)}, deviceless ${JSON.stringify(deviceless)}, GPU device file ${!noDeviceFile}, in use ${info.backend}`);
  }, 120_000);
});
