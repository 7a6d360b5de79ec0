// A minimal GGUF (version 3) writer: metadata key/values and F32 tensors.
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
}

const VALUE_TYPE = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10 } as const;
const GGML_TYPE_F32 = 0;
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
  for (const t of tensors) {
    const expected = t.dims.reduce((a, b) => a * b, 1);
    if (expected !== t.data.length) throw new Error(`tensor ${t.name}: dims ${t.dims} need ${expected} values, got ${t.data.length}`);
    offsets.push(offset);
    offset += t.data.byteLength;
    offset = Math.ceil(offset / ALIGNMENT) * ALIGNMENT;
  }
  tensors.forEach((t, i) => {
    head.string(t.name);
    head.u32(t.dims.length);
    for (const d of t.dims) head.u64(BigInt(d));
    head.u32(GGML_TYPE_F32);
    head.u64(BigInt(offsets[i]!));
  });
  head.padTo(ALIGNMENT);

  const body = new ByteSink();
  for (const t of tensors) {
    body.push(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    body.padTo(ALIGNMENT);
  }
  return Buffer.concat([head.toBuffer(), body.toBuffer()]);
}
