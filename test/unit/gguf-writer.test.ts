// The test models' GGUF writer: half floats, Q8_0 blocks as ggml lays them out, and a tiny model whose layer
// matrices are Q8_0 (what the engine build's AMX check loads) read back by node-llama-cpp's GGUF reader.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GgmlType, readGgufFileInfo } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { float16Bits, float16Value, quantizeQ8_0 } from "../../resources/test-model/gguf-writer.js";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";

describe("float16Bits", () => {
  it("encodes exact values, the largest half and the smallest subnormal", () => {
    expect(float16Bits(0)).toBe(0);
    expect(float16Bits(1)).toBe(0x3c00);
    expect(float16Bits(0.5)).toBe(0x3800);
    expect(float16Bits(2)).toBe(0x4000);
    expect(float16Bits(65504)).toBe(0x7bff);
    expect(float16Bits(70000)).toBe(0x7c00);
    expect(float16Bits(2 ** -24)).toBe(1);
    expect(float16Bits(2 ** -14)).toBe(0x0400);
  });

  it("rounds to the nearest half, ties to even", () => {
    // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: the even one (1) wins; 1 + 3·2^-11 rounds up to 1 + 2^-9.
    expect(float16Bits(1 + 2 ** -11)).toBe(0x3c00);
    expect(float16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02);
    for (const v of [1 / 127, 0.1, 3.14159, 1e-3, 123.456]) {
      expect(Math.abs(float16Value(float16Bits(v)) - v) / v).toBeLessThan(2 ** -11 + 1e-9);
    }
  });
});

describe("quantizeQ8_0", () => {
  it("writes one 34-byte block per 32 values: the F16 scale (largest magnitude over 127), then the bytes", () => {
    const values = Float32Array.from({ length: 64 }, (_, i) => (i < 32 ? i - 16 : 0));
    const blocks = quantizeQ8_0(values);
    expect(blocks.length).toBe(68);
    const d = float16Value(blocks.readUInt16LE(0));
    expect(d).toBeCloseTo(16 / 127, 4);
    expect(blocks.readInt8(2)).toBe(-127);
    expect(blocks.readInt8(2 + 16)).toBe(0);
    for (let i = 0; i < 32; i++) expect(Math.abs(blocks.readInt8(2 + i) * d - values[i]!)).toBeLessThanOrEqual(d / 2 + 1e-3);
    // An all-zero block: scale 0, bytes 0.
    expect([...blocks.subarray(34)].every((b) => b === 0)).toBe(true);
  });

  it("refuses a count that is not whole blocks", () => {
    expect(() => quantizeQ8_0(new Float32Array(33))).toThrow(/multiple of 32/);
  });
});

describe("the tiny model with Q8_0 layer matrices", () => {
  it("stores the layer's matrices as Q8_0 and the rest as F32, and llama.cpp's reader agrees", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-gguf-"));
    try {
      const path = join(dir, "tiny-q8.gguf");
      const file = buildTinyModel({ blockWeights: "q8_0" });
      writeFileSync(path, file);
      expect(file.length).toBeLessThan(buildTinyModel().length);
      const info = await readGgufFileInfo(path, { logWarnings: false, sourceType: "filesystem" });
      const types = Object.fromEntries((info.fullTensorInfo ?? []).map((t) => [t.name, t.ggmlType]));
      expect(types["blk.0.ffn_down.weight"]).toBe(GgmlType.Q8_0);
      expect(types["blk.0.attn_q.weight"]).toBe(GgmlType.Q8_0);
      expect(types["blk.0.attn_norm.weight"]).toBe(GgmlType.F32);
      expect(types["output.weight"]).toBe(GgmlType.F32);
      expect(types["token_embd.weight"]).toBe(GgmlType.F32);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
