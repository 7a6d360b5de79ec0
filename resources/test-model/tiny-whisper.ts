// The tiny test speech model: a whisper.cpp model file in its ggml format (the layout whisper.cpp's
// whisper_model_load reads: magic, hyperparameters, mel filterbank, vocabulary, named tensors) with one
// encoder and one decoder layer 16 wide and seeded random weights. It hears nothing: what it "transcribes"
// is a nonsense string of invented words from its vocabulary, but it goes through the real engine end to
// end (spectrogram, encoder, decoder, timestamps), the way tiny.gguf does for the language model.
// About 4 MB; whisper.cpp transcribes a few seconds with it in well under a second on one thread.
import { mulberry32 } from "./tiny-model.js";

export const TINY_WHISPER_SEED = 20261124;

/** The syllables the vocabulary's invented words are made of: every word of a transcript is built from them. */
export const TINY_WHISPER_SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "do"] as const;

/** Text tokens before the special ones (whisper's GPT-2 vocabulary has 50256; the loader adds the rest). */
const TEXT_TOKENS = 50256;
const N_VOCAB = 51864; // English-only: 50256 text tokens, the special tokens, 1501 timestamps
const WIDTH = 16;
const HEADS = 2;
const N_AUDIO_CTX = 1500; // 30 s of audio: 3000 mel frames halved by the second convolution
const N_TEXT_CTX = 448;
const N_MELS = 80;
const N_FFT = 201;

/** Token i's text: printable ASCII first (" " among them, which whisper.cpp needs), then invented words. */
export function tinyWhisperToken(i: number): string {
  if (i < 95) return String.fromCharCode(32 + i);
  return " " + String(i).split("").map((digit) => TINY_WHISPER_SYLLABLES[Number(digit)]).join("");
}

class Writer {
  readonly parts: Buffer[] = [];

  int(...values: number[]): void {
    const b = Buffer.alloc(4 * values.length);
    values.forEach((v, i) => b.writeInt32LE(v, i * 4));
    this.parts.push(b);
  }

  floats(values: Float32Array): void {
    this.parts.push(Buffer.from(values.buffer, values.byteOffset, values.byteLength));
  }

  bytes(b: Buffer): void {
    this.int(b.length);
    this.parts.push(b);
  }
}

export function buildTinyWhisperModel(options: { seed?: number } = {}): Buffer {
  const random = mulberry32(options.seed ?? TINY_WHISPER_SEED);
  const w = new Writer();
  w.int(0x67676d6c); // "ggml"
  // n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head,
  // n_text_layer, n_mels, ftype (0: every tensor F32)
  w.int(N_VOCAB, N_AUDIO_CTX, WIDTH, HEADS, 1, N_TEXT_CTX, WIDTH, HEADS, 1, N_MELS, 0);

  // A triangular mel filterbank over the 201 frequency bins (spacing need not be mel for nonsense).
  w.int(N_MELS, N_FFT);
  const filters = new Float32Array(N_MELS * N_FFT);
  const spacing = (N_FFT - 1) / (N_MELS + 1);
  for (let m = 0; m < N_MELS; m++)
    for (let k = 0; k < N_FFT; k++) filters[m * N_FFT + k] = Math.max(0, 1 - Math.abs(k - (m + 1) * spacing) / spacing) * 0.05;
  w.floats(filters);

  w.int(TEXT_TOKENS);
  for (let i = 0; i < TEXT_TOKENS; i++) w.bytes(Buffer.from(tinyWhisperToken(i), "utf8"));

  // Tensors: n_dims, name length, type (0 = F32), the dimensions in ggml order (fastest first), name, data.
  const tensor = (name: string, dims: number[], init: () => number = () => (random() - 0.5) * 0.2) => {
    const count = dims.reduce((a, b) => a * b, 1);
    const nameBytes = Buffer.from(name, "utf8");
    w.int(dims.length, nameBytes.length, 0, ...dims);
    w.parts.push(nameBytes);
    const data = new Float32Array(count);
    for (let i = 0; i < count; i++) data[i] = init();
    w.floats(data);
  };
  const ones = () => 1;
  const zeros = () => 0;
  const S = WIDTH;
  const block = (prefix: string, attentions: string[]) => {
    tensor(`${prefix}.mlp_ln.weight`, [S], ones);
    tensor(`${prefix}.mlp_ln.bias`, [S], zeros);
    tensor(`${prefix}.mlp.0.weight`, [S, 4 * S]);
    tensor(`${prefix}.mlp.0.bias`, [4 * S]);
    tensor(`${prefix}.mlp.2.weight`, [4 * S, S]);
    tensor(`${prefix}.mlp.2.bias`, [S]);
    for (const a of attentions) {
      tensor(`${prefix}.${a}_ln.weight`, [S], ones);
      tensor(`${prefix}.${a}_ln.bias`, [S], zeros);
      tensor(`${prefix}.${a}.query.weight`, [S, S]);
      tensor(`${prefix}.${a}.query.bias`, [S]);
      tensor(`${prefix}.${a}.key.weight`, [S, S]);
      tensor(`${prefix}.${a}.value.weight`, [S, S]);
      tensor(`${prefix}.${a}.value.bias`, [S]);
      tensor(`${prefix}.${a}.out.weight`, [S, S]);
      tensor(`${prefix}.${a}.out.bias`, [S]);
    }
  };
  tensor("encoder.positional_embedding", [S, N_AUDIO_CTX]);
  tensor("encoder.conv1.weight", [3, N_MELS, S]);
  tensor("encoder.conv1.bias", [1, S]);
  tensor("encoder.conv2.weight", [3, S, S]);
  tensor("encoder.conv2.bias", [1, S]);
  tensor("encoder.ln_post.weight", [S], ones);
  tensor("encoder.ln_post.bias", [S], zeros);
  block("encoder.blocks.0", ["attn"]);
  tensor("decoder.positional_embedding", [S, N_TEXT_CTX]);
  tensor("decoder.token_embedding.weight", [S, N_VOCAB]);
  tensor("decoder.ln.weight", [S], ones);
  tensor("decoder.ln.bias", [S], zeros);
  block("decoder.blocks.0", ["attn", "cross_attn"]);
  return Buffer.concat(w.parts);
}
