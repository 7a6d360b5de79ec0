// The tiny test vision projector: a llama.cpp `mmproj` GGUF (the file a vision-language model ships beside its
// text model) of projector type "mlp" (LLaVA 1.5's: a CLIP ViT, then two linear layers with GELU between),
// with seeded random weights: a 2-block ViT 16 wide over 8x8 patches of a 64x64 image, whose output the
// projector lifts to the tiny text model's embedding width (384). It sees nothing: what matters is that an
// image goes through the real encoder (llama.cpp's mtmd/clip.cpp) and lands in the text model's context as
// TINY_VISION_IMAGE_TOKENS embeddings, the way tiny.gguf and tiny-whisper.ts stand in for the real models.
// Tensor names and metadata keys: llama.cpp tools/mtmd/clip-impl.h (KEY_*, TN_*), loaded by clip.cpp's
// clip_model_loader; the graph is models/llava.cpp (it runs n_layer - 1 blocks, so two are written).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { encodeGguf, type GgufTensor, type GgufValue } from "./gguf-writer.js";
import { mulberry32 } from "./tiny-model.js";

export const TINY_VISION_SEED = 20261128;
const IMAGE_SIZE = 64;
const PATCH_SIZE = 8;
const WIDTH = 16;
const HEADS = 2;
const N_FF = 32;
const BLOCKS = 2;
const HIDDEN = 64;
/** The tiny text model's embedding width: the projector's output must match it (mtmd checks). */
export const TINY_TEXT_EMBEDDING = 384;
/** Every image, whatever its size, is resized to 64x64 and becomes (64 / 8)^2 embeddings. */
export const TINY_VISION_IMAGE_TOKENS = (IMAGE_SIZE / PATCH_SIZE) ** 2;

export function buildTinyVisionProjector(options: { seed?: number; textEmbedding?: number } = {}): Buffer {
  const random = mulberry32(options.seed ?? TINY_VISION_SEED);
  const nText = options.textEmbedding ?? TINY_TEXT_EMBEDDING;
  const tensors: GgufTensor[] = [];
  const tensor = (name: string, dims: number[], init: () => number = () => (random() - 0.5) * 0.2) => {
    const count = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(count);
    for (let i = 0; i < count; i++) data[i] = init();
    tensors.push({ name, dims, data });
  };
  const ones = () => 1;
  const zeros = () => 0;
  const nPatches = (IMAGE_SIZE / PATCH_SIZE) ** 2;

  tensor("v.class_embd", [WIDTH]);
  tensor("v.patch_embd.weight", [PATCH_SIZE, PATCH_SIZE, 3, WIDTH]);
  tensor("v.patch_embd.bias", [WIDTH], zeros);
  tensor("v.position_embd.weight", [WIDTH, nPatches + 1]);
  tensor("v.pre_ln.weight", [WIDTH], ones);
  tensor("v.pre_ln.bias", [WIDTH], zeros);
  for (let il = 0; il < BLOCKS; il++) {
    const p = `v.blk.${il}`;
    for (const proj of ["attn_q", "attn_k", "attn_v", "attn_out"]) {
      tensor(`${p}.${proj}.weight`, [WIDTH, WIDTH]);
      tensor(`${p}.${proj}.bias`, [WIDTH], zeros);
    }
    tensor(`${p}.ln1.weight`, [WIDTH], ones);
    tensor(`${p}.ln1.bias`, [WIDTH], zeros);
    tensor(`${p}.ln2.weight`, [WIDTH], ones);
    tensor(`${p}.ln2.bias`, [WIDTH], zeros);
    tensor(`${p}.ffn_up.weight`, [WIDTH, N_FF]);
    tensor(`${p}.ffn_up.bias`, [N_FF], zeros);
    tensor(`${p}.ffn_down.weight`, [N_FF, WIDTH]);
    tensor(`${p}.ffn_down.bias`, [WIDTH], zeros);
  }
  tensor("mm.0.weight", [WIDTH, HIDDEN]);
  tensor("mm.0.bias", [HIDDEN], zeros);
  tensor("mm.2.weight", [HIDDEN, nText]);
  tensor("mm.2.bias", [nText], zeros);

  const u32 = (value: number): GgufValue => ({ type: "u32", value });
  const f32s = (value: number[]): GgufValue => ({ type: "array", itemType: "f32", value });
  const metadata: Array<[string, GgufValue]> = [
    ["general.architecture", { type: "string", value: "clip" }],
    ["general.name", { type: "string", value: "svc tiny test vision projector" }],
    ["general.description", { type: "string", value: "Seeded random-weight LLaVA-style projector; sees nothing." }],
    ["general.file_type", u32(0)],
    ["clip.projector_type", { type: "string", value: "mlp" }],
    ["clip.has_vision_encoder", { type: "bool", value: true }],
    ["clip.use_gelu", { type: "bool", value: false }],
    ["clip.vision.image_size", u32(IMAGE_SIZE)],
    ["clip.vision.patch_size", u32(PATCH_SIZE)],
    ["clip.vision.embedding_length", u32(WIDTH)],
    ["clip.vision.feed_forward_length", u32(N_FF)],
    ["clip.vision.projection_dim", u32(nText)],
    ["clip.vision.attention.head_count", u32(HEADS)],
    ["clip.vision.attention.layer_norm_epsilon", { type: "f32", value: 1e-5 }],
    ["clip.vision.block_count", u32(BLOCKS)],
    ["clip.vision.image_mean", f32s([0.48145466, 0.4578275, 0.40821073])],
    ["clip.vision.image_std", f32s([0.26862954, 0.26130258, 0.27577711])],
  ];
  return encodeGguf(metadata, tensors);
}

/**
 * A vision model for tests: the text model's bytes as `<dir>/tiny-vision.gguf` with the projector beside it
 * as `tiny-vision.mmproj.gguf` (where the server looks for a model's projector). Returns the model's path.
 */
export function writeTinyVisionModel(dir: string, textModel: Buffer): string {
  const model = join(dir, "tiny-vision.gguf");
  writeFileSync(model, textModel);
  writeFileSync(join(dir, "tiny-vision.mmproj.gguf"), buildTinyVisionProjector());
  return model;
}
