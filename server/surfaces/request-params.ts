// Request helpers shared by the OpenAI-style surfaces (Chat Completions and Responses).
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import type { FileSource } from "../core/inference.js";

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
