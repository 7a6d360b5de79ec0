// The recipe for the tiny test model: a one-layer llama whose attention and feed-forward blocks are zeroed,
// so the residual stream is the one-hot embedding of the current token and the output matrix is a
// first-order Markov transition table. The table is crafted (and seeded) so that generation:
//   "\n" -> <think> -> a few thought words -> </think> -> answer words -> <|im_end|>
// Greedy decoding walks a fixed chain; sampling walks a short random path. Byte tokens give JSON grammars
// something to choose from and prefer closing quotes and brackets, so constrained output stays short.
import { readFileSync } from "node:fs";
import { encodeGguf, type GgufTensor, type GgufValue } from "./gguf-writer.js";

export const TINY_MODEL_SEED = 20261122;

const THOUGHT_WORDS = [
  "hmm", "let", "me", "consider", "the", "question", "first", "maybe",
  "it", "seems", "so", "then", "check", "again", "okay", "right",
];
const ANSWER_WORDS = [
  "Sure", "here", "is", "a", "short", "answer", "about", "blue",
  "rivers", "and", "quiet", "stones", "under", "seven", "bright", "stars",
];
/** How many links the greedy chains have before they close the thought / end the turn. */
const GREEDY_THOUGHT_LENGTH = 5;
const GREEDY_ANSWER_LENGTH = 6;

const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, userDefined: 4, byte: 6 } as const;

export interface TinyVocab {
  tokens: string[];
  types: number[];
  id: (piece: string) => number;
  thoughtWords: number[];
  answerWords: number[];
}

/** A small seeded PRNG (also used by tests that need reproducible randomness). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/**
 * `scriptedString`: a token holding this text, last in the vocabulary (see TinyModelOptions). Without it the
 * vocabulary is the tiny model's own, unchanged.
 */
export function buildVocab(seed = TINY_MODEL_SEED, scriptedString?: string): TinyVocab {
  const random = mulberry32(seed);
  const tokens: string[] = [];
  const types: number[] = [];
  const add = (piece: string, type: number) => {
    tokens.push(piece);
    types.push(type);
  };
  add("<unk>", TOKEN_TYPE.unknown);
  add("<s>", TOKEN_TYPE.control);
  add("</s>", TOKEN_TYPE.control);
  add("<|im_start|>", TOKEN_TYPE.control);
  add("<|im_end|>", TOKEN_TYPE.control);
  add("<|endoftext|>", TOKEN_TYPE.control);
  for (const tag of ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>"])
    add(tag, TOKEN_TYPE.userDefined);
  for (let b = 0; b < 256; b++) add(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`, TOKEN_TYPE.byte);
  add("\u2581", TOKEN_TYPE.normal);
  const thoughtStart = tokens.length;
  for (const w of shuffled(THOUGHT_WORDS, random)) add(`\u2581${w}`, TOKEN_TYPE.normal);
  const answerStart = tokens.length;
  for (const w of shuffled(ANSWER_WORDS, random)) add(`\u2581${w}`, TOKEN_TYPE.normal);
  if (scriptedString !== undefined) add(scriptedString, TOKEN_TYPE.normal);

  const index = new Map(tokens.map((t, i) => [t, i]));
  return {
    tokens,
    types,
    id(piece) {
      const found = index.get(piece);
      if (found === undefined) throw new Error(`no token ${JSON.stringify(piece)}`);
      return found;
    },
    thoughtWords: THOUGHT_WORDS.map((_, i) => thoughtStart + i),
    answerWords: ANSWER_WORDS.map((_, i) => answerStart + i),
  };
}

/** How many characters the echo model's answer has (TinyModelOptions.echo). */
export const ECHO_LENGTH = 60;

/**
 * The echo model's answer (TinyModelOptions.echo): ECHO_LENGTH printable ASCII characters, none a space, in
 * a seeded order, each once. The tokenizer reads such text back into the very byte tokens the model wrote.
 */
export function echoChain(seed = TINY_MODEL_SEED): string {
  const printable = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i));
  return shuffled(printable, mulberry32(seed ^ 0xec40)).slice(0, ECHO_LENGTH).join("");
}

/** transitions[current][next] = logit. With `scriptedString`, the token holding it follows a quote above all. */
export function buildTransitions(vocab: TinyVocab, seed = TINY_MODEL_SEED, scriptedString?: string, echo = false): Float32Array[] {
  const random = mulberry32(seed ^ 0x5eed);
  const n = vocab.tokens.length;
  const byte = (ch: string) => vocab.id(`<0x${ch.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}>`);
  const imEnd = vocab.id("<|im_end|>");
  const think = vocab.id("<think>");
  const thinkEnd = vocab.id("</think>");
  const toolCall = vocab.id("<tool_call>");
  const toolCallEnd = vocab.id("</tool_call>");
  const T = vocab.thoughtWords;
  const A = vocab.answerWords;

  const base = () => new Float32Array(n).fill(-30);
  const rows: Float32Array[] = [];
  for (let s = 0; s < n; s++) {
    // Default row: end the turn, or close whatever JSON structure a grammar has open.
    const row = base();
    row[imEnd] = 3;
    for (const ch of ['"', "}", "]"]) row[byte(ch)] = 2;
    rows.push(row);
  }
  const jitter = () => (random() - 0.5) * 0.2;

  const newline = rows[byte("\n")]!;
  newline[imEnd] = -30;
  newline[think] = 10;
  for (const a of A) newline[a] = 4 + jitter();
  newline[A[0]!] = 6;
  newline[toolCall] = 5.5;

  const thinkRow = base();
  for (const t of T) thinkRow[t] = 5 + jitter();
  thinkRow[T[0]!] = 8;
  rows[think] = thinkRow;

  T.forEach((t, i) => {
    const row = base();
    for (const other of T) row[other] = 4 + jitter();
    if (i < GREEDY_THOUGHT_LENGTH - 1) {
      row[T[i + 1]!] = 7;
      row[thinkEnd] = 6;
    } else if (i === GREEDY_THOUGHT_LENGTH - 1) {
      row[thinkEnd] = 8;
    } else {
      row[T[Math.floor(random() * T.length)]!] = 7;
      row[thinkEnd] = 6;
    }
    rows[t] = row;
  });

  const thinkEndRow = base();
  for (const a of A) thinkEndRow[a] = 5 + jitter();
  thinkEndRow[A[0]!] = 8;
  thinkEndRow[toolCall] = 6.5;
  rows[thinkEnd] = thinkEndRow;

  A.forEach((a, i) => {
    const row = base();
    for (const other of A) row[other] = 4 + jitter();
    if (i < GREEDY_ANSWER_LENGTH - 1) {
      row[A[i + 1]!] = 7;
      row[imEnd] = 5.5;
    } else if (i === GREEDY_ANSWER_LENGTH - 1) {
      row[imEnd] = 8;
    } else {
      row[A[Math.floor(random() * A.length)]!] = 7;
      row[imEnd] = 5.5;
    }
    rows[a] = row;
  });

  const toolCallEndRow = base();
  toolCallEndRow[imEnd] = 8;
  rows[toolCallEnd] = toolCallEndRow;

  // Where a grammar leaves a JSON string open, its first token is the scripted one (then the quote closes it).
  if (scriptedString !== undefined) rows[byte('"')]![vocab.id(scriptedString)] = 9;

  if (echo) {
    // The answer is echoChain(): the line the assistant's turn starts on, and a closed thought, lead to its
    // first character, each character to the next, the last one ends the turn.
    const chain = [...echoChain(seed)].map(byte);
    for (const start of [rows[byte("\n")]!, rows[thinkEnd]!]) start[chain[0]!] = 12;
    chain.forEach((c, i) => {
      const row = base();
      row[i + 1 < chain.length ? chain[i + 1]! : imEnd] = 8;
      row[imEnd] = Math.max(row[imEnd]!, 3);
      rows[c] = row;
    });
  }
  return rows;
}

/** The GGUF metadata of a llama-architecture model with this project's vocabulary and chat template. */
export function llamaMetadata(shape: {
  name: string;
  description: string;
  contextLength: number;
  nEmbd: number;
  nLayers: number;
  nFf: number;
  nHead: number;
  rmsEpsilon: number;
  vocab: TinyVocab;
}): Array<[string, GgufValue]> {
  const { vocab, nEmbd, nHead } = shape;
  const template = readFileSync(new URL("./chat-template.jinja", import.meta.url), "utf8");
  const u32 = (value: number): GgufValue => ({ type: "u32", value });
  return [
    ["general.architecture", { type: "string", value: "llama" }],
    ["general.name", { type: "string", value: shape.name }],
    ["general.description", { type: "string", value: shape.description }],
    ["llama.context_length", u32(shape.contextLength)],
    ["llama.embedding_length", u32(nEmbd)],
    ["llama.block_count", u32(shape.nLayers)],
    ["llama.feed_forward_length", u32(shape.nFf)],
    ["llama.attention.head_count", u32(nHead)],
    ["llama.attention.head_count_kv", u32(nHead)],
    ["llama.rope.dimension_count", u32(nEmbd / nHead)],
    ["llama.attention.layer_norm_rms_epsilon", { type: "f32", value: shape.rmsEpsilon }],
    ["llama.vocab_size", u32(vocab.tokens.length)],
    ["tokenizer.ggml.model", { type: "string", value: "llama" }],
    ["tokenizer.ggml.tokens", { type: "array", itemType: "string", value: vocab.tokens }],
    ["tokenizer.ggml.scores", { type: "array", itemType: "f32", value: vocab.tokens.map(() => 0) }],
    ["tokenizer.ggml.token_type", { type: "array", itemType: "i32", value: vocab.types }],
    ["tokenizer.ggml.bos_token_id", u32(vocab.id("<s>"))],
    ["tokenizer.ggml.eos_token_id", u32(vocab.id("<|im_end|>"))],
    ["tokenizer.ggml.unknown_token_id", u32(vocab.id("<unk>"))],
    ["tokenizer.ggml.padding_token_id", u32(vocab.id("<|endoftext|>"))],
    ["tokenizer.ggml.add_bos_token", { type: "bool", value: false }],
    ["tokenizer.ggml.add_eos_token", { type: "bool", value: false }],
    ["tokenizer.ggml.add_space_prefix", { type: "bool", value: false }],
    ["tokenizer.chat_template", { type: "string", value: template }],
  ];
}

export interface TinyModelOptions {
  seed?: number;
  contextLength?: number;
  /**
   * Values per attention head (the embedding length, 384, over the head count); default 64. The heads'
   * weights are zero, so this changes no output: 16 gives a model whose heads a q8_0 KV cache cannot take.
   */
  headSize?: number;
  /** Adds a metadata string of this many bytes, for tests that need a larger file (downloads in chunks). */
  padBytes?: number;
  /**
   * A token holding this text, which greedy decoding writes first inside any JSON string a grammar leaves
   * open (it follows a quote above all else): a forced tool call then carries it as its string argument,
   * as a model following an injected instruction would (bench:soak scripts a calculator bomb with it).
   */
  scriptedString?: string;
  /**
   * The echo model (speculation's tests and bench): its answer, after the thought if any, is echoChain()
   * (ECHO_LENGTH printable characters, then the end of the turn), so a conversation that holds it once
   * makes every guess of prompt lookup right. Everything else is the tiny model's.
   */
  echo?: boolean;
  /**
   * How the layer's matrices are stored. Their weights are zero, so Q8_0 changes no output: the model answers
   * as the F32 one does while llama.cpp takes its quantized paths (on CPUs with AMX, its tile kernels).
   */
  blockWeights?: "f32" | "q8_0";
}

export function buildTinyModel(options: TinyModelOptions = {}): Buffer {
  const seed = options.seed ?? TINY_MODEL_SEED;
  const vocab = buildVocab(seed, options.scriptedString);
  const rows = buildTransitions(vocab, seed, options.scriptedString, options.echo);
  const nVocab = vocab.tokens.length;
  const nEmbd = 384;
  const nHead = nEmbd / (options.headSize ?? 64);
  const nFf = 64;
  if (nVocab > nEmbd) throw new Error("vocabulary must fit the one-hot embedding");
  if (!Number.isInteger(nHead)) throw new Error(`the head size must divide ${nEmbd}`);

  const embd = new Float32Array(nEmbd * nVocab);
  for (let t = 0; t < nVocab; t++) embd[t * nEmbd + t] = 1;
  const output = new Float32Array(nEmbd * nVocab);
  for (let next = 0; next < nVocab; next++)
    for (let current = 0; current < nVocab; current++) output[next * nEmbd + current] = rows[current]![next]!;

  const ones = (k: number, v = 1) => new Float32Array(k).fill(v);
  const zeros = (k: number) => new Float32Array(k);
  const tensors: GgufTensor[] = [
    { name: "token_embd.weight", dims: [nEmbd, nVocab], data: embd },
    // RMSNorm turns a one-hot vector into sqrt(nEmbd) at its index; scale it back to 1.
    { name: "output_norm.weight", dims: [nEmbd], data: ones(nEmbd, 1 / Math.sqrt(nEmbd)) },
    { name: "output.weight", dims: [nEmbd, nVocab], data: output },
    { name: "blk.0.attn_norm.weight", dims: [nEmbd], data: ones(nEmbd) },
    { name: "blk.0.attn_q.weight", dims: [nEmbd, nEmbd], data: zeros(nEmbd * nEmbd) },
    { name: "blk.0.attn_k.weight", dims: [nEmbd, nEmbd], data: zeros(nEmbd * nEmbd) },
    { name: "blk.0.attn_v.weight", dims: [nEmbd, nEmbd], data: zeros(nEmbd * nEmbd) },
    { name: "blk.0.attn_output.weight", dims: [nEmbd, nEmbd], data: zeros(nEmbd * nEmbd) },
    { name: "blk.0.ffn_norm.weight", dims: [nEmbd], data: ones(nEmbd) },
    { name: "blk.0.ffn_gate.weight", dims: [nEmbd, nFf], data: zeros(nEmbd * nFf) },
    { name: "blk.0.ffn_up.weight", dims: [nEmbd, nFf], data: zeros(nEmbd * nFf) },
    { name: "blk.0.ffn_down.weight", dims: [nFf, nEmbd], data: zeros(nEmbd * nFf) },
  ].map((t) => (t.name.startsWith("blk.") && t.dims.length === 2 ? { ...t, type: options.blockWeights ?? "f32" } : t));

  const metadata = llamaMetadata({
    name: "svc tiny test model",
    description: `Seeded Markov-chain test model (seed ${seed}); not a language model.`,
    // Long enough for a coding agent's first request (Claude Code's is ~49k tokens under this tokenizer).
    contextLength: options.contextLength ?? 65536,
    nEmbd,
    nLayers: 1,
    nFf,
    nHead,
    rmsEpsilon: 1e-6,
    vocab,
  });
  if (options.padBytes) metadata.push(["svc.test.padding", { type: "string", value: "x".repeat(options.padBytes) }]);
  return encodeGguf(metadata, tensors);
}

/** The text greedy decoding produces, for tests that pin exact output. */
export function greedyTexts(seed = TINY_MODEL_SEED): { thought: string; answer: string } {
  const vocab = buildVocab(seed);
  const word = (id: number) => vocab.tokens[id]!.replace("\u2581", " ");
  return {
    thought: vocab.thoughtWords.slice(0, GREEDY_THOUGHT_LENGTH).map(word).join(""),
    answer: vocab.answerWords.slice(0, GREEDY_ANSWER_LENGTH).map(word).join(""),
  };
}
