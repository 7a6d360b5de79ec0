// Request helpers shared by the OpenAI-style surfaces (Chat Completions and Responses).
import { Type, type Static, type TSchema } from "@sinclair/typebox";

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
