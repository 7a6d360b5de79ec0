// The echo model of bench:spec (issue 44): the peer model's shape and cost (a llama GGUF of about 110 MB in
// F32, n_embd 512, 8 layers, 8 heads, n_ff 1536, dense seeded random layer weights, the test model's
// vocabulary and chat template) whose greedy continuation is a fixed chain by construction: token x is
// followed by f(x), f one cycle over ECHO_PERIOD tokens. Every answer is the same chain from the token after
// the template's last one ("\n"), whatever the prompt: a prompt that quotes that text gives prompt lookup an
// answer it can draft entirely, a prompt that does not gives it nothing (the answer never repeats itself
// while it is shorter than the cycle).
//
// How: the token embedding is large (RMS EMBEDDING_RMS, against a few units added by the layers after their
// RMSNorms), so the last hidden state after output_norm is normalize(emb(x)) to within about 1%; embeddings
// are random, so near-orthogonal in 512 dimensions; the output row of f(x) is (TARGET_LOGIT / n_embd) ×
// normalize(emb(x)): f(x)'s logit is about TARGET_LOGIT, every other cycle token's is within a few units of
// 0, and the rows of the tokens outside the cycle are zero (logit 0: never produced, so greedy never ends
// the turn, never opens a thought or a tool call). A token outside the cycle (controls, tags, words, other
// bytes) shares the embedding of a cycle token that ends a character, so it too is followed by the cycle;
// "\n" shares the embedding of the cycle's last token, so every answer starts at the cycle's first token.
//
// Which tokens the cycle holds: only those the tokenizer gives back when the answer's text is sent again in
// a prompt, since prompt lookup matches tokens, not text. This vocabulary has no pieces between bytes and
// whole words, so a word such as " Sure" comes back as "▁" and four byte tokens, and byte 0x20 comes back as
// "▁": neither can be in the cycle. What can: the 94 printable ASCII bytes but space, "▁" (a space), "▁a"
// (the one word of a single character, which "▁" then "a" becomes: so "▁" is never followed by "a"), and
// byte tokens that spell whole UTF-8 characters (a lead byte then its continuation bytes), each byte once:
// 18 two-byte letters (Latin, Greek, Cyrillic, Armenian), 11 three-byte CJK or Hangul characters and one
// four-byte CJK character, all unchanged by Unicode normalization: 169 tokens. The text also never holds a
// control or tag token's text ("<s>", "<think>", ...), which a server's tokenizer would read as that token.
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { encodeGguf, type GgufTensor } from "../resources/test-model/gguf-writer.js";
import { buildVocab, llamaMetadata, mulberry32, type TinyVocab } from "../resources/test-model/tiny-model.js";
import { denseLayers, PEER_MODEL } from "./peer-model.js";

export const ECHO_MODEL = { ...PEER_MODEL, seed: 44 } as const;
/** `weights`: how the blocks' matrices are stored, F32 (the default) or Q8_0 (the embedding and output stay F32). */
export type EchoModelShape = { nEmbd: number; nLayers: number; nHead: number; nFf: number; contextLength: number; seed: number; weights?: "f32" | "q8_0" };

/** RMS of the token embedding; the 16 blocks add a few units (RMS) to it, whatever its size. */
const EMBEDDING_RMS = 300;
/** The logit of the chain's next token; other cycle tokens' logits are about ±1 each (±4 at most). */
const TARGET_LOGIT = 24;

const TOKEN_TYPE_NORMAL = 1;
const TOKEN_TYPE_BYTE = 6;

const byteToken = (vocab: TinyVocab, b: number) => vocab.id(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);

/**
 * The multibyte characters of the cycle as lead bytes and the continuation bytes each may take: [lead,
 * first continuation from, to] (the other continuations of 3- and 4-byte characters take any of 0x80–0xBF).
 * Ranges where every code point is a letter or an ideograph that Unicode normalization leaves alone.
 */
const MULTIBYTE_LEADS: Array<[number, number, number]> = [
  // Two bytes: Latin-1 letters to Armenian (no combining marks: 0xCC, 0xCD and part of 0xD2 left out).
  [0xc2, 0xa1, 0xac], [0xc3, 0x80, 0xbf], [0xc4, 0x80, 0xbf], [0xc5, 0x80, 0xbf], [0xc6, 0x80, 0xbf],
  [0xc7, 0x80, 0xbf], [0xc8, 0x80, 0xbf], [0xc9, 0x80, 0xbf], [0xca, 0x80, 0xbf], [0xcb, 0x80, 0xbf],
  [0xce, 0x91, 0xbf], [0xcf, 0x80, 0xbf], [0xd0, 0x80, 0xbf], [0xd1, 0x80, 0xbf], [0xd2, 0x8a, 0xbf],
  [0xd3, 0x80, 0xbf], [0xd4, 0x80, 0xbf], [0xd5, 0x80, 0x86],
  // Three bytes: CJK (U+3400–U+9FFF) and Hangul syllables (U+AC00–U+D77F).
  [0xe3, 0x90, 0xbf], [0xe4, 0x80, 0xbf], [0xe5, 0x80, 0xbf], [0xe6, 0x80, 0xbf], [0xe7, 0x80, 0xbf],
  [0xe8, 0x80, 0xbf], [0xe9, 0x80, 0xbf], [0xea, 0xb0, 0xbf], [0xeb, 0x80, 0xbf], [0xec, 0x80, 0xbf],
  [0xed, 0x80, 0x9d],
  // Four bytes: CJK Extension B (U+20000–U+29FFF).
  [0xf0, 0xa0, 0xa9],
];

function utf8Length(lead: number): number {
  return lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
}

/**
 * The units of the cycle (each a list of token ids: one token, or the bytes of one character), drawn with
 * `random`: each multibyte character takes continuation bytes no other character has.
 */
function cycleUnits(vocab: TinyVocab, random: () => number): number[][] {
  const units: number[][] = [];
  for (let b = 0x21; b < 0x7f; b++) units.push([byteToken(vocab, b)]);
  units.push([vocab.id("\u2581")], [vocab.id("\u2581a")]);
  const free = new Set(Array.from({ length: 64 }, (_, i) => 0x80 + i));
  const take = (from: number, to: number): number => {
    const options = [...free].filter((c) => c >= from && c <= to);
    if (options.length === 0) throw new Error("echo model: out of continuation bytes");
    const c = options[Math.floor(random() * options.length)]!;
    free.delete(c);
    return c;
  };
  // The narrowest ranges first, so each still finds a free byte.
  const leads = [...MULTIBYTE_LEADS].sort((a, b) => a[2] - a[1] - (b[2] - b[1]));
  for (const [lead, from, to] of leads) {
    const bytes = [lead, take(from, to)];
    while (bytes.length < utf8Length(lead)) bytes.push(take(0x80, 0xbf));
    units.push(bytes.map((b) => byteToken(vocab, b)));
  }
  return units;
}

/** The bytes a token stands for in text. */
function tokenBytes(vocab: TinyVocab, token: number): Buffer {
  const piece = vocab.tokens[token]!;
  const byte = /^<0x([0-9A-F]{2})>$/.exec(piece);
  if (byte) return Buffer.from([parseInt(byte[1]!, 16)]);
  return Buffer.from(piece.replaceAll("\u2581", " "), "utf8");
}

export interface EchoChain {
  /** The cycle's tokens in order: every answer is cycle[0], cycle[1], ... and again from cycle[0]. */
  cycle: number[];
  /** For each token outside the cycle, the cycle token whose embedding it shares. */
  alias: Map<number, number>;
  vocab: TinyVocab;
}

/** The chain of the model with this seed (deterministic: the builder and the bench draw the same one). */
export function echoChain(seed: number = ECHO_MODEL.seed): EchoChain {
  const vocab = buildVocab();
  const random = mulberry32(seed ^ 0xec40);
  const space = vocab.id("\u2581");
  const lowerA = byteToken(vocab, 0x61);
  const specials = vocab.tokens.filter((_, i) => vocab.types[i] !== TOKEN_TYPE_NORMAL && vocab.types[i] !== TOKEN_TYPE_BYTE);
  for (let attempt = 0; attempt < 1000; attempt++) {
    const units = cycleUnits(vocab, random);
    for (let i = units.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [units[i], units[j]] = [units[j]!, units[i]!];
    }
    // Start at a letter, so that no server trims the answer's first character.
    const start = units.findIndex((u) => u.length === 1 && /^[A-Za-z]$/.test(tokenBytes(vocab, u[0]!).toString()));
    const cycle = [...units.slice(start), ...units.slice(0, start)].flat();
    const next = (i: number) => cycle[(i + 1) % cycle.length]!;
    if (cycle.some((t, i) => t === space && next(i) === lowerA)) continue;
    const text = Buffer.concat([...cycle, ...cycle].map((t) => tokenBytes(vocab, t))).toString("utf8");
    if (specials.some((s) => text.includes(s))) continue;
    // Tokens outside the cycle: the embedding of a token that ends a unit (so what follows starts a character).
    const unitEnds = units.map((u) => u.at(-1)!);
    const inCycle = new Set(cycle);
    const alias = new Map<number, number>();
    vocab.tokens.forEach((_, t) => {
      if (!inCycle.has(t)) alias.set(t, unitEnds[Math.floor(random() * unitEnds.length)]!);
    });
    alias.set(byteToken(vocab, 0x0a), cycle.at(-1)!);
    return { cycle, alias, vocab };
  }
  throw new Error("echo model: no cycle met the constraints");
}

/** How many tokens the chain runs before it repeats itself. */
export const ECHO_PERIOD = echoChain().cycle.length;

/**
 * The text of the first `tokens` tokens of every greedy answer (a character cut by the end is left out, as
 * a server holds back an incomplete one).
 */
export function echoAnswer(tokens: number, seed: number = ECHO_MODEL.seed): string {
  const { cycle, vocab } = echoChain(seed);
  const bytes = Buffer.concat(Array.from({ length: tokens }, (_, i) => tokenBytes(vocab, cycle[i % cycle.length]!)));
  return bytes.toString("utf8").replace(/\uFFFD+$/, "");
}

export function buildEchoModel(shape: EchoModelShape = ECHO_MODEL): Buffer {
  const { nEmbd, nLayers, nHead, nFf, contextLength, seed } = shape;
  const { cycle, alias, vocab } = echoChain(seed);
  const nVocab = vocab.tokens.length;
  const random = mulberry32(seed);
  // Uniform in [-a, a] with the variance of N(0, 1/fanIn), as the peer model: the blocks compute like a real model's.
  const dense = (rows: number, cols: number) => {
    const out = new Float32Array(rows * cols);
    const a = Math.sqrt(3 / cols);
    for (let i = 0; i < out.length; i++) out[i] = (random() * 2 - 1) * a;
    return out;
  };
  const ones = (k: number) => new Float32Array(k).fill(1);

  const embd = new Float32Array(nVocab * nEmbd);
  const row = (m: Float32Array, t: number) => m.subarray(t * nEmbd, (t + 1) * nEmbd);
  const a = EMBEDDING_RMS * Math.sqrt(3);
  for (const t of cycle) for (let i = 0; i < nEmbd; i++) embd[t * nEmbd + i] = (random() * 2 - 1) * a;
  for (const [t, same] of alias) row(embd, t).set(row(embd, same));

  // The output row of f(x) is the direction of emb(x), scaled so that f(x)'s logit is TARGET_LOGIT.
  const output = new Float32Array(nVocab * nEmbd);
  cycle.forEach((x, i) => {
    const e = row(embd, x);
    const rms = Math.sqrt(e.reduce((s, v) => s + v * v, 0) / nEmbd);
    const out = row(output, cycle[(i + 1) % cycle.length]!);
    for (let k = 0; k < nEmbd; k++) out[k] = (TARGET_LOGIT / nEmbd) * (e[k]! / rms);
  });

  const tensors: GgufTensor[] = [
    { name: "token_embd.weight", dims: [nEmbd, nVocab], data: embd },
    { name: "output_norm.weight", dims: [nEmbd], data: ones(nEmbd) },
    { name: "output.weight", dims: [nEmbd, nVocab], data: output },
  ];
  // Q8_0 blocks: the chain stands (the embedding dominates what the blocks add), the matrices cost what a
  // quantized model's do.
  tensors.push(...denseLayers(nLayers, nEmbd, nFf, dense).map((t) => (shape.weights === "q8_0" && t.dims.length === 2 ? { ...t, type: "q8_0" as const } : t)));

  const metadata = llamaMetadata({
    name: "svc spec bench echo model",
    description: `Random layers (seed ${seed}) under a fixed greedy chain of ${cycle.length} tokens, for speculative decoding benchmarks; not a language model.`,
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
export function ensureEchoModel(path: string, shape: EchoModelShape = ECHO_MODEL): string {
  if (existsSync(path)) return path;
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(`${path}.partial`, buildEchoModel(shape));
  renameSync(`${path}.partial`, path);
  return path;
}

// `tsx bench/spec-model.ts [PATH]`: writes the model (default .cache/spec/echo.gguf) and prints its chain. (By
// its own name too: bundled into bench/spec.mjs for a device run, import.meta.url is the bundle's.)
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1] && /spec-model\.[cm]?[jt]s$/.test(process.argv[1])) {
  const path = process.argv[2] ?? fileURLToPath(new URL("../.cache/spec/echo.gguf", import.meta.url));
  ensureEchoModel(path);
  console.log(`${path}\nperiod ${ECHO_PERIOD} tokens; every greedy answer starts:\n${JSON.stringify(echoAnswer(ECHO_PERIOD))}`);
}
