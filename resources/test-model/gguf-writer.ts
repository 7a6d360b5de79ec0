// A minimal GGUF (version 3) writer: metadata key/values, and tensors in F32, Q8_0, Q4_0, Q4_K, Q6_K or Q2_K.
// Format reference: ggml's docs/gguf.md. Only what the test model needs is supported.

export type GgufScalar =
  | { type: "u32"; value: number }
  | { type: "i32"; value: number }
  | { type: "f32"; value: number }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string }
  | { type: "u64"; value: bigint };

export type GgufArray =
  | { type: "array"; itemType: "string"; value: string[] }
  | { type: "array"; itemType: "f32"; value: number[] }
  | { type: "array"; itemType: "i32"; value: number[] };

export type GgufValue = GgufScalar | GgufArray;

export interface GgufTensor {
  name: string;
  /** ggml order: dims[0] is the contiguous (innermost) dimension. */
  dims: number[];
  data: Float32Array;
  /**
   * How it is stored: F32 (the default), or Q8_0 (blocks of 32 values along dims[0]: an F16 scale, the
   * largest magnitude over 127, then 32 signed bytes), which needs dims[0] to be a multiple of 32. Zeros and
   * values that are whole multiples of their block's scale survive Q8_0 exactly. Or Q4_0 (blocks of 32: an
   * F16 scale and 16 bytes of 4-bit values), or Q4_K (super blocks of 256 values along dims[0], the K-quant
   * most Q4_K_M layers use), Q6_K (the others') or Q2_K (super blocks of 256 too), which need dims[0] to be a
   * multiple of 256.
   */
  type?: "f32" | "q8_0" | "q4_0" | "q4_k" | "q6_k" | "q2_k";
}

const VALUE_TYPE = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10 } as const;
const GGML_TYPE = { f32: 0, q4_0: 2, q8_0: 8, q2_k: 10, q4_k: 12, q6_k: 14 } as const;
const Q8_0_BLOCK = 32;
const QK_K = 256;
const ALIGNMENT = 32;

class ByteSink {
  private chunks: Buffer[] = [];
  length = 0;

  push(buf: Buffer): void {
    this.chunks.push(buf);
    this.length += buf.length;
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.push(b);
  }
  i32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.push(b);
  }
  u64(v: bigint): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(v);
    this.push(b);
  }
  f32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.push(b);
  }
  string(s: string): void {
    const bytes = Buffer.from(s, "utf8");
    this.u64(BigInt(bytes.length));
    this.push(bytes);
  }
  padTo(alignment: number): void {
    const rem = this.length % alignment;
    if (rem !== 0) this.push(Buffer.alloc(alignment - rem));
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

function writeValue(sink: ByteSink, value: GgufValue): void {
  switch (value.type) {
    case "u32":
      sink.u32(value.value);
      return;
    case "i32":
      sink.i32(value.value);
      return;
    case "f32":
      sink.f32(value.value);
      return;
    case "bool":
      sink.push(Buffer.from([value.value ? 1 : 0]));
      return;
    case "string":
      sink.string(value.value);
      return;
    case "u64":
      sink.u64(value.value);
      return;
    case "array": {
      sink.u32(VALUE_TYPE[value.itemType]);
      sink.u64(BigInt(value.value.length));
      if (value.itemType === "string") for (const s of value.value) sink.string(s);
      else if (value.itemType === "f32") for (const n of value.value) sink.f32(n);
      else for (const n of value.value) sink.i32(n);
      return;
    }
  }
}

/** The IEEE half-precision bits of a finite, non-negative float (rounded to nearest, ties to even). */
export function float16Bits(value: number): number {
  const f32 = new Float32Array([value]);
  const bits = new Uint32Array(f32.buffer)[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  const mantissa = bits & 0x7fffff;
  if (exponent >= 0x1f) return sign | 0x7c00;
  if (exponent <= 0) {
    if (exponent < -10) return sign;
    const m = mantissa | 0x800000;
    const shift = 14 - exponent;
    const half = m >>> shift;
    const rest = m & ((1 << shift) - 1);
    const midpoint = 1 << (shift - 1);
    return sign | (half + (rest > midpoint || (rest === midpoint && (half & 1)) ? 1 : 0));
  }
  const half = (exponent << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  return sign | (half + (rest > 0x1000 || (rest === 0x1000 && (half & 1)) ? 1 : 0));
}

/** The value of half-precision bits. */
export function float16Value(bits: number): number {
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  const sign = bits & 0x8000 ? -1 : 1;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/** ggml's Q8_0 blocks for these values (a multiple of 32 of them), as ggml's reference quantizer makes them. */
export function quantizeQ8_0(data: Float32Array): Buffer {
  if (data.length % Q8_0_BLOCK !== 0) throw new Error(`Q8_0 needs a multiple of ${Q8_0_BLOCK} values, got ${data.length}`);
  const out = Buffer.alloc((data.length / Q8_0_BLOCK) * (2 + Q8_0_BLOCK));
  for (let b = 0; b < data.length / Q8_0_BLOCK; b++) {
    let amax = 0;
    for (let i = 0; i < Q8_0_BLOCK; i++) amax = Math.max(amax, Math.abs(data[b * Q8_0_BLOCK + i]!));
    const d = amax / 127;
    const id = d ? 1 / d : 0;
    const at = b * (2 + Q8_0_BLOCK);
    out.writeUInt16LE(float16Bits(d), at);
    for (let i = 0; i < Q8_0_BLOCK; i++) out.writeInt8(Math.round(data[b * Q8_0_BLOCK + i]! * id), at + 2 + i);
  }
  return out;
}

/** ggml's Q4_0 blocks for these values (a multiple of 32 of them), as ggml's reference quantizer makes them. */
export function quantizeQ4_0(data: Float32Array): Buffer {
  if (data.length % Q8_0_BLOCK !== 0) throw new Error(`Q4_0 needs a multiple of ${Q8_0_BLOCK} values, got ${data.length}`);
  const out = Buffer.alloc((data.length / 32) * 18);
  for (let b = 0; b < data.length / 32; b++) {
    const x = data.subarray(b * 32, (b + 1) * 32);
    // The value of largest magnitude, with its sign, maps to -8.
    let max = 0;
    for (const v of x) if (Math.abs(v) > Math.abs(max)) max = v;
    const d = max / -8;
    const id = d ? 1 / d : 0;
    const at = b * 18;
    out.writeUInt16LE(float16Bits(d), at);
    const q = (v: number) => Math.min(15, Math.trunc(v * id + 8.5));
    for (let j = 0; j < 16; j++) out[at + 2 + j] = q(x[j]!) | (q(x[j + 16]!) << 4);
  }
  return out;
}

/**
 * A K-quant super block's plain min-max fit: sub blocks of `size` values, each with a scale and minimum of
 * `scaleMax` steps of the block's F16 d and dmin, and values of 0 to `qMax`, so that x = d·sc·q − dmin·m.
 */
function fitSuperBlock(x: Float32Array, size: number, qMax: number, scaleMax: number): { d: number; dmin: number; sc: number[]; mn: number[]; q: (i: number) => number } {
  const half = (v: number) => float16Value(float16Bits(v));
  const scales: number[] = [];
  const mins: number[] = [];
  for (let j = 0; j < x.length / size; j++) {
    const sub = x.subarray(j * size, (j + 1) * size);
    const lo = Math.min(0, ...sub);
    scales.push((Math.max(...sub) - lo) / qMax);
    mins.push(-lo);
  }
  const d = half(Math.max(...scales) / scaleMax);
  const dmin = half(Math.max(...mins) / scaleMax);
  const sc = scales.map((v) => (d > 0 ? Math.min(scaleMax, Math.round(v / d)) : 0));
  const mn = mins.map((v) => (dmin > 0 ? Math.min(scaleMax, Math.round(v / dmin)) : 0));
  const q = (i: number) => {
    const j = Math.floor(i / size);
    const step = d * sc[j]!;
    return step > 0 ? Math.max(0, Math.min(qMax, Math.round((x[i]! + dmin * mn[j]!) / step))) : 0;
  };
  return { d, dmin, sc, mn, q };
}

/**
 * ggml's Q4_K blocks for these values (a multiple of 256 of them): per super block of 256, an F16 scale and
 * minimum (d, dmin), 8 sub blocks of 32 with a 6-bit scale and minimum each (packed in 12 bytes as ggml's
 * get_scale_min_k4 reads them), and 4-bit values, so that x = d·scale·q − dmin·min. A plain min-max fit, not
 * llama-quantize's search for the best scales: the format is what matters here, not the error.
 */
export function quantizeQ4_K(data: Float32Array): Buffer {
  if (data.length % QK_K !== 0) throw new Error(`Q4_K needs a multiple of ${QK_K} values, got ${data.length}`);
  const BLOCK_BYTES = 2 + 2 + 12 + QK_K / 2;
  const out = Buffer.alloc((data.length / QK_K) * BLOCK_BYTES);
  for (let b = 0; b < data.length / QK_K; b++) {
    const { d, dmin, sc, mn, q } = fitSuperBlock(data.subarray(b * QK_K, (b + 1) * QK_K), 32, 15, 63);
    const at = b * BLOCK_BYTES;
    out.writeUInt16LE(float16Bits(d), at);
    out.writeUInt16LE(float16Bits(dmin), at + 2);
    const packed = new Uint8Array(12);
    for (let j = 0; j < 8; j++) {
      if (j < 4) {
        packed[j] = sc[j]!;
        packed[j + 4] = mn[j]!;
      } else {
        packed[j + 4] = (sc[j]! & 0xf) | ((mn[j]! & 0xf) << 4);
        packed[j - 4]! |= (sc[j]! >> 4) << 6;
        packed[j]! |= (mn[j]! >> 4) << 6;
      }
    }
    out.set(packed, at + 4);
    // Two sub blocks a 32-byte run: the first's values in the low nibbles, the second's in the high.
    for (let j = 0; j < QK_K; j += 64) for (let l = 0; l < 32; l++) out[at + 16 + j / 2 + l] = q(j + l) | (q(j + l + 32) << 4);
  }
  return out;
}

/**
 * ggml's Q2_K blocks for these values (a multiple of 256 of them): per super block of 256, 16 sub blocks of 16
 * with a 4-bit scale and minimum each (one byte, scale in the low half), 2-bit values (four a byte, 32 bytes
 * apart), then the F16 d and dmin, so that x = d·scale·q − dmin·min. A plain min-max fit, like quantizeQ4_K.
 */
export function quantizeQ2_K(data: Float32Array): Buffer {
  if (data.length % QK_K !== 0) throw new Error(`Q2_K needs a multiple of ${QK_K} values, got ${data.length}`);
  const BLOCK_BYTES = QK_K / 16 + QK_K / 4 + 4;
  const out = Buffer.alloc((data.length / QK_K) * BLOCK_BYTES);
  for (let b = 0; b < data.length / QK_K; b++) {
    const { d, dmin, sc, mn, q } = fitSuperBlock(data.subarray(b * QK_K, (b + 1) * QK_K), 16, 3, 15);
    const at = b * BLOCK_BYTES;
    for (let j = 0; j < 16; j++) out[at + j] = sc[j]! | (mn[j]! << 4);
    for (let j = 0; j < QK_K; j += 128)
      for (let l = 0; l < 32; l++) out[at + 16 + j / 4 + l] = q(j + l) | (q(j + l + 32) << 2) | (q(j + l + 64) << 4) | (q(j + l + 96) << 6);
    out.writeUInt16LE(float16Bits(d), at + 80);
    out.writeUInt16LE(float16Bits(dmin), at + 82);
  }
  return out;
}

/**
 * ggml's Q6_K blocks for these values (a multiple of 256 of them): per super block of 256, the low 4 bits of
 * 6-bit values (two a byte, 64 bytes apart), their high 2 bits (four a byte, 32 apart), 16 signed 8-bit scales
 * of sub blocks of 16, then the F16 d, so that x = d·scale·(q − 32). A plain symmetric fit: each sub block's
 * largest magnitude at 31 steps.
 */
export function quantizeQ6_K(data: Float32Array): Buffer {
  if (data.length % QK_K !== 0) throw new Error(`Q6_K needs a multiple of ${QK_K} values, got ${data.length}`);
  const BLOCK_BYTES = QK_K / 2 + QK_K / 4 + QK_K / 16 + 2;
  const out = Buffer.alloc((data.length / QK_K) * BLOCK_BYTES);
  for (let b = 0; b < data.length / QK_K; b++) {
    const x = data.subarray(b * QK_K, (b + 1) * QK_K);
    const steps = Array.from({ length: 16 }, (_, j) => Math.max(0, ...Array.from(x.subarray(j * 16, (j + 1) * 16), Math.abs)) / 31);
    const d = float16Value(float16Bits(Math.max(...steps) / 127));
    const sc = steps.map((v) => (d > 0 ? Math.min(127, Math.round(v / d)) : 0));
    const q = (i: number) => {
      const step = d * sc[Math.floor(i / 16)]!;
      return 32 + (step > 0 ? Math.max(-32, Math.min(31, Math.round(x[i]! / step))) : 0);
    };
    const at = b * BLOCK_BYTES;
    // Per half of 128 values: ql bytes l and l + 32 hold values l, l + 32 (low nibbles) and l + 64, l + 96
    // (high); qh byte l their high bits, two each, from bit 0 up.
    for (let n = 0; n < QK_K; n += 128)
      for (let l = 0; l < 32; l++) {
        const [q1, q2, q3, q4] = [q(n + l), q(n + l + 32), q(n + l + 64), q(n + l + 96)];
        out[at + n / 2 + l] = (q1 & 0xf) | ((q3 & 0xf) << 4);
        out[at + n / 2 + l + 32] = (q2 & 0xf) | ((q4 & 0xf) << 4);
        out[at + QK_K / 2 + n / 4 + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
      }
    for (let j = 0; j < 16; j++) out.writeInt8(sc[j]!, at + QK_K / 2 + QK_K / 4 + j);
    out.writeUInt16LE(float16Bits(d), at + BLOCK_BYTES - 2);
  }
  return out;
}

function tensorBytes(t: GgufTensor): Buffer {
  if ((t.type ?? "f32") === "f32") return Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  if (t.type === "q4_0") {
    if (t.dims[0]! % Q8_0_BLOCK !== 0) throw new Error(`tensor ${t.name}: Q4_0 needs dims[0] to be a multiple of ${Q8_0_BLOCK}, got ${t.dims[0]}`);
    return quantizeQ4_0(t.data);
  }
  if (t.type === "q4_k" || t.type === "q6_k" || t.type === "q2_k") {
    if (t.dims[0]! % QK_K !== 0) throw new Error(`tensor ${t.name}: ${t.type.toUpperCase()} needs dims[0] to be a multiple of ${QK_K}, got ${t.dims[0]}`);
    return t.type === "q4_k" ? quantizeQ4_K(t.data) : t.type === "q6_k" ? quantizeQ6_K(t.data) : quantizeQ2_K(t.data);
  }
  if (t.dims[0]! % Q8_0_BLOCK !== 0) throw new Error(`tensor ${t.name}: Q8_0 needs dims[0] to be a multiple of ${Q8_0_BLOCK}, got ${t.dims[0]}`);
  return quantizeQ8_0(t.data);
}

export function encodeGguf(metadata: Array<[string, GgufValue]>, tensors: GgufTensor[]): Buffer {
  const head = new ByteSink();
  head.push(Buffer.from("GGUF", "ascii"));
  head.u32(3);
  head.u64(BigInt(tensors.length));
  head.u64(BigInt(metadata.length));
  for (const [key, value] of metadata) {
    head.string(key);
    head.u32(VALUE_TYPE[value.type]);
    writeValue(head, value);
  }

  let offset = 0;
  const offsets: number[] = [];
  const bytes: Buffer[] = [];
  for (const t of tensors) {
    const expected = t.dims.reduce((a, b) => a * b, 1);
    if (expected !== t.data.length) throw new Error(`tensor ${t.name}: dims ${t.dims} need ${expected} values, got ${t.data.length}`);
    bytes.push(tensorBytes(t));
    offsets.push(offset);
    offset += bytes.at(-1)!.length;
    offset = Math.ceil(offset / ALIGNMENT) * ALIGNMENT;
  }
  tensors.forEach((t, i) => {
    head.string(t.name);
    head.u32(t.dims.length);
    for (const d of t.dims) head.u64(BigInt(d));
    head.u32(GGML_TYPE[t.type ?? "f32"]);
    head.u64(BigInt(offsets[i]!));
  });
  head.padTo(ALIGNMENT);

  const body = new ByteSink();
  for (const b of bytes) {
    body.push(b);
    body.padTo(ALIGNMENT);
  }
  return Buffer.concat([head.toBuffer(), body.toBuffer()]);
}
