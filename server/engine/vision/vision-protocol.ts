// The messages between the engine process and its vision process (vision-child.ts, vision-engine.ts). The
// vision process runs llama.cpp's multimodal library (mtmd) through @fugood/llama.node: a second copy of
// llama.cpp, so it lives in a process of its own (two copies in one process clash).
import type { LoadedModelInfo } from "../types.js";

export interface VisionLoadOptions {
  modelPath: string;
  projectorPath: string;
  contextSize: number;
  threads: number;
  /** On a GPU (vision-gpu.ts chooses, beside the text engine): absent, the CPU. */
  gpu?: VisionGpu;
}

/**
 * Where the vision process runs (LoadedModelInfo's vision less the projector): llama.cpp's device names
 * ("CPU", "CUDA0", ...), the model's layers on the GPU, and why not on the GPU asked for.
 */
export type VisionPlacement = Omit<NonNullable<LoadedModelInfo["vision"]>, "projector">;

export interface VisionGpu {
  /** The text engine's GPU backend: llama.node's cuda or vulkan build; Metal is in its default macOS build. */
  backend: "cuda" | "vulkan" | "metal";
  /** The language model's layers to offload; the projector (the image encoder) goes to the GPU with them. */
  layers: number;
}

/** An image as the vision process gets it: a data: URL of the normalised PNG or JPEG. */
export type VisionMedia = string;

export interface VisionCompletion {
  /** The prompt text as our chat wrapper rendered it, with VISION_MEDIA_MARKER where each image goes. */
  prompt: string;
  media: VisionMedia[];
  /** The most to generate; the vision process caps it again by the room the context has. */
  maxTokens: number;
  /** Tokens prompt and answer may take together: a prompt that leaves no room is refused (`too_long`). */
  contextLimit: number;
  temperature: number;
  topP: number;
  topK: number;
  seed: number;
  /** GBNF the whole output must follow (json_object / json_schema output: the engine's own grammar). */
  grammar?: string;
  frequencyPenalty: number;
  presencePenalty: number;
}

export type ToVision =
  | { type: "load"; options: VisionLoadOptions }
  | { type: "tokenize"; id: number; prompt: string; media: VisionMedia[] }
  | { type: "complete"; id: number; completion: VisionCompletion }
  | { type: "abort"; id: number }
  | { type: "close" };

export interface VisionResult {
  /** Prompt tokens, images included (each image as its encoder's embeddings). */
  promptTokens: number;
  /** Prompt tokens evaluated now (the rest came from the KV cache). */
  evaluatedTokens: number;
  completionTokens: number;
  /** The model ended its turn (not the token limit, not an abort). */
  endOfTurn: boolean;
}

export type FromVision =
  | { type: "loaded"; imageSupport: boolean; placement: VisionPlacement }
  | { type: "load_failed"; message: string }
  | { type: "tokens"; id: number; tokens: number; imageTokens: number[] }
  /** Sent before the prompt is read: its tokens, those the KV cache holds already, each image's share, and the most it will generate. */
  | { type: "prompt"; id: number; promptTokens: number; cachedTokens: number; imageTokens: number[]; maxTokens: number }
  /** The prompt leaves no room in the context for an answer: nothing was generated. */
  | { type: "too_long"; id: number; promptTokens: number }
  /** Text of one or more sampled tokens, in order. */
  | { type: "text"; id: number; text: string }
  | { type: "done"; id: number; result: VisionResult }
  | { type: "failed"; id: number; message: string };

/** mtmd's default media marker: each one in the prompt takes the next image. */
export const VISION_MEDIA_MARKER = "<__media__>";
