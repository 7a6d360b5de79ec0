import { randomFillSync } from "node:crypto";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

// Every request gets an id, so random bytes come from a pool refilled 4 KB at a time (one call into
// OpenSSL per ~80 ids instead of one per id: it showed in the GET /v1/models profile). Same generator,
// same uniformity.
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function nextRandomByte(): number {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

/** A random id with a vendor-style prefix, e.g. newId("chatcmpl-") → "chatcmpl-7hK2…" (24 random base62 characters). */
export function newId(prefix: string, length = 24): string {
  let out = prefix;
  for (let n = 0; n < length; ) {
    const b = nextRandomByte();
    // 248 = 4 * 62: reject the tail so every character is equally likely.
    if (b < 248) {
      out += ALPHABET[b % 62];
      n++;
    }
  }
  return out;
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
