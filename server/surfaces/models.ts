// The one model the service offers, and the names a request may use for it (Chat and Responses).
import { AppError } from "../core/errors.js";

export const MODEL_ID = "svc-preview";
/** 2026-06-27, the first public release. */
export const MODEL_CREATED = 1782518400;
export const CONTEXT_WINDOW = 200000;

export interface ModelObject {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
  /** The spec's figure for the service; what this server holds per request is loaded_context_length. */
  context_window: number;
  multimodal: boolean;
  modes: Array<"fast" | "thinking">;
  /** Tokens per sequence (prompt plus answer) of the model loaded now; null while none is loaded. */
  loaded_context_length: number | null;
  /** The most one request can generate: the loaded context less the engine's margin; null without a model. */
  max_output_tokens: number | null;
  /** Only when the server generates on upstream inference servers: how many, and that the model is theirs. */
  upstream?: { replicas: number; healthy: number; note: string };
  /**
   * How the loaded model gets images (docs/api.md, "Images"): "vision", the images themselves (it has a
   * vision projector); "ocr", the OCR fallback's text (a text-only model); null while no model is loaded.
   */
  svc_image_input: "vision" | "ocr" | null;
}

/** The spec's upper bound for max_tokens / max_output_tokens. */
const MAX_TOKENS_LIMIT = 200000;

export const UPSTREAM_MODEL_NOTE =
  "This server generates on upstream inference servers; switching the model is theirs to do (restart them with another model), not this server's.";

export function modelObject(
  loaded: { contextSize: number; maxOutputTokens?: number; upstreams?: Array<{ healthy: boolean }>; vision?: unknown } | null = null,
): ModelObject {
  return {
    id: MODEL_ID,
    object: "model",
    created: MODEL_CREATED,
    owned_by: "svc",
    context_window: CONTEXT_WINDOW,
    multimodal: true,
    modes: ["fast", "thinking"],
    loaded_context_length: loaded?.contextSize ?? null,
    max_output_tokens: loaded ? Math.min(MAX_TOKENS_LIMIT, loaded.maxOutputTokens ?? loaded.contextSize) : null,
    ...(loaded?.upstreams
      ? { upstream: { replicas: loaded.upstreams.length, healthy: loaded.upstreams.filter((u) => u.healthy).length, note: UPSTREAM_MODEL_NOTE } }
      : {}),
    svc_image_input: loaded ? (loaded.vision ? "vision" : "ocr") : null,
  };
}

/**
 * svc-preview and its alias svc; the ids of the first release stay accepted and pick a default effort
 * (svc-fast: none, svc-thinking: medium, svc-extended: high) that an explicit reasoning option overrides.
 */
const ALIASES: Record<string, { defaultEffort?: string }> = {
  "svc-preview": {},
  svc: {},
  "svc-fast": { defaultEffort: "none" },
  "svc-thinking": { defaultEffort: "medium" },
  "svc-extended": { defaultEffort: "high" },
};

export function resolveModelAlias(model: string | undefined, param: string): { id: string; defaultEffort?: string } {
  if (model === undefined) return { id: MODEL_ID };
  const alias = ALIASES[model];
  if (!alias)
    throw new AppError("not_found", `The model '${model}' does not exist. Use '${MODEL_ID}' (or its alias 'svc').`, {
      code: "model_not_found",
      param,
    });
  return { id: MODEL_ID, ...alias };
}
