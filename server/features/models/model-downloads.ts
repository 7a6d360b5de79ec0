// Downloads of models into the models folder: from a source (hf:, https:) through the downloads folder,
// with progress events, resume after a stop, a stall watchdog, a lock against a second process pulling the
// same file, and verification before the file is moved in. A pulled model may become the active one when
// none is (through the active-model controller).
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { copyFile, mkdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { AppError } from "../../core/errors.js";
import { formatBytes } from "../../core/format.js";
import { InvalidModelFileError, type GgufSummary } from "../../engine/gguf-inspect.js";
import { keptBytesOfPartial, openModelDownload, PARTIAL_DOWNLOAD_SUFFIX, type DownloadProgress, type ModelDownload } from "../../engine/model-downloader.js";
import { PRIVATE_DIR_MODE, restrictFile } from "../../store/file-modes.js";
import type { Store } from "../../store/store.js";
import type { ActiveModel } from "./active-model.js";
import { describeDownloadError } from "./download-errors.js";
import type { ModelCatalogue } from "./model-catalogue.js";
import { huggingFaceEndpoint, parseSha256 } from "./model-sources.js";
import { projectorPathFor } from "../../engine/vision/projector.js";
import { readGgufSummary } from "../../engine/gguf-inspect.js";
import { downloadsDir, lockDownload, removePartial, type ModelKind } from "./models-folder.js";
import { probeHost } from "./network-probe.js";
import { SpeedMeter } from "./speed-meter.js";

const DEFAULT_STALL_TIMEOUT_MS = 60_000;

export type PullEvent =
  | { phase: "resolving"; source: string }
  | { phase: "downloading"; file: string; resumedFromBytes: number; progress: DownloadProgress }
  | { phase: "verifying"; file: string }
  | { phase: "done"; file: string };

export interface PullOptions {
  sha256?: string;
  onEvent?: (event: PullEvent) => void;
  signal?: AbortSignal;
  /** Give up when no new byte arrives for this long (the download resumes on the next pull). Default 60 s. */
  stallTimeoutMs?: number;
  /** Make the pulled model active when none is yet. Default true. */
  activateIfNone?: boolean;
  /** "speech": a whisper.cpp model for transcripts (default "llm"). */
  kind?: ModelKind;
  /**
   * The language model's vision projector: an hf: URI, a URL or a local file, saved beside it as
   * `<model>.mmproj.gguf`. Default: the one the hf: repository's manifest names, if any; false: none.
   */
  mmproj?: string | false;
}

export interface PullResult {
  file: string;
  path: string;
  source: string;
  sizeBytes: number;
  summary: GgufSummary;
  /** The file was already in the models folder; nothing was downloaded. */
  alreadyPresent: boolean;
  /** Bytes a previous, interrupted pull had already downloaded. */
  resumedFromBytes: number;
  madeActive: boolean;
  /** The vision projector now beside the model (pulled with it, or there already); null: the model reads text. */
  projector?: string | null;
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

export interface ModelDownloadsOptions {
  store: Store;
  dataDir: string;
  catalogue: ModelCatalogue;
  activeModel: ActiveModel;
}

export class ModelDownloads {
  private readonly store: Store;
  private readonly dataDir: string;
  private readonly catalogue: ModelCatalogue;
  private readonly activeModel: ActiveModel;

  constructor(options: ModelDownloadsOptions) {
    this.store = options.store;
    this.dataDir = options.dataDir;
    this.catalogue = options.catalogue;
    this.activeModel = options.activeModel;
  }

  /** Downloads a model into the models folder: see PullOptions. Throws AppError with a readable message. */
  async pull(sourceText: string | undefined, options: PullOptions = {}): Promise<PullResult> {
    if ((options.kind ?? "llm") !== "llm" || options.mmproj === false) return this.pullFile(sourceText, options);
    // A vision model is made the active one (which a running server loads at once) only once its projector
    // lies beside it, so that its first load sees images; a projector that fails leaves it active, text only.
    const result = await this.pullFile(sourceText, { ...options, activateIfNone: false });
    let projector: string | null = null;
    try {
      projector = await this.pullProjector(result, options);
    } finally {
      result.madeActive = this.activeModel.activateIfNone(result.file, options, "llm");
    }
    return { ...result, projector };
  }

  /**
   * A vision model's projector, saved beside it as `<model>.mmproj.gguf` (engine/vision/projector.ts): from
   * --mmproj, or the one the hf: repository's manifest names (Hugging Face's `mmprojFile`, what llama.cpp's
   * `-hf` takes). Null when there is none; an existing one is kept.
   */
  private async pullProjector(model: PullResult, options: PullOptions): Promise<string | null> {
    const target = projectorPathFor(model.path);
    if (await stat(target).then(() => true, () => false)) return target;
    let source = typeof options.mmproj === "string" ? options.mmproj.trim() : "";
    if (source !== "" && !/^(hf:|https?:)/i.test(source)) {
      // A local file.
      await summarizeProjector(source);
      await copyFile(source, target);
      restrictFile(target);
      return target;
    }
    if (source === "") source = (await manifestProjector(model.source, options.signal)) ?? "";
    if (source === "") return null;
    const pulled = await this.pullFile(source, { ...options, activateIfNone: false, sha256: undefined, kind: "llm" });
    await summarizeProjector(pulled.path);
    await rename(pulled.path, target);
    this.store.modelFiles.delete(pulled.file);
    return target;
  }

  private async pullFile(sourceText: string | undefined, options: PullOptions = {}): Promise<PullResult> {
    const kind = this.catalogue.profile(options.kind);
    const source = kind.parse(sourceText);
    const sha256 = parseSha256(options.sha256);
    const host = source.origin.port ? `${source.origin.hostname}:${source.origin.port}` : source.origin.hostname;
    const fail = (err: unknown) => describeDownloadError(err, { source: source.uri, host });
    options.onEvent?.({ phase: "resolving", source: source.uri });
    if (options.signal?.aborted) throw await cancelled();
    await probeHost(source.origin);

    const staging = downloadsDir(this.dataDir);
    await mkdir(staging, { recursive: true, mode: PRIVATE_DIR_MODE });
    let resumedFromBytes = 0;
    const meter = new SpeedMeter();
    let download: ModelDownload;
    try {
      download = await openModelDownload({
        source: source.uri,
        directory: staging,
        onProgress: (raw) => {
          const speed = meter.add(raw.downloadedBytes, Date.now());
          const progress = { ...raw, bytesPerSecond: speed.bytesPerSecond, etaSeconds: speed.etaSeconds(raw.totalBytes) };
          options.onEvent?.({ phase: "downloading", file: download?.fileName ?? "", resumedFromBytes, progress });
        },
      });
    } catch (err) {
      throw fail(err);
    }
    const file = download.fileName;
    const parts = download.files;
    if (sha256 && parts.length > 1) {
      await download.cancel();
      throw new AppError("invalid_request", "--sha256 checks a single file; this model is split into several.", { code: "invalid_sha256" });
    }

    const target = join(kind.directory, file);
    const existing = await stat(target).then((s) => s.size, () => null);
    if (existing !== null) {
      await download.cancel();
      const announced = download.totalBytes;
      if (parts.length === 1 && announced > 0 && existing !== announced)
        throw new AppError("conflict", `A different ${file} is already in ${kind.directory}; remove it first (svc models remove ${kind.flag}${file}).`, {
          code: "model_exists",
        });
      if (sha256 && (await sha256Of(target)) !== sha256)
        throw new AppError("conflict", `${file} is already in ${kind.directory} but its SHA-256 differs; remove it first (svc models remove ${kind.flag}${file}).`, {
          code: "model_exists",
        });
      const summary = await kind.summarize(target).catch((err: unknown) => {
        throw new AppError("conflict", `${(err as Error).message} Remove it with \`svc models remove ${kind.flag}${file}\`.`, { code: "model_exists" });
      });
      const madeActive = this.activeModel.activateIfNone(file, options, kind.kind);
      return { file, path: target, source: source.uri, sizeBytes: existing, summary, alreadyPresent: true, resumedFromBytes: 0, madeActive };
    }

    let release: (() => Promise<void>) | null = null;
    try {
      release = await lockDownload(this.dataDir, file);
    } catch (err) {
      await download.cancel();
      throw err;
    }
    try {
      const previous = this.store.modelFiles.get(kind.record(file));
      if (previous && previous.state === "downloading" && previous.source !== source.uri) {
        // The resume data belongs to another source's file of the same name: start over.
        await download.cancel();
        await removePartial(this.dataDir, file);
        await release();
        release = null;
        return this.pullFile(sourceText, options);
      }
      this.store.modelFiles.upsert({ file: kind.record(file), source: source.uri, state: "downloading", size_bytes: download.totalBytes || null, sha256: sha256 ?? null, updated_at: Date.now() });
      // What the earlier, stopped pull really kept (the same figure its "kept" message gave).
      for (const part of parts) resumedFromBytes += (await keptBytesOfPartial(part.path + PARTIAL_DOWNLOAD_SUFFIX)).keptBytes;
      meter.add(resumedFromBytes, Date.now());
      options.onEvent?.({
        phase: "downloading",
        file,
        resumedFromBytes,
        progress: { downloadedBytes: resumedFromBytes, totalBytes: download.totalBytes, bytesPerSecond: 0, etaSeconds: null },
      });
      await this.runDownload(download, {
        signal: options.signal,
        stallTimeoutMs: options.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS,
        origin: source.origin,
        fail,
      });

      options.onEvent?.({ phase: "verifying", file });
      let summary: GgufSummary;
      try {
        for (const part of parts) {
          const size = await stat(part.path).then((s) => s.size, () => -1);
          if (size < 0) throw new InvalidModelFileError(`${part.fileName} is missing after the download.`);
          if (part.totalBytes > 0 && size !== part.totalBytes)
            throw new InvalidModelFileError(`${part.fileName} has ${size} bytes, but the server announced ${part.totalBytes}.`);
        }
        summary = await kind.verify(join(staging, file));
        if (sha256) {
          const actual = await sha256Of(join(staging, file));
          if (actual !== sha256) throw new InvalidModelFileError(`its SHA-256 is ${actual}, not the expected ${sha256}.`);
        }
      } catch (err) {
        for (const part of parts) await rm(part.path, { force: true });
        await removePartial(this.dataDir, file);
        this.store.modelFiles.delete(kind.record(file));
        const reason = (err as Error).message.replace(join(staging, file), file);
        throw new AppError("unprocessable", `The download from ${source.uri} is not a usable model: ${reason} The file was deleted.`, {
          code: "model_verification_failed",
        });
      }
      await mkdir(kind.directory, { recursive: true, mode: PRIVATE_DIR_MODE });
      // The downloader wrote the parts under the umask; what the server keeps in the data dir is the user's alone.
      for (const part of parts) {
        restrictFile(part.path);
        await rename(part.path, join(kind.directory, part.fileName));
      }
      const sizeBytes = parts.length === 1 ? (await stat(target)).size : parts.reduce((n, p) => n + p.totalBytes, 0);
      this.store.modelFiles.upsert({ file: kind.record(file), source: source.uri, state: "ready", size_bytes: sizeBytes, sha256: sha256 ?? null, updated_at: Date.now() });
      const madeActive = this.activeModel.activateIfNone(file, options, kind.kind);
      options.onEvent?.({ phase: "done", file });
      return { file, path: target, source: source.uri, sizeBytes, summary, alreadyPresent: false, resumedFromBytes, madeActive };
    } finally {
      await release?.();
    }
  }

  private async runDownload(
    download: ModelDownload,
    context: {
      signal?: AbortSignal;
      stallTimeoutMs: number;
      origin: URL;
      fail: (err: unknown) => AppError;
    },
  ): Promise<void> {
    const internal = new AbortController();
    let stalled = false;
    let best = download.downloadedBytes;
    let advancedAt = Date.now();
    const watchdog = setInterval(() => {
      const now = download.downloadedBytes;
      if (now > best) {
        best = now;
        advancedAt = Date.now();
      } else if (Date.now() - advancedAt >= context.stallTimeoutMs) {
        stalled = true;
        internal.abort(new Error("stalled"));
      }
    }, Math.min(1000, Math.max(50, context.stallTimeoutMs / 4)));
    const onAbort = () => internal.abort(context.signal?.reason);
    if (context.signal?.aborted) onAbort();
    else context.signal?.addEventListener("abort", onAbort, { once: true });
    let failure: { error: unknown } | null = null;
    try {
      await download.download(internal.signal);
    } catch (error) {
      failure = { error };
    } finally {
      clearInterval(watchdog);
      context.signal?.removeEventListener("abort", onAbort);
    }
    // A cancelled download can also return normally (the library stops without an error): check the signal.
    if (failure || internal.signal.aborted) {
      await download.cancel().catch(() => undefined);
      if (context.signal?.aborted) throw await cancelled(download);
      if (stalled) {
        // Say why it stalled when the host is plainly gone; otherwise the server just stopped sending.
        await probeHost(context.origin, 5_000);
        throw new AppError(
          "unavailable",
          `The download stopped: no data arrived for ${Math.round(context.stallTimeoutMs / 1000)} s. ` +
            "Check the network connection, then run the same command again: it resumes where this one stopped.",
          { code: "download_stalled" },
        );
      }
      throw context.fail(failure?.error);
    }
  }
}

/** What a stopped download leaves: the next pull resumes from the pieces it finished, and says so. */
async function cancelled(download?: ModelDownload): Promise<AppError> {
  let kept = 0;
  for (const part of download?.files ?? []) kept += (await keptBytesOfPartial(part.path + PARTIAL_DOWNLOAD_SUFFIX)).keptBytes;
  const total = download?.totalBytes ?? 0;
  const message =
    kept > 0
      ? `Download stopped; ${formatBytes(kept)}${total > 0 ? ` of ${formatBytes(total)}` : ""} are kept. Run the same command again to resume from there.`
      : "Download stopped before its first piece was complete, so nothing was kept: running the same command again starts from the beginning.";
  return new AppError("unavailable", message, { code: "download_cancelled", details: { keptBytes: kept, totalBytes: total } });
}

/** Checks that a file is a vision projector (a GGUF of architecture "clip"); throws a 400 saying what it is. */
async function summarizeProjector(path: string): Promise<void> {
  let architecture: string | null;
  try {
    architecture = (await readGgufSummary(path)).architecture;
  } catch (err) {
    throw new AppError("invalid_request", `The projector ${path} is not a GGUF file: ${(err as Error).message}`, { code: "invalid_projector" });
  }
  if (architecture !== "clip")
    throw new AppError("invalid_request", `${path} is not a vision projector (an mmproj GGUF has architecture "clip"; this one has "${architecture}").`, {
      code: "invalid_projector",
    });
}

/**
 * The projector the hf: repository's manifest names for this model (Hugging Face answers `mmprojFile` beside
 * `ggufFile` to llama.cpp's user agent), as an hf: URI; null for other sources, or a repository without one.
 */
async function manifestProjector(source: string, signal?: AbortSignal): Promise<string | null> {
  const match = /^hf:([^/:]+)\/([^/:]+)(?::([^/]+))?(\/.*)?$/i.exec(source);
  if (!match) return null;
  const [, user, repo, tag] = match;
  const url = new URL(`v2/${encodeURIComponent(user!)}/${encodeURIComponent(repo!)}/manifests/${encodeURIComponent(tag ?? "latest")}`, huggingFaceEndpoint().href.replace(/\/?$/, "/"));
  try {
    const response = await fetch(url, { headers: { "User-Agent": "llama-cpp", Accept: "application/json" }, signal });
    if (!response.ok) return null;
    const manifest = (await response.json()) as { mmprojFile?: { rfilename?: string } };
    const file = manifest.mmprojFile?.rfilename;
    return file ? `hf:${user}/${repo}/${file}` : null;
  } catch {
    return null;
  }
}
