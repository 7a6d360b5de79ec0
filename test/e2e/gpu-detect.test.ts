// GPU detection on the machine the tests run on: a backend is only "in use" with a device behind it. A Vulkan
// loader whose only driver is Mesa's CPU renderer (llvmpipe, which ggml does not use) offers no device; the
// server must say "cpu" there, and why Vulkan was passed over, rather than "vulkan" with 0 bytes of VRAM.
import { getLlama, getLlamaGpuTypes, LlamaLogLevel } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { detectGpu } from "../../server/engine/llama-runtime.js";

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
    for (const gpu of deviceless) expect(info.skipped).toContainEqual({ backend: gpu, reason: "the driver offers no GPU device" });
    // What this machine had, so a reader of the log knows which branch ran.
    console.log(`supported ${JSON.stringify(supported)}, deviceless ${JSON.stringify(deviceless)}, in use ${info.backend}`);
  }, 120_000);
});
