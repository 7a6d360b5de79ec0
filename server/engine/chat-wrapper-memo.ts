// node-llama-cpp resolves a model's chat wrapper by rendering the model's Jinja template against each
// specialised wrapper it knows and keeping the first that renders the same; where none does, it wraps the
// template itself. That scan is 1 to 2 s on 2 cores for a template that matches none (the test model's, many
// fine-tunes'), paid on every load: a server start, a model switch, each restart of the engine process.
// Its outcome depends only on the template, the vocabulary and node-llama-cpp's version, so "matched none"
// is remembered under a hash of those in the platform's cache folder, and the next load asks for the Jinja
// wrapper by type, which builds the same wrapper in milliseconds. Only that outcome is kept: a specialised
// match is found early in the scan (it is ordered by the model's name) and is rebuilt with the scan's own
// settings, which asking by type would not give.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LlamaModel } from "node-llama-cpp";
import { nodeLlamaCppVersion, svcCacheDirectory } from "./engine-build.js";

/** $XDG_CACHE_HOME (or ~/.cache)/svc-desktop/chat-templates: one small file per template that matched none. */
export function chatWrapperMemoDirectory(env: NodeJS.ProcessEnv = process.env): string {
  return join(svcCacheDirectory(env), "chat-templates");
}

/** The memo's key for a model: its template, architecture, vocabulary and markers, and the library's version; null without a template. */
export function chatWrapperMemoKey(model: Pick<LlamaModel, "fileInfo" | "tokens">, version: string = nodeLlamaCppVersion()): string | null {
  const metadata = model.fileInfo.metadata as { general?: { architecture?: string }; tokenizer?: { chat_template?: string; ggml?: { tokens?: readonly string[] } } };
  const template = metadata.tokenizer?.chat_template;
  if (!template?.trim()) return null;
  const hash = createHash("sha256");
  const part = (name: string, value: string) => hash.update(`${name}\0${value.length}\0${value}`);
  part("node-llama-cpp", version);
  part("template", template);
  part("architecture", metadata.general?.architecture ?? "");
  part("bos", model.tokens.bosString ?? "");
  part("eos", model.tokens.eosString ?? "");
  part("eot", model.tokens.eotString ?? "");
  for (const token of metadata.tokenizer?.ggml?.tokens ?? []) part("token", token);
  return hash.digest("hex").slice(0, 32);
}

/** Whether this key's template matched no specialised wrapper on an earlier load. */
export function knownJinjaOnly(key: string, dir: string = chatWrapperMemoDirectory()): boolean {
  try {
    return readFileSync(join(dir, key), "utf8").trim() === "jinjaTemplate";
  } catch {
    return false;
  }
}

/** Remembers that this key's template matched none (best effort: a cache folder that cannot be written only costs the scan). */
export function rememberJinjaOnly(key: string, dir: string = chatWrapperMemoDirectory()): void {
  try {
    mkdirSync(dir, { recursive: true });
    const partial = join(dir, `${key}.${process.pid}.partial`);
    writeFileSync(partial, "jinjaTemplate\n");
    renameSync(partial, join(dir, key));
  } catch {
    // Read-only or missing home: the next load scans again.
  }
}
