// The model the peer benchmark runs on (issue 20): a llama GGUF of about 110 MB in F32 with seeded random
// weights (n_embd 512, 8 layers, 8 heads, n_ff 1536) and the test model's vocabulary and chat template, so
// both servers render and tokenize prompts the same way. It computes like a real small model (every matrix
// is dense and random) but writes nonsense.
//
// The output rows of the control, tag and non-printable byte tokens are zero: their logit is always 0 while
// the ~280 word and printable-byte tokens get random logits, so greedy decoding never ends the turn, never
// opens a thought or a tool call and never writes a broken UTF-8 sequence. Every answer runs to max_tokens
// on both servers, with the same text.
import { closeSync, existsSync, mkdirSync, openSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { encodeGguf, type GgufTensor } from "../resources/test-model/gguf-writer.js";
import { buildVocab, llamaMetadata, mulberry32 } from "../resources/test-model/tiny-model.js";

export const PEER_MODEL = { nEmbd: 512, nLayers: 8, nHead: 8, nFf: 1536, contextLength: 32768, seed: 20 } as const;

const TOKEN_TYPE_NORMAL = 1;
const TOKEN_TYPE_BYTE = 6;

function printableByte(piece: string): boolean {
  const m = /^<0x([0-9A-F]{2})>$/.exec(piece);
  if (!m) return false;
  const b = parseInt(m[1]!, 16);
  return b >= 0x20 && b < 0x7f;
}

export type PeerModelShape = {
  nEmbd: number;
  nLayers: number;
  nHead: number;
  nFf: number;
  contextLength: number;
  seed: number;
  /**
   * Layers past this many are all zeros (bench:spec's draft workload): each adds exactly nothing to the
   * residual stream but costs a layer's compute, so the model writes what a model of only these layers writes.
   */
  activeLayers?: number;
  /** Multiplies the output matrix (default 1): greedy text unchanged, the chosen token's probability near 1. */
  outputScale?: number;
  /** How the layers' matrices are stored (default F32): Q4_K, Q6_K and Q2_K need n_embd and n_ff to be multiples of 256. */
  blockWeights?: "f32" | "q8_0" | "q4_0" | "q4_k" | "q6_k" | "q2_k";
};

/** The model by default; a smaller shape gives a fast model with the same behaviour (for profiling). */
/**
 * The llama blocks of a dense random model (bench:peer's, bench:spec's echo model): norms of ones, every
 * matrix from `dense` (rows, cols), drawn in this order.
 */
export function denseLayers(nLayers: number, nEmbd: number, nFf: number, dense: (rows: number, cols: number) => Float32Array): GgufTensor[] {
  const ones = (k: number) => new Float32Array(k).fill(1);
  const tensors: GgufTensor[] = [];
  for (let l = 0; l < nLayers; l++) {
    const p = `blk.${l}`;
    tensors.push(
      { name: `${p}.attn_norm.weight`, dims: [nEmbd], data: ones(nEmbd) },
      { name: `${p}.attn_q.weight`, dims: [nEmbd, nEmbd], data: dense(nEmbd, nEmbd) },
      { name: `${p}.attn_k.weight`, dims: [nEmbd, nEmbd], data: dense(nEmbd, nEmbd) },
      { name: `${p}.attn_v.weight`, dims: [nEmbd, nEmbd], data: dense(nEmbd, nEmbd) },
      { name: `${p}.attn_output.weight`, dims: [nEmbd, nEmbd], data: dense(nEmbd, nEmbd) },
      { name: `${p}.ffn_norm.weight`, dims: [nEmbd], data: ones(nEmbd) },
      { name: `${p}.ffn_gate.weight`, dims: [nEmbd, nFf], data: dense(nFf, nEmbd) },
      { name: `${p}.ffn_up.weight`, dims: [nEmbd, nFf], data: dense(nFf, nEmbd) },
      { name: `${p}.ffn_down.weight`, dims: [nFf, nEmbd], data: dense(nEmbd, nFf) },
    );
  }
  return tensors;
}

export function buildPeerModel(shape: PeerModelShape = PEER_MODEL): Buffer {
  const { nEmbd, nLayers, nHead, nFf, contextLength, seed } = shape;
  const vocab = buildVocab();
  const nVocab = vocab.tokens.length;
  const random = mulberry32(seed);
  // Uniform in [-a, a] with the variance of N(0, 1/fanIn): activations keep their scale through the layers.
  const dense = (rows: number, cols: number) => {
    const out = new Float32Array(rows * cols);
    const a = Math.sqrt(3 / cols);
    for (let i = 0; i < out.length; i++) out[i] = (random() * 2 - 1) * a;
    return out;
  };
  const ones = (k: number) => new Float32Array(k).fill(1);

  const embd = dense(nVocab, nEmbd);
  const output = dense(nVocab, nEmbd);
  const scale = shape.outputScale;
  if (scale !== undefined) output.forEach((x, i) => (output[i] = x * scale));
  vocab.types.forEach((type, token) => {
    const speaks = type === TOKEN_TYPE_NORMAL || (type === TOKEN_TYPE_BYTE && printableByte(vocab.tokens[token]!));
    if (!speaks) output.fill(0, token * nEmbd, (token + 1) * nEmbd);
  });

  const tensors: GgufTensor[] = [
    { name: "token_embd.weight", dims: [nEmbd, nVocab], data: embd },
    { name: "output_norm.weight", dims: [nEmbd], data: ones(nEmbd) },
    { name: "output.weight", dims: [nEmbd, nVocab], data: output },
  ];
  const active = Math.min(nLayers, shape.activeLayers ?? nLayers);
  tensors.push(...denseLayers(active, nEmbd, nFf, dense));
  // (Drawn after the active layers, so a model of `active` layers has the same weights as this one's first.)
  const zeros = (rows: number, cols: number) => new Float32Array(rows * cols);
  tensors.push(...denseLayers(nLayers - active, nEmbd, nFf, zeros).map((t) => ({ ...t, name: t.name.replace(/^blk\.(\d+)/, (_, l: string) => `blk.${Number(l) + active}`) })));
  const stored = shape.blockWeights ?? "f32";
  if (stored !== "f32") for (const t of tensors) if (t.name.startsWith("blk.") && t.dims.length === 2) t.type = stored;

  const metadata = llamaMetadata({
    name: "svc peer bench model",
    description: `Random weights (seed ${seed}) for speed comparisons; not a language model.`,
    contextLength,
    nEmbd,
    nLayers,
    nFf,
    nHead,
    rmsEpsilon: 1e-5,
    vocab,
  });
  return encodeGguf(metadata, tensors);
}

/** Writes the model once (same seed, same bytes); later calls reuse the file. */
export function ensurePeerModel(path: string, shape: PeerModelShape = PEER_MODEL): string {
  if (existsSync(path)) return path;
  mkdirSync(dirname(path), { recursive: true });
  const bytes = buildPeerModel(shape);
  // In slices: one write takes at most 2 GiB, and the 0.8B-parameter model of bench:peer-matrix is 3.3 GB.
  const fd = openSync(`${path}.partial`, "w");
  try {
    for (let at = 0; at < bytes.length; at += 1 << 30) writeSync(fd, bytes, at, Math.min(1 << 30, bytes.length - at));
  } finally {
    closeSync(fd);
  }
  renameSync(`${path}.partial`, path);
  return path;
}
