// The vision process (started by vision-engine.ts in the engine process): the language model and its
// projector loaded in llama.cpp's multimodal library (mtmd) through @fugood/llama.node's prebuilt binaries,
// which npm installs for Linux, macOS and Windows (CPU, CUDA, Vulkan, Metal) with no compiler. It takes the
// prompt our chat wrapper rendered, with a marker where each image goes, and streams the sampled text back;
// everything else (the chat template, reasoning and stop handling, usage) stays with the engine process.
// One completion at a time: the requests queue here in arrival order. llama.node reuses the KV cache of the
// last prompt (images included, by their hash), so the same image twice is read once.
import { createRequire } from "node:module";
import type { FromVision, ToVision, VisionCompletion, VisionLoadOptions } from "./vision-protocol.js";

interface CompletionResult {
  text: string;
  tokens_predicted: number;
  tokens_evaluated: number;
  interrupted: boolean;
  context_full: boolean;
  /** The model ended its turn (an end-of-generation token; a grammar's end allows only that). */
  stopped_eos?: boolean;
  timings: { prompt_n: number };
}
interface Tokenized {
  tokens: ArrayLike<number>;
  /** The three below are absent for a prompt without media. */
  bitmap_hashes?: string[];
  chunk_pos?: number[];
  chunk_pos_media?: number[];
}
interface LlamaContext {
  initMultimodal(options: { path: string; use_gpu?: boolean }): Promise<boolean> | boolean;
  getMultimodalSupport(): Promise<{ vision: boolean }> | { vision: boolean };
  tokenize(text: string, options?: { media_paths?: string[] }): Promise<Tokenized>;
  completion(options: Record<string, unknown>, callback: (token: { token: string }) => void): Promise<CompletionResult>;
  stopCompletion(): void;
  release(): Promise<void>;
  getUsedDevices(): string[];
}
interface LlamaModule {
  loadModel(options: Record<string, unknown>): Promise<LlamaContext>;
  /** Whether llama.node's build for a GPU backend loads here (its package installed, its runtime present). */
  isLibVariantAvailable(variant: "cuda" | "vulkan"): Promise<boolean>;
}

const require = createRequire(import.meta.url);

function send(message: FromVision): void {
  process.send?.(message);
}

let context: LlamaContext | null = null;
let current: number | null = null;
const aborted = new Set<number>();
let queue: Promise<unknown> = Promise.resolve();
/** The last completion's prompt, position by position (a token id, or its image's hash): what the KV cache holds. */
let held: Array<number | string> = [];

/** Each prompt position's identity: its token, or (inside an image) the image's hash. */
function positions(t: Tokenized): Array<number | string> {
  const out: Array<number | string> = Array.from(t.tokens);
  const all = t.bitmap_hashes ?? [];
  const hashes = all.filter((h) => h.startsWith("chunk:"));
  (t.chunk_pos_media ?? []).forEach((start, k) => {
    const end = (t.chunk_pos ?? []).find((p) => p > start) ?? out.length;
    const hash = hashes[k] ?? `${k}:${all.join(",")}`;
    for (let i = start; i < end; i++) out[i] = hash;
  });
  return out;
}

function imageTokenCounts(t: Tokenized): number[] {
  // chunk_pos: where each chunk (text or image) starts; an image chunk runs to the next chunk's start.
  return (t.chunk_pos_media ?? []).map((start) => ((t.chunk_pos ?? []).find((p) => p > start) ?? t.tokens.length) - start);
}

function serially<T>(work: () => Promise<T>): Promise<T> {
  const next = queue.then(work, work);
  queue = next.catch(() => undefined);
  return next;
}

async function load(options: VisionLoadOptions): Promise<void> {
  try {
    const llama = require("@fugood/llama.node") as LlamaModule;
    // llama.node's GPU builds are packages of their own (npm installs those of this platform); one that does
    // not load here (no CUDA runtime, no Vulkan driver) leaves the vision process on the CPU, and says so.
    let gpu = options.gpu;
    let note: string | undefined;
    if (gpu && gpu.backend !== "metal" && !(await llama.isLibVariantAvailable(gpu.backend))) {
      note = `llama.node's ${gpu.backend} build does not load on this machine`;
      gpu = undefined;
    }
    context = await llama.loadModel({
      model: options.modelPath,
      n_ctx: options.contextSize,
      n_threads: options.threads,
      lib_variant: gpu && gpu.backend !== "metal" ? gpu.backend : "default",
      n_gpu_layers: gpu ? gpu.layers : 0,
      n_parallel: 1,
      use_mmap: true,
    });
    const ok = await context.initMultimodal({ path: options.projectorPath, use_gpu: gpu !== undefined });
    if (!ok) throw new Error(`the projector ${options.projectorPath} could not be loaded for this model`);
    const support = await context.getMultimodalSupport();
    // llama.node names the GPU devices it uses, none on the CPU.
    const devices = context.getUsedDevices();
    send({ type: "loaded", imageSupport: support.vision, placement: { devices: devices.length > 0 ? devices : ["CPU"], gpuLayers: gpu ? gpu.layers : 0, ...(note ? { note } : {}) } });
  } catch (err) {
    send({ type: "load_failed", message: (err as Error)?.message ?? String(err) });
  }
}

/** Prompt tokens with the images in place, and how many each image takes. */
async function tokenize(id: number, prompt: string, media: string[]): Promise<void> {
  try {
    const result = await context!.tokenize(prompt, media.length > 0 ? { media_paths: media } : undefined);
    send({ type: "tokens", id, tokens: result.tokens.length, imageTokens: imageTokenCounts(result) });
  } catch (err) {
    send({ type: "failed", id, message: (err as Error)?.message ?? String(err) });
  }
}

async function complete(id: number, c: VisionCompletion): Promise<void> {
  if (aborted.delete(id)) {
    send({ type: "done", id, result: { promptTokens: 0, evaluatedTokens: 0, completionTokens: 0, endOfTurn: false } });
    return;
  }
  current = id;
  try {
    // What the cache will serve: the prompt's agreement with the last one (llama.cpp reads the last token again).
    const tokenized = await context!.tokenize(c.prompt, c.media.length > 0 ? { media_paths: c.media } : undefined);
    const prompt = positions(tokenized);
    const room = c.contextLimit - prompt.length;
    if (room < 1) {
      send({ type: "too_long", id, promptTokens: prompt.length });
      return;
    }
    const maxTokens = Math.min(c.maxTokens, room);
    let same = 0;
    while (same < prompt.length && same < held.length && prompt[same] === held[same]) same++;
    send({ type: "prompt", id, promptTokens: prompt.length, cachedTokens: Math.min(same, prompt.length - 1), imageTokens: imageTokenCounts(tokenized), maxTokens });
    held = prompt;
    let streamed = "";
    let finished = false;
    const result = await context!.completion(
      {
        prompt: c.prompt,
        media_paths: c.media.length > 0 ? c.media : undefined,
        n_predict: maxTokens,
        // The same sampler as the text engine's: temperature, top-p, top-k and the OpenAI penalties only
        // (llama.node's defaults add min-p 0.05, DRY and a repeat penalty window); 0 is greedy.
        temperature: c.temperature,
        top_p: c.topP,
        top_k: c.temperature <= 0 ? 1 : c.topK,
        min_p: 0,
        typical_p: 1,
        dry_multiplier: 0,
        xtc_probability: 0,
        penalty_repeat: 1,
        penalty_freq: c.frequencyPenalty,
        penalty_present: c.presencePenalty,
        seed: c.seed >>> 1,
        ...(c.grammar !== undefined ? { grammar: c.grammar } : {}),
      },
      (token) => {
        if (!token.token || finished) return;
        streamed += token.token;
        send({ type: "text", id, text: token.token });
      },
    );
    // The binding's token callbacks can trail its result: what the stream has not carried yet goes now, and
    // nothing after it (the result's text is the whole output).
    finished = true;
    if (result.text.length > streamed.length && result.text.startsWith(streamed)) send({ type: "text", id, text: result.text.slice(streamed.length) });
    const promptTokens = result.tokens_evaluated - result.tokens_predicted;
    send({
      type: "done",
      id,
      result: {
        promptTokens,
        evaluatedTokens: Math.min(promptTokens, result.timings.prompt_n),
        completionTokens: result.tokens_predicted,
        // llama.node's own flag: its token count is not a reliable test (at the limit it has read one less).
        endOfTurn: (result.stopped_eos ?? result.tokens_predicted < maxTokens) && !result.interrupted && !result.context_full && !aborted.has(id),
      },
    });
  } catch (err) {
    send({ type: "failed", id, message: (err as Error)?.message ?? String(err) });
  } finally {
    current = null;
    aborted.delete(id);
  }
}

process.on("message", (raw) => {
  const message = raw as ToVision;
  switch (message.type) {
    case "load":
      void load(message.options);
      return;
    case "tokenize":
      void serially(() => tokenize(message.id, message.prompt, message.media));
      return;
    case "complete":
      void serially(() => complete(message.id, message.completion));
      return;
    case "abort":
      aborted.add(message.id);
      if (current === message.id) context?.stopCompletion();
      return;
    case "close":
      void serially(async () => {
        await context?.release();
        process.exit(0);
      });
      return;
  }
});

// The engine process gone: nothing is left to serve.
process.on("disconnect", () => process.exit(0));
