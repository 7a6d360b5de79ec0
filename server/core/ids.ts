import { randomBytes } from "node:crypto";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** A random id with a vendor-style prefix, e.g. newId("chatcmpl-") → "chatcmpl-7hK2…" (24 random base62 characters). */
export function newId(prefix: string, length = 24): string {
  const bytes = randomBytes(length * 2);
  let out = "";
  for (let i = 0; out.length < length && i < bytes.length; i++) {
    const b = bytes[i]!;
    // 248 = 4 * 62: reject the tail so every character is equally likely.
    if (b < 248) out += ALPHABET[b % 62];
  }
  return prefix + (out.length === length ? out : out + newId("", length - out.length));
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
