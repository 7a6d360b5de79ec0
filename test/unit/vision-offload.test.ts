// Where the vision process runs (visionOffload): beside the text engine on its GPU, as far as the VRAM left
// holds; on the CPU where the text engine is, or where nothing fits.
import { describe, expect, it } from "vitest";
import { VISION_VRAM_RESERVE, visionOffload } from "../../server/engine/vision/vision-engine.js";

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
// A 4B model of 2.5 GB in 36 layers (with the embeddings and output as one more: 67.6 MB a layer).
const model = { gpuLayers: 36, totalLayers: 36, sizeBytes: 2.5 * GiB };
const projector = 800 * MiB;

describe("visionOffload", () => {
  it("on the CPU, or with nothing offloaded by the text engine, the vision process stays on the CPU", () => {
    expect(visionOffload(null, model, projector)).toBeUndefined();
    expect(visionOffload({ backend: "cpu", vramFreeBytes: 0 }, model, projector)).toBeUndefined();
    expect(visionOffload({ backend: "cuda", vramFreeBytes: 20 * GiB }, { ...model, gpuLayers: 0 }, projector)).toBeUndefined();
  });

  it("with room, every layer the text engine offloaded, on its backend", () => {
    expect(visionOffload({ backend: "cuda", vramFreeBytes: 20 * GiB }, model, projector)).toEqual({ backend: "cuda", layers: 36 });
    expect(visionOffload({ backend: "metal", vramFreeBytes: 20 * GiB }, { ...model, gpuLayers: 20 }, projector)).toEqual({ backend: "metal", layers: 20 });
  });

  it("with little room, as many layers as the VRAM left holds after the reserve and twice the projector; none left, the CPU", () => {
    const perLayer = model.sizeBytes / 37;
    const free = VISION_VRAM_RESERVE + 2 * projector + 10.5 * perLayer;
    expect(visionOffload({ backend: "vulkan", vramFreeBytes: free }, model, projector)).toEqual({ backend: "vulkan", layers: 10 });
    // Room for the projector but not one layer: the encoder still runs on the GPU.
    expect(visionOffload({ backend: "vulkan", vramFreeBytes: VISION_VRAM_RESERVE + 2 * projector + perLayer / 2 }, model, projector)).toEqual({ backend: "vulkan", layers: 0 });
    expect(visionOffload({ backend: "cuda", vramFreeBytes: VISION_VRAM_RESERVE + 2 * projector }, model, projector)).toBeUndefined();
  });
});
