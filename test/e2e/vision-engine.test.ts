// The generated vision projector (resources/test-model/tiny-vision.ts) in the real vision process: llama.cpp's
// mtmd (through @fugood/llama.node's prebuilt binaries) loads it beside the generated text model and encodes
// images into TINY_VISION_IMAGE_TOKENS embeddings each, whatever their size.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { buildTinyVisionProjector, TINY_VISION_IMAGE_TOKENS } from "../../resources/test-model/tiny-vision.js";
import { createRequire } from "node:module";
import { VisionEngine, VisionSlot } from "../../server/engine/vision/vision-engine.js";
import { VISION_MEDIA_MARKER } from "../../server/engine/vision/vision-protocol.js";

const dir = mkdtempSync(join(tmpdir(), "svc-vision-"));
let engine: VisionEngine;
const png = async (width: number, height: number) =>
  `data:image/png;base64,${(await sharp({ create: { width, height, channels: 3, background: { r: 90, g: 20, b: 200 } } }).png().toBuffer()).toString("base64")}`;

beforeAll(async () => {
  writeFileSync(join(dir, "mmproj.gguf"), buildTinyVisionProjector());
  engine = await VisionEngine.start({ modelPath: inject("tinyModelPath"), projectorPath: join(dir, "mmproj.gguf"), contextSize: 1024, threads: 1 });
}, 60_000);
afterAll(() => {
  engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the tiny vision projector", () => {
  it("is built the same from its seed, and another seed differs", () => {
    expect(buildTinyVisionProjector().equals(buildTinyVisionProjector())).toBe(true);
    expect(buildTinyVisionProjector({ seed: 7 }).equals(buildTinyVisionProjector())).toBe(false);
    expect(readFileSync(inject("tinyModelPath")).subarray(0, 4).toString()).toBe("GGUF");
  });

  it("encodes an image of any size into its fixed number of tokens, in place of the marker", async () => {
    const prompt = (marker: string) => `<|im_start|>user\nLook: ${marker} and say<|im_end|>\n<|im_start|>assistant\n`;
    const text = await engine.tokenize(prompt(""), []);
    for (const [w, h] of [[1024, 768], [64, 64], [17, 900]] as const) {
      const counted = await engine.tokenize(prompt(VISION_MEDIA_MARKER), [await png(w, h)]);
      expect(counted.imageTokens).toEqual([TINY_VISION_IMAGE_TOKENS]);
      expect(counted.tokens - text.tokens).toBeGreaterThanOrEqual(TINY_VISION_IMAGE_TOKENS);
      expect(counted.tokens - text.tokens).toBeLessThanOrEqual(TINY_VISION_IMAGE_TOKENS + 1);
    }
    const two = await engine.tokenize(prompt(`${VISION_MEDIA_MARKER} ${VISION_MEDIA_MARKER}`), [await png(10, 10), await png(20, 20)]);
    expect(two.imageTokens).toEqual([TINY_VISION_IMAGE_TOKENS, TINY_VISION_IMAGE_TOKENS]);
  });

  it("generates after the image; markers and images that do not pair up are no crash", async () => {
    const steps = [];
    for await (const step of engine.complete(
      { prompt: `<|im_start|>user\n${VISION_MEDIA_MARKER}<|im_end|>\n<|im_start|>assistant\n`, media: [await png(32, 32)], maxTokens: 4, contextLimit: 1000, temperature: 0, topP: 1, topK: 1, seed: 1, frequencyPenalty: 0, presencePenalty: 0 },
      new AbortController().signal,
    ))
      steps.push(step);
    const result = steps.find((s) => "result" in s) as { result: { promptTokens: number; completionTokens: number } };
    expect(result.result.promptTokens).toBeGreaterThan(TINY_VISION_IMAGE_TOKENS);
    expect(result.result.completionTokens).toBeGreaterThan(0);
    // Without media the marker is plain text; one image for two markers is an error of the request.
    expect((await engine.tokenize(`a ${VISION_MEDIA_MARKER} b`, [])).imageTokens).toEqual([]);
    await expect(engine.tokenize(`a ${VISION_MEDIA_MARKER} b ${VISION_MEDIA_MARKER}`, [await png(8, 8)])).rejects.toThrow(/vision engine failed/);
    expect(engine.alive).toBe(true);
    expect((await engine.tokenize(`a ${VISION_MEDIA_MARKER}`, [await png(8, 8)])).imageTokens).toEqual([TINY_VISION_IMAGE_TOKENS]);
  });

  it("a vision process that dies fails what it was running, and the next request starts another", async () => {
    const slot = (await VisionSlot.open({ modelPath: inject("tinyModelPath"), projectorPath: join(dir, "mmproj.gguf"), contextSize: 512, threads: 1 }))!;
    const first = await slot.engine();
    const exited = new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (!first.alive) {
          clearInterval(poll);
          resolve();
        }
      }, 20);
    });
    process.kill(first.pid!, "SIGKILL");
    await exited;
    await expect(first.tokenize("x", [])).rejects.toThrow(/vision engine failed: the vision process stopped \(signal SIGKILL\)/);
    const second = await slot.engine();
    expect(second).not.toBe(first);
    expect((await second.tokenize(`a ${VISION_MEDIA_MARKER}`, [await png(8, 8)])).imageTokens).toEqual([TINY_VISION_IMAGE_TOKENS]);
    slot.close();
    expect(await VisionSlot.open({ modelPath: inject("tinyModelPath"), projectorPath: inject("tinyModelPath"), contextSize: 512, threads: 1 })).toBeNull();
  });

  it("runs on the CPU where the text engine does; asked for a GPU whose llama.node build does not load here, on the CPU and says why", async () => {
    expect(engine.placement).toEqual({ devices: ["CPU"], gpuLayers: 0 });
    const llamaNode = createRequire(import.meta.url)("@fugood/llama.node") as { isLibVariantAvailable(variant: string): Promise<boolean> };
    for (const backend of ["cuda", "vulkan"] as const) {
      const lines: string[] = [];
      const slot = (await VisionSlot.open(
        { modelPath: inject("tinyModelPath"), projectorPath: join(dir, "mmproj.gguf"), contextSize: 512, threads: 1, gpu: { backend, layers: 99 } },
        (_level, message) => lines.push(message),
      ))!;
      const vision = await slot.engine();
      if (await llamaNode.isLibVariantAvailable(backend)) {
        // A machine with the GPU runtime: the layers and the projector are on its device.
        expect(slot.placement.note).toBeUndefined();
        expect(slot.placement.devices.join(",")).not.toBe("CPU");
        expect(slot.placement.gpuLayers).toBe(99);
        expect(lines.join("\n")).toMatch(/in the vision process on .+ with 99 layers of the model/);
      } else {
        expect(slot.placement).toEqual({ devices: ["CPU"], gpuLayers: 0, note: `llama.node's ${backend} build does not load on this machine` });
        expect(lines.join("\n")).toContain(`in the vision process on the CPU (llama.node's ${backend} build does not load on this machine)`);
      }
      expect((await vision.tokenize(`a ${VISION_MEDIA_MARKER}`, [await png(8, 8)])).imageTokens).toEqual([TINY_VISION_IMAGE_TOKENS]);
      slot.close();
    }
  });
});
