// The test models' GGUF writer: half floats, Q8_0, Q4_0, Q4_K and Q2_K blocks as ggml lays them out, and a tiny model whose
// layer matrices are Q8_0 (what the engine build's AMX check loads) read back by node-llama-cpp's GGUF reader.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GgmlType, readGgufFileInfo } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { float16Bits, float16Value, quantizeQ2_K, quantizeQ4_0, quantizeQ4_K, quantizeQ6_K, quantizeQ8_0 } from "../../resources/test-model/gguf-writer.js";
import { buildPeerModel } from "../../bench/peer-model.js";
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

describe("quantizeQ4_0", () => {
  it("writes one 18-byte block per 32 values: the F16 scale (the largest magnitude, with its sign, over -8), then two values a byte", () => {
    const values = Float32Array.from({ length: 32 }, (_, i) => (i - 12) / 10);
    const block = quantizeQ4_0(values);
    expect(block.length).toBe(18);
    const d = float16Value(block.readUInt16LE(0));
    expect(d).toBeCloseTo(1.9 / -8, 3);
    // ggml's dequantize_row_q4_0: value j in the low nibble of byte j, value j + 16 in its high nibble.
    for (let j = 0; j < 16; j++) {
      const byte = block[2 + j]!;
      expect(Math.abs(((byte & 0xf) - 8) * d - values[j]!)).toBeLessThanOrEqual(Math.abs(d) / 2 + 1e-3);
      expect(Math.abs(((byte >> 4) - 8) * d - values[j + 16]!)).toBeLessThanOrEqual(Math.abs(d) / 2 + 1e-3);
    }
    // The largest value is -8 steps exactly.
    expect(block[2 + 15]! >> 4).toBe(0);
  });
});

/** ggml's dequantize_row_q4_K (ggml-quants.c), written from its source: what llama.cpp reads from a Q4_K block. */
function dequantizeQ4_K(blocks: Buffer): Float32Array {
  const out = new Float32Array((blocks.length / 144) * 256);
  for (let b = 0; b < blocks.length / 144; b++) {
    const at = b * 144;
    const d = float16Value(blocks.readUInt16LE(at));
    const dmin = float16Value(blocks.readUInt16LE(at + 2));
    const q = blocks.subarray(at + 4, at + 16);
    const scaleMin = (j: number): [number, number] =>
      j < 4 ? [q[j]! & 63, q[j + 4]! & 63] : [(q[j + 4]! & 0xf) | ((q[j - 4]! >> 6) << 4), (q[j + 4]! >> 4) | ((q[j]! >> 6) << 4)];
    for (let j = 0, is = 0; j < 256; j += 64, is += 2) {
      const [sc1, m1] = scaleMin(is);
      const [sc2, m2] = scaleMin(is + 1);
      for (let l = 0; l < 32; l++) {
        const byte = blocks[at + 16 + j / 2 + l]!;
        out[b * 256 + j + l] = d * sc1 * (byte & 0xf) - dmin * m1;
        out[b * 256 + j + 32 + l] = d * sc2 * (byte >> 4) - dmin * m2;
      }
    }
  }
  return out;
}

/** 512 seeded random values in sub blocks of `size`, whose ranges cycle through `ranges` sizes (0.01 to 0.01·ranges). */
function subBlocksOfRanges(seed: number, size: number, ranges: number): Float32Array {
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 2 - 1;
  return Float32Array.from({ length: 512 }, (_, i) => random() * (1 + (Math.floor(i / size) % ranges)) * 0.01);
}

/** Each value read back within one step of its sub block (`size` values, `qMax` steps from its least to its most). */
function expectWithinAStep(values: Float32Array, back: Float32Array, size: number, qMax: number): void {
  for (let sub = 0; sub < values.length / size; sub++) {
    const part = values.subarray(sub * size, (sub + 1) * size);
    const step = (Math.max(...part) - Math.min(0, ...part)) / qMax;
    for (let i = 0; i < size; i++) expect(Math.abs(back[sub * size + i]! - part[i]!)).toBeLessThan(step);
  }
}

describe("quantizeQ4_K", () => {
  it("refuses a count that is not whole super blocks", () => {
    expect(() => quantizeQ4_K(new Float32Array(300))).toThrow(/multiple of 256/);
  });

  it("a random model with Q4_K layer matrices, as llama.cpp's reader sees it", async () => {
    const types = await tensorTypes(buildPeerModel({ nEmbd: 256, nLayers: 1, nHead: 2, nFf: 256, contextLength: 512, seed: 3, blockWeights: "q4_k" }));
    expect(types["blk.0.ffn_down.weight"]).toBe(GgmlType.Q4_K);
    expect(types["blk.0.attn_q.weight"]).toBe(GgmlType.Q4_K);
    expect(types["blk.0.attn_norm.weight"]).toBe(GgmlType.F32);
    expect(types["output.weight"]).toBe(GgmlType.F32);
  });
});

describe("quantizeQ6_K", () => {
  it("a random model with Q6_K layer matrices, as llama.cpp's reader sees it", async () => {
    expect(() => quantizeQ6_K(new Float32Array(300))).toThrow(/multiple of 256/);
    const types = await tensorTypes(buildPeerModel({ nEmbd: 256, nLayers: 1, nHead: 2, nFf: 256, contextLength: 512, seed: 3, blockWeights: "q6_k" }));
    expect(types["blk.0.ffn_down.weight"]).toBe(GgmlType.Q6_K);
    expect(types["blk.0.attn_v.weight"]).toBe(GgmlType.Q6_K);
    expect(types["output.weight"]).toBe(GgmlType.F32);
  });
});

/** ggml's dequantize_row_q2_K (ggml-quants.c), written from its source. */
function dequantizeQ2_K(blocks: Buffer): Float32Array {
  const out = new Float32Array((blocks.length / 84) * 256);
  let y = 0;
  for (let b = 0; b < blocks.length / 84; b++) {
    const at = b * 84;
    const d = float16Value(blocks.readUInt16LE(at + 80));
    const min = float16Value(blocks.readUInt16LE(at + 82));
    let is = 0;
    for (let n = 0; n < 256; n += 128) {
      const q = at + 16 + n / 4;
      for (let shift = 0; shift < 8; shift += 2)
        for (const half of [0, 16]) {
          const sc = blocks[at + is++]!;
          for (let l = 0; l < 16; l++) out[y++] = d * (sc & 0xf) * ((blocks[q + half + l]! >> shift) & 3) - min * (sc >> 4);
        }
    }
  }
  return out;
}

/** ggml's dequantize_row_q6_K (ggml-quants.c), written from its source. */
function dequantizeQ6_K(blocks: Buffer): Float32Array {
  const out = new Float32Array((blocks.length / 210) * 256);
  for (let b = 0; b < blocks.length / 210; b++) {
    const at = b * 210;
    const d = float16Value(blocks.readUInt16LE(at + 208));
    for (let n = 0; n < 256; n += 128) {
      const ql = at + n / 2;
      const qh = at + 128 + n / 4;
      const sc = at + 192 + n / 16;
      for (let l = 0; l < 32; l++) {
        const is = Math.floor(l / 16);
        const h = blocks[qh + l]!;
        out[b * 256 + n + l] = d * blocks.readInt8(sc + is) * (((blocks[ql + l]! & 0xf) | ((h & 3) << 4)) - 32);
        out[b * 256 + n + l + 32] = d * blocks.readInt8(sc + is + 2) * (((blocks[ql + l + 32]! & 0xf) | (((h >> 2) & 3) << 4)) - 32);
        out[b * 256 + n + l + 64] = d * blocks.readInt8(sc + is + 4) * (((blocks[ql + l]! >> 4) | (((h >> 4) & 3) << 4)) - 32);
        out[b * 256 + n + l + 96] = d * blocks.readInt8(sc + is + 6) * (((blocks[ql + l + 32]! >> 4) | (((h >> 6) & 3) << 4)) - 32);
      }
    }
  }
  return out;
}

// Sub blocks of different ranges (their scales and minimums differ; Q4_K's past the first four are packed apart).
// Q6_K's fit is symmetric: 31 steps each side of zero, so within a step of (most − least) / 31.
describe.each([
  { name: "Q4_K", quantize: quantizeQ4_K, dequantize: dequantizeQ4_K, blockBytes: 144, seed: 7, size: 32, ranges: 8, qMax: 15 },
  { name: "Q2_K", quantize: quantizeQ2_K, dequantize: dequantizeQ2_K, blockBytes: 84, seed: 11, size: 16, ranges: 5, qMax: 3 },
  { name: "Q6_K", quantize: quantizeQ6_K, dequantize: dequantizeQ6_K, blockBytes: 210, seed: 13, size: 16, ranges: 7, qMax: 31 },
])("quantize$name", ({ quantize, dequantize, blockBytes, seed, size, ranges, qMax }) => {
  it(`writes one ${blockBytes}-byte block per 256 values, which ggml's reader turns back into them within a step of each sub block's scale`, () => {
    const values = subBlocksOfRanges(seed, size, ranges);
    const blocks = quantize(values);
    expect(blocks.length).toBe(2 * blockBytes);
    expectWithinAStep(values, dequantize(blocks), size, qMax);
  });
});

/** Each tensor's type as node-llama-cpp's GGUF reader reads it from this file, written to a temporary folder. */
async function tensorTypes(file: Buffer): Promise<Record<string, GgmlType>> {
  const dir = mkdtempSync(join(tmpdir(), "svc-gguf-"));
  try {
    const path = join(dir, "model.gguf");
    writeFileSync(path, file);
    const info = await readGgufFileInfo(path, { logWarnings: false, sourceType: "filesystem" });
    return Object.fromEntries((info.fullTensorInfo ?? []).map((t) => [t.name, t.ggmlType]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("the tiny model with Q8_0 layer matrices", () => {
  it("stores the layer's matrices as Q8_0 and the rest as F32, and llama.cpp's reader agrees", async () => {
    const file = buildTinyModel({ blockWeights: "q8_0" });
    expect(file.length).toBeLessThan(buildTinyModel().length);
    const types = await tensorTypes(file);
    expect(types["blk.0.ffn_down.weight"]).toBe(GgmlType.Q8_0);
    expect(types["blk.0.attn_q.weight"]).toBe(GgmlType.Q8_0);
    expect(types["blk.0.attn_norm.weight"]).toBe(GgmlType.F32);
    expect(types["output.weight"]).toBe(GgmlType.F32);
    expect(types["token_embd.weight"]).toBe(GgmlType.F32);
  });
});
