// Warm start (issue 43, opt-in): the KV cache of a long shared prefix (the system prompt and tool definitions
// before the first user turn, what a coding agent sends the same on every call) is saved to disk the first time
// it is read, and restored into a sequence the first time it comes again after a restart, so the first call of
// the day is as fast as the second.
//
// A saved state is found by a key: the model file (its size, modification time and first and last MiB), the
// engine (node-llama-cpp's version, which binaries, the KV cache type) and the exact prefix tokens. A state is
// never loaded into another model or engine (that could crash the engine process). Files are 0600 under the
// data dir's warm-start/ folder, at most `maxBytes` together (the least recently used go first), one file a
// prefix: <key>-<tokens>.state. Nothing of a user's or the model's turns is in them: the prefix ends before
// the first user message's content.
import { createHash } from "node:crypto";
import { closeSync, mkdirSync, openSync, readdirSync, readSync, renameSync, rmSync, statSync, utimesSync } from "node:fs";
import { chmod } from "node:fs/promises";
import { join } from "node:path";
import type { LlamaContextSequence, Token } from "node-llama-cpp";
import type { GpuInfo } from "./types.js";

export interface WarmStartOptions {
  /** Where the states go (the data dir's warm-start/). */
  dir: string;
  /** Bytes all states may take together; the least recently used are removed past it. */
  maxBytes: number;
  /** Prefixes shorter than this many tokens are not saved (reading them is about as fast as restoring). */
  minTokens: number;
}

/** The stored setting (on / off) the desktop window's switch writes; --warm-start wins over it. */
export const WARM_START_SETTING = "warm_start";

/** Defaults: 1024 tokens (docs/configuration.md, "Warm start", says why), 8 GiB on disk. */
export const WARM_START_MIN_TOKENS = 1024;
export const WARM_START_MAX_BYTES = 8 * 2 ** 30;

export interface WarmPrefix {
  key: string;
  tokens: number;
  bytes: number;
  /** Epoch ms it was last saved or restored. */
  lastUsed: number;
}

const FILE = /^([0-9a-f]{64})-(\d+)\.state$/;
const LOADING = ".loading";
const SAMPLE_BYTES = 2 ** 20;

/** What identifies a model file without reading all of it: size, modification time, first and last MiB. */
export function modelFileIdentity(path: string): string {
  const stat = statSync(path);
  const hash = createHash("sha256").update(`${stat.size}:${stat.mtimeMs}:`);
  const fd = openSync(path, "r");
  try {
    const buffer = Buffer.alloc(Math.min(SAMPLE_BYTES, stat.size));
    hash.update(buffer.subarray(0, readSync(fd, buffer, 0, buffer.length, 0)));
    hash.update(buffer.subarray(0, readSync(fd, buffer, 0, buffer.length, Math.max(0, stat.size - buffer.length))));
  } finally {
    closeSync(fd);
  }
  return hash.digest("hex");
}

/**
 * What a saved state depends on, as one string: the model file (modelFileIdentity), node-llama-cpp's version,
 * the backend, the llama.cpp libraries that computed it and the KV cache's type. Our addon alone on the
 * prebuilt libraries (`svc engine build --gpu`, `--addon-only`) computes as the prebuilt binaries do, so its
 * states are theirs; the full CPU build's kernels are its own.
 */
export function warmStartIdentity(model: string, nodeLlamaCppVersion: string, gpu: Pick<GpuInfo, "backend" | "build" | "localBuild">, kvCache: string): string {
  const libraries = gpu.localBuild === "addon" ? "prebuilt" : (gpu.build ?? "prebuilt");
  return [model, `node-llama-cpp ${nodeLlamaCppVersion}`, gpu.backend, libraries, `kv ${kvCache}`].join("|");
}

export class WarmStart {
  constructor(
    readonly options: WarmStartOptions,
    /** The model and engine: modelFileIdentity plus what else a state depends on (the binaries, the KV cache type). */
    private readonly identity: string,
    readonly log?: (level: "debug" | "info" | "warn" | "error", message: string) => void,
  ) {
    mkdirSync(options.dir, { recursive: true, mode: 0o700 });
    // A state being restored when the engine process died is not tried again (it may be what killed it).
    for (const name of readdirSync(options.dir))
      if (name.endsWith(LOADING) || name.includes(".tmp-")) {
        rmSync(join(options.dir, name), { force: true });
        if (name.endsWith(LOADING)) log?.("warn", `Warm start: removed ${name.slice(0, -LOADING.length)}, whose restore did not finish.`);
      }
  }

  keyFor(prefix: readonly Token[]): string {
    const hash = createHash("sha256").update(this.identity).update("\n");
    hash.update(Buffer.from(Uint32Array.from(prefix).buffer));
    return hash.digest("hex");
  }

  /** The saved state of this prefix, if there is one. */
  find(key: string): WarmPrefix | null {
    return this.list().find((p) => p.key === key) ?? null;
  }

  list(): WarmPrefix[] {
    return listWarmPrefixes(this.options.dir);
  }

  /** Saves the sequence's state, which holds exactly the prefix, then keeps the folder within maxBytes. */
  async save(sequence: LlamaContextSequence, key: string, tokens: number): Promise<void> {
    const final = this.path(key, tokens);
    const temp = `${final}.tmp-${process.pid}`;
    try {
      // The folder goes with a clear (the window's Clear, `svc engine warm-start clear`) while the engine runs.
      mkdirSync(this.options.dir, { recursive: true, mode: 0o700 });
      await sequence.saveStateToFile(temp);
      await chmod(temp, 0o600);
      renameSync(temp, final);
    } catch (err) {
      rmSync(temp, { force: true });
      throw err;
    }
    this.trim(key);
  }

  /** Loads the prefix's state into the sequence (replacing what it held); returns the tokens it now holds. */
  async restore(sequence: LlamaContextSequence, prefix: WarmPrefix): Promise<number> {
    const path = this.path(prefix.key, prefix.tokens);
    // Named as being restored until it is: should loading it end the engine process, it is not tried again.
    const loading = `${path}${LOADING}`;
    renameSync(path, loading);
    try {
      await sequence.loadStateFromFile(loading, { acceptRisk: true });
    } catch (err) {
      rmSync(loading, { force: true });
      throw err;
    }
    renameSync(loading, path);
    const now = new Date();
    utimesSync(path, now, now);
    return sequence.nextTokenIndex;
  }

  private path(key: string, tokens: number): string {
    return join(this.options.dir, `${key}-${tokens}.state`);
  }

  /** Removes the least recently used states past maxBytes (never `keep`, just saved). */
  private trim(keep: string): void {
    let total = 0;
    for (const p of this.list()) {
      total += p.bytes;
      if (total > this.options.maxBytes && p.key !== keep) {
        rmSync(this.path(p.key, p.tokens), { force: true });
        total -= p.bytes;
      }
    }
  }
}

/** The warm-start folder of a data dir. */
export function warmStartDir(dataDir: string): string {
  return join(dataDir, "warm-start");
}

/** The saved prefixes in a warm-start folder, the most recently used first (for /health and the CLI too). */
export function listWarmPrefixes(dir: string): WarmPrefix[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out: WarmPrefix[] = [];
  for (const name of names) {
    const m = FILE.exec(name);
    if (!m) continue;
    try {
      const stat = statSync(join(dir, name));
      out.push({ key: m[1]!, tokens: Number(m[2]), bytes: stat.size, lastUsed: stat.mtimeMs });
    } catch {
      // Removed meanwhile.
    }
  }
  return out.sort((a, b) => b.lastUsed - a.lastUsed);
}

/** Removes every saved prefix (and the folder); returns how many there were. */
export function clearWarmPrefixes(dir: string): number {
  const count = listWarmPrefixes(dir).length;
  rmSync(dir, { recursive: true, force: true });
  return count;
}
