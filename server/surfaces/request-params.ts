// Request helpers shared by the OpenAI-style surfaces (Chat Completions and Responses).
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { invalidRequest } from "../core/errors.js";
import type { FileSource, GlassboxOptions } from "../core/inference.js";

/** OpenAI clients send null for "not set"; accept it wherever a parameter is optional. */
export function nullable<T extends TSchema>(schema: T) {
  const type = (schema as { type?: string }).type;
  if (type === undefined) return Type.Union([schema, Type.Null()]);
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [type, "null"] });
}

/** The engine's sampler takes a 32-bit seed; the 64-bit range of the API folds onto it deterministically. */
export function toSeed(seed: number): number {
  const big = BigInt.asUintN(64, BigInt(Math.trunc(seed)));
  return Number((big ^ (big >> 32n)) & 0xffffffffn);
}

/** A `data:<media type>;base64,<data>` URL as a file source; null for anything else. */
export function sourceOfDataUrl(url: string): Extract<FileSource, { kind: "base64" }> | null {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  return match ? { kind: "base64", mediaType: match[1]!, data: match[2]! } : null;
}

/** The glassbox extension object (Chat and Responses): docs/api.md, "Glassbox". */
export const Glassbox = Type.Object(
  {
    enabled: Type.Optional(Type.Boolean()),
    confidence: Type.Optional(Type.Boolean()),
    threshold: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    abstain_below: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  },
  { additionalProperties: false },
);

export function decodeGlassbox(glassbox: Static<typeof Glassbox> | undefined): GlassboxOptions | undefined {
  if (!glassbox || glassbox.enabled === false) return undefined;
  if (glassbox.threshold !== undefined && glassbox.abstain_below !== undefined && glassbox.abstain_below > glassbox.threshold)
    throw invalidRequest("glassbox.abstain_below must not be greater than glassbox.threshold.", "glassbox.abstain_below");
  if (glassbox.confidence === false && (glassbox.threshold !== undefined || glassbox.abstain_below !== undefined))
    throw invalidRequest("glassbox.threshold and glassbox.abstain_below need confidence; drop them or confidence: false.", "glassbox.confidence");
  return {
    ...(glassbox.confidence === false ? { confidence: false } : {}),
    threshold: glassbox.threshold,
    abstainBelow: glassbox.abstain_below,
  };
}
