// Console passwords: scrypt from node:crypto, parameters stored with each hash so they can be raised later
// without breaking old hashes. N = 2^15, r = 8, p = 1 (32 MiB, about 0.2 s on a 2-core laptop): costly for
// guessing, cheap enough for a login.
import { randomBytes, randomInt, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";

const N = 2 ** 15;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;

function derive(password: string, salt: Buffer, options: { N: number; r: number; p: number }): Promise<Buffer> {
  const params: ScryptOptions = { ...options, maxmem: 256 * options.N * options.r + 1024 * 1024 };
  return new Promise((resolve, reject) =>
    scrypt(password.normalize("NFC"), salt, KEY_LENGTH, params, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/** "scrypt$N$r$p$salt$hash" (salt and hash in base64). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, { N, r: R, p: P });
  return ["scrypt", N, R, P, salt.toString("base64"), key.toString("base64")].join("$");
}

/** Compares in constant time; a malformed stored hash never matches. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split("$");
  if (parts.length !== 6 || parts[0] !== "scrypt") return false;
  const [n, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  if (![n, r, p].every((v) => Number.isInteger(v) && v > 0) || n > 2 ** 20) return false;
  const expected = Buffer.from(parts[5]!, "base64");
  const key = await derive(password, Buffer.from(parts[4]!, "base64"), { N: n, r, p });
  return expected.length === key.length && timingSafeEqual(expected, key);
}

/** The same work as a real check, for an account that does not exist (so timing does not tell). */
let dummyHash: Promise<string> | null = null;
export async function burnPasswordCheck(password: string): Promise<false> {
  dummyHash ??= hashPassword("not a password of anyone");
  await verifyPassword(password, await dummyHash);
  return false;
}

// No 0/o, 1/l/i: read aloud or copied from a screen without mistakes.
const ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789";

/** e.g. "k7fq-2mzp-x8rt-c4wd-n6hv": 20 random characters (about 99 bits). */
export function temporaryPassword(): string {
  const groups: string[] = [];
  for (let g = 0; g < 5; g++) {
    let group = "";
    for (let i = 0; i < 4; i++) group += ALPHABET[randomInt(ALPHABET.length)];
    groups.push(group);
  }
  return groups.join("-");
}

export const MIN_PASSWORD_LENGTH = 12;
export const MAX_PASSWORD_LENGTH = 256;

/** Why a new password is refused, or null. */
export function passwordProblem(password: string, current?: string): string | null {
  if (password.length < MIN_PASSWORD_LENGTH) return `A password has at least ${MIN_PASSWORD_LENGTH} characters.`;
  if (password.length > MAX_PASSWORD_LENGTH) return `A password has at most ${MAX_PASSWORD_LENGTH} characters.`;
  if (current !== undefined && password === current) return "Choose a password different from the current one.";
  return null;
}
