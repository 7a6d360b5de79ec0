// Writes the tiny test model: `npm run test-model [-- OUT.gguf]`.
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { buildTinyModel, type TinyModelOptions } from "./tiny-model.js";

export const DEFAULT_TINY_MODEL_PATH = fileURLToPath(new URL("./tiny.gguf", import.meta.url));

export function writeTinyModel(path = DEFAULT_TINY_MODEL_PATH, options: TinyModelOptions = {}): string {
  const out = resolve(path);
  mkdirSync(dirname(out), { recursive: true });
  // Written aside and renamed into place: a server that has the model open (mapped) keeps reading the old
  // file, never a half-written one (the README test runs `npm run test-model` while other tests serve it).
  const temp = `${out.replace(/\.gguf$/i, "")}.tmp-${process.pid}.gguf`;
  writeFileSync(temp, buildTinyModel(options));
  renameSync(temp, out);
  return out;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(writeTinyModel(process.argv[2]));
}
