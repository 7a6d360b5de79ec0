// Not yet one job (over 900 lines): this file holds the model catalogue, the speech-model variants of its
// methods, downloads, the GPU preference, a hardware report and cross-process switching. Issue 42, item 1
// splits it by job (a catalogue, downloads, one controller that owns which model is active, for the
// setting and the engine together); until then it stays one file because its parts share private state
// (the setting last seen and the one serving, the switch under way, the follow timer, the engine options)
// that a split has to give owners first.
// The local model as something a user gets, sees and changes: the files in <data-dir>/models, which one is
// active (a setting in the database), downloads with progress and resume, and switching the running
// server. The CLI (`svc models ...`) and the desktop app's main process both drive this service; it is not
// exposed over HTTP, so an API key holder cannot download files onto the machine or swap its model.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, rename, rm, stat } from "node:fs/promises";
import { availableParallelism, freemem, totalmem } from "node:os";
import { basename, isAbsolute, join, resolve, sep } from "node:path";
import { AppError } from "../../core/errors.js";
import type { EngineHost, HostLog } from "../../engine/engine-host.js";
import { InvalidModelFileError, readGgufSummary, verifyGgufFile, type GgufSummary } from "../../engine/gguf-inspect.js";
import { detectGpu, type LlamaEngineOptions } from "../../engine/llama-engine.js";
import { clearWarmPrefixes, listWarmPrefixes, WARM_START_MAX_BYTES, WARM_START_SETTING, warmStartDir, type WarmPrefix } from "../../engine/warm-start.js";
import { formatBytes } from "../../core/format.js";
import { keptBytesOfPartial, openModelDownload, PARTIAL_DOWNLOAD_SUFFIX, type DownloadProgress, type ModelDownload } from "../../engine/model-downloader.js";
import { chooseThreads, type GpuPreference } from "../../engine/resource-plan.js";
import type { GpuInfo } from "../../engine/types.js";
import { PRIVATE_DIR_MODE, restrictFile } from "../../store/file-modes.js";
import type { SettingRow } from "../../store/settings-repository.js";
import type { Store } from "../../store/store.js";
import { describeDownloadError } from "./download-errors.js";
import { InvalidSpeechModelError, readWhisperModel } from "../../ingest/whisper-model.js";
import { parseModelSource, parseSha256, parseSpeechModelSource, RECOMMENDED_MODEL, type ModelSource, type RecommendedModel } from "./model-sources.js";
import { downloadLockOwner, downloadsDir, filesOfModel, lockDownload, modelsDir, removePartial, scanModelsFolder, scanSpeechModels, speechModelsDir } from "./models-folder.js";
import { probeHost } from "./network-probe.js";
import { SpeedMeter } from "./speed-meter.js";

export const ACTIVE_MODEL_SETTING = "active_model";
/** The speech model (a file in <data-dir>/models/speech) that transcribes audio and video uploads. */
export const SPEECH_MODEL_SETTING = "speech_model";
/** The desktop app's GPU choice; `--gpu`/SVC_GPU other than auto wins over it. */
export const GPU_PREFERENCE_SETTING = "gpu_preference";
export const GPU_PREFERENCES: readonly GpuPreference[] = ["auto", "cuda", "vulkan", "metal", "cpu"];
/** A model's own load settings (the desktop window's Model page): the setting `model_settings:<file>`, JSON. */
export const MODEL_SETTINGS_PREFIX = "model_settings:";

/** Per model: what its load takes instead of the server's start-up options (absent: those, or automatic). */
export interface ModelLoadSettings {
  contextSize?: number;
  /** Answers the model writes at once (each with its own context). */
  sequences?: number;
  gpuLayers?: number;
  threads?: number;
}

const SETTING_LIMITS: Record<keyof ModelLoadSettings, { min: number; max: number; words: string }> = {
  contextSize: { min: 512, max: 1_048_576, words: "A context size is a whole number of tokens from 512" },
  sequences: { min: 1, max: 64, words: "Answers at once is a whole number from 1" },
  gpuLayers: { min: 0, max: 1024, words: "GPU layers is a whole number from 0" },
  threads: { min: 1, max: 1024, words: "Threads is a whole number from 1" },
};

/** The settings as given, checked; undefined or null fields are left out (automatic). */
export function parseModelLoadSettings(input: Record<string, unknown>): ModelLoadSettings {
  const out: ModelLoadSettings = {};
  for (const key of Object.keys(SETTING_LIMITS) as Array<keyof ModelLoadSettings>) {
    const value = input[key];
    if (value === undefined || value === null) continue;
    const { min, max, words } = SETTING_LIMITS[key];
    if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max)
      throw new AppError("invalid_request", `${words} to ${max} (got ${JSON.stringify(value)}).`, { code: "invalid_model_settings", param: key });
    out[key] = value;
  }
  return out;
}
const DEFAULT_STALL_TIMEOUT_MS = 60_000;
const DEFAULT_FOLLOW_INTERVAL_MS = 2_000;

export interface ModelEntry {
  /** The name in the models folder; an absolute path for an active model kept elsewhere. */
  file: string;
  path: string;
  sizeBytes: number;
  active: boolean;
  architecture: string | null;
  name: string | null;
  sizeLabel: string | null;
  quantization: string | null;
  contextLength: number | null;
  /** Where `svc models pull` got it, when it did. */
  source: string | null;
  /** Set when the file is not a readable GGUF model. */
  error: string | null;
}

export interface PartialDownload {
  file: string;
  /** Bytes a resumed pull keeps (whole finished pieces; the file on disk is already as long as the model). */
  keptBytes: number;
  /** The model's size, when the download's record says. */
  totalBytes: number | null;
  source: string | null;
  /** A process is downloading it now (it holds the download's lock). */
  downloadingNow: boolean;
  /** Which kind of model it becomes: a speech model's download is recorded apart from GGUF names. */
  kind: ModelKind;
}

export interface ModelList {
  directory: string;
  active: string | null;
  models: ModelEntry[];
  partial: PartialDownload[];
  /** Speech models (whisper.cpp) for transcripts, in their own folder; architecture "whisper". */
  speech: { directory: string; active: string | null; models: ModelEntry[] };
}

/** The language models (GGUF, what `svc serve` loads) or the speech models (whisper.cpp, for transcripts). */
export type ModelKind = "llm" | "speech";

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
}

/** What differs between the kinds of model in a pull: where they come from, live, and how they are checked. */
interface KindProfile {
  kind: ModelKind;
  directory: string;
  parse(source: string | undefined): ModelSource;
  /** A quick look (an existing file); verify reads the whole download. Both throw InvalidModelFileError. */
  summarize(path: string): Promise<GgufSummary>;
  verify(path: string): Promise<GgufSummary>;
  /** The file's key in the model_files table (speech files are kept apart from GGUF names). */
  record(file: string): string;
  setting: string;
  /** The CLI flag that names the kind, for messages. */
  flag: string;
}

/** A whisper.cpp model described in the shape `svc models list` prints (architecture "whisper"). */
async function speechSummary(path: string): Promise<GgufSummary> {
  try {
    const model = await readWhisperModel(path);
    return {
      architecture: "whisper",
      name: null,
      sizeLabel: model.size === "unknown" ? null : `${model.size}${model.multilingual ? "" : ".en"}`,
      quantization: model.weights,
      contextLength: null,
      hasChatTemplate: false,
      parts: 1,
    };
  } catch (err) {
    if (err instanceof InvalidSpeechModelError) throw new InvalidModelFileError(err.message);
    throw err;
  }
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
}

export interface HardwareReport {
  gpu: GpuInfo | null;
  cpuCores: number;
  defaultThreads: number;
  ramTotalBytes: number;
  ramFreeBytes: number;
}

export interface ModelsServiceOptions {
  store: Store;
  dataDir: string;
  /** The running server's engine; without one (the CLI) the service only manages files and settings. */
  host?: EngineHost;
  /** Load settings for models loaded through the service. */
  engineOptions?: Omit<LlamaEngineOptions, "modelPath">;
  log?: HostLog;
  env?: NodeJS.ProcessEnv;
  /**
   * Warm start (docs/configuration.md, "Warm start"): how many bytes its saved prefixes may take, and whether
   * the server's start-up options decided it (--warm-start, SVC_WARM_START), so the stored setting does not apply.
   */
  warmStart?: { maxBytes?: number; forced?: boolean };
}

/** Warm start as the loads from now on take it. */
export interface WarmStartState {
  enabled: boolean;
  /** The start-up options decided it: setWarmStart refuses. */
  forced: boolean;
  /** Where the saved prefixes are (whether or not it is on: turning it off keeps them until cleared). */
  dir: string;
  maxBytes: number;
}

function sameSetting(a: SettingRow | undefined, b: SettingRow | undefined): boolean {
  return a?.value === b?.value && a?.updated_at === b?.updated_at;
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

export class ModelsService {
  private readonly store: Store;
  private readonly dataDir: string;
  private readonly host: EngineHost | undefined;
  private engineOptions: Omit<LlamaEngineOptions, "modelPath">;
  private readonly log: HostLog;
  private readonly env: NodeJS.ProcessEnv;
  private timer: NodeJS.Timeout | null = null;
  /** The setting as last read, and the setting of the model that is serving. */
  private seen: SettingRow | undefined;
  private serving: SettingRow | undefined;
  private applying: Promise<void> | null = null;
  private readonly warm: { maxBytes: number; forced: boolean };

  constructor(options: ModelsServiceOptions) {
    this.store = options.store;
    this.dataDir = options.dataDir;
    this.host = options.host;
    this.engineOptions = options.engineOptions ?? {};
    this.warm = { maxBytes: options.warmStart?.maxBytes ?? options.engineOptions?.warmStart?.maxBytes ?? WARM_START_MAX_BYTES, forced: options.warmStart?.forced === true };
    this.log = options.log ?? (() => undefined);
    this.env = options.env ?? process.env;
  }

  get directory(): string {
    return modelsDir(this.dataDir);
  }

  recommended(): RecommendedModel {
    return RECOMMENDED_MODEL;
  }

  /** What a first run needs to know: is there any model, and is one active. */
  async needsModel(): Promise<boolean> {
    if (this.active()) return false;
    return (await scanModelsFolder(this.dataDir)).models.length === 0;
  }

  /** The active model from the setting, resolved to a path; null when none is set. */
  active(): { file: string; path: string } | null {
    const row = this.store.settings.get(ACTIVE_MODEL_SETTING);
    return row ? { file: row.value, path: this.pathOf(row.value) } : null;
  }

  /**
   * The speech model for transcripts, resolved to a path; null when none is set (audio and video uploads then
   * say that no transcript is available). Read at every extraction, so a pull or use in another process counts.
   */
  speechModel(): { file: string; path: string } | null {
    const row = this.store.settings.get(SPEECH_MODEL_SETTING);
    if (!row) return null;
    return { file: row.value, path: isAbsolute(row.value) ? row.value : join(speechModelsDir(this.dataDir), row.value) };
  }

  /** Makes a speech model (a name in the speech folder, or a path to a whisper.cpp file) the one transcripts use. */
  async useSpeech(fileOrPath: string): Promise<ModelEntry> {
    const text = fileOrPath.trim();
    if (text === "") throw new AppError("invalid_request", "Name a speech model file (see `svc models list`).", { code: "invalid_model_name" });
    const dir = speechModelsDir(this.dataDir);
    const byPath = text.includes("/") || text.includes(sep) || isAbsolute(text);
    let path = byPath ? resolve(text) : join(dir, text);
    if (!byPath && !(await stat(path).then((s) => s.isFile(), () => false))) path = join(dir, `${text}.bin`);
    const exists = await stat(path).then((s) => s.isFile(), () => false);
    if (!exists)
      throw new AppError("not_found", byPath ? `${path} does not exist.` : `No speech model named '${text}' in ${dir}. \`svc models list\` shows what is there.`, {
        code: "model_not_found",
      });
    let summary: GgufSummary;
    try {
      summary = await speechSummary(path);
    } catch (err) {
      throw new AppError("invalid_request", `${basename(path)}: ${(err as Error).message}`, { code: "invalid_model_file" });
    }
    const file = resolve(dir, basename(path)) === path ? basename(path) : path;
    this.store.settings.set(SPEECH_MODEL_SETTING, file);
    return {
      file,
      path,
      sizeBytes: (await stat(path)).size,
      active: true,
      architecture: summary.architecture,
      name: null,
      sizeLabel: summary.sizeLabel,
      quantization: summary.quantization,
      contextLength: null,
      source: this.store.modelFiles.get(`speech/${file}`)?.source ?? null,
      error: null,
    };
  }

  /** Deletes a speech model from its folder (or its download in progress); the one in use only with `force`. */
  async removeSpeech(fileOrName: string, options: { force?: boolean } = {}): Promise<{ file: string; removed: string[]; wasActive: boolean }> {
    const dir = speechModelsDir(this.dataDir);
    if (fileOrName.includes("/") || fileOrName.includes(sep) || isAbsolute(fileOrName))
      throw new AppError("invalid_request", `svc models remove --speech takes a file name from \`svc models list\`; it only deletes files in ${dir}.`, {
        code: "invalid_model_name",
      });
    const files = (await scanSpeechModels(this.dataDir)).map((m) => m.file);
    const partial = (await scanModelsFolder(this.dataDir)).partial.map((p) => p.file);
    const file = [fileOrName, `${fileOrName}.bin`].find((name) => files.includes(name) || partial.includes(name)) ?? null;
    if (file === null)
      throw new AppError("not_found", `No speech model named '${fileOrName}' in ${dir}. \`svc models list\` shows what is there.`, { code: "model_not_found" });
    const wasActive = this.speechModel()?.file === file;
    if (wasActive && !options.force)
      throw new AppError("conflict", `${file} is the speech model in use. Remove it with --force (transcripts stop until another is pulled or chosen).`, {
        code: "model_active",
      });
    const removed: string[] = [];
    if (files.includes(file)) {
      await rm(join(dir, file));
      removed.push(file);
    }
    if (await removePartial(this.dataDir, file)) removed.push(`${file} (partial download)`);
    this.store.modelFiles.delete(`speech/${file}`);
    if (wasActive) this.store.settings.delete(SPEECH_MODEL_SETTING);
    return { file, removed, wasActive };
  }

  async list(): Promise<ModelList> {
    const active = this.active();
    const sources = new Map(this.store.modelFiles.list().map((r) => [r.file, r]));
    const folder = await scanModelsFolder(this.dataDir);
    const entries = [...folder.models];
    if (active && isAbsolute(active.file) && !entries.some((e) => e.path === active.path)) {
      const size = await stat(active.path).then((s) => s.size, () => 0);
      entries.push({ file: active.file, path: active.path, sizeBytes: size });
    }
    const models: ModelEntry[] = [];
    for (const entry of entries) {
      let summary: GgufSummary | null = null;
      let error: string | null = null;
      try {
        summary = await readGgufSummary(entry.path);
      } catch (err) {
        error = err instanceof InvalidModelFileError ? err.message : (err as Error).message;
      }
      models.push({
        file: entry.file,
        path: entry.path,
        sizeBytes: entry.sizeBytes,
        active: active?.path === entry.path,
        architecture: summary?.architecture ?? null,
        name: summary?.name ?? null,
        sizeLabel: summary?.sizeLabel ?? null,
        quantization: summary?.quantization ?? null,
        contextLength: summary?.contextLength ?? null,
        source: sources.get(entry.file)?.source ?? null,
        error,
      });
    }
    const partial: PartialDownload[] = [];
    for (const p of folder.partial) {
      if (folder.models.some((m) => m.file === p.file)) continue;
      const { keptBytes, totalBytes } = await keptBytesOfPartial(p.path);
      const downloadingNow = (await downloadLockOwner(this.dataDir, p.file)) !== null;
      const speechRecord = sources.has(p.file) ? undefined : sources.get(`speech/${p.file}`);
      const record = sources.get(p.file) ?? speechRecord;
      partial.push({ file: p.file, keptBytes, totalBytes, source: record?.source ?? null, downloadingNow, kind: speechRecord ? "speech" : "llm" });
    }
    const activeSpeech = this.speechModel();
    const speech: ModelEntry[] = [];
    for (const entry of await scanSpeechModels(this.dataDir)) {
      let summary: GgufSummary | null = null;
      let error: string | null = null;
      try {
        summary = await speechSummary(entry.path);
      } catch (err) {
        error = (err as Error).message;
      }
      speech.push({
        ...entry,
        active: activeSpeech?.path === entry.path,
        architecture: summary?.architecture ?? null,
        name: null,
        sizeLabel: summary?.sizeLabel ?? null,
        quantization: summary?.quantization ?? null,
        contextLength: null,
        source: sources.get(`speech/${entry.file}`)?.source ?? null,
        error,
      });
    }
    return {
      directory: this.directory,
      active: active?.file ?? null,
      models,
      partial,
      speech: { directory: speechModelsDir(this.dataDir), active: activeSpeech?.file ?? null, models: speech },
    };
  }

  /**
   * Makes a model the active one: `svc serve` loads it at start, and a running server switches to it (at
   * once through this call, or within a few seconds when another process sets it). Throws AppError when the
   * file is missing or not a GGUF model, or (with a running server) when it fails to load.
   */
  async use(fileOrPath: string): Promise<ModelEntry> {
    const { file, path } = this.resolveModel(fileOrPath);
    const exists = await stat(path).then((s) => s.isFile(), () => false);
    if (!exists)
      throw new AppError(
        "not_found",
        isAbsolute(file)
          ? `${file} does not exist.`
          : `No model named '${fileOrPath}' in ${this.directory}. \`svc models list\` shows what is there; a path to a .gguf file elsewhere works too.`,
        { code: "model_not_found" },
      );
    let summary: GgufSummary;
    try {
      summary = await readGgufSummary(path);
    } catch (err) {
      throw new AppError("invalid_request", (err as Error).message, { code: "invalid_model_file" });
    }
    const previous = this.store.settings.get(ACTIVE_MODEL_SETTING);
    this.store.settings.set(ACTIVE_MODEL_SETTING, file);
    this.seen = this.store.settings.get(ACTIVE_MODEL_SETTING);
    if (this.host)
      try {
        await this.host.load(this.loadOptions(path));
        this.serving = this.seen;
      } catch (err) {
        this.restoreSetting(previous, this.seen);
        throw err;
      }
    const size = await stat(path).then((s) => s.size, () => 0);
    return {
      file,
      path,
      sizeBytes: size,
      active: true,
      architecture: summary.architecture,
      name: summary.name,
      sizeLabel: summary.sizeLabel,
      quantization: summary.quantization,
      contextLength: summary.contextLength,
      source: this.store.modelFiles.get(file)?.source ?? null,
      error: null,
    };
  }

  /**
   * Deletes a model from the models folder (all parts of a split model), or a download in progress. The
   * active model is only removed with `force`, which also clears the setting (a server following it unloads).
   */
  async remove(fileOrName: string, options: { force?: boolean } = {}): Promise<{ file: string; removed: string[]; wasActive: boolean }> {
    if (fileOrName.includes("/") || fileOrName.includes(sep) || isAbsolute(fileOrName))
      throw new AppError("invalid_request", `svc models remove takes a file name from \`svc models list\`; it only deletes files in ${this.directory}.`, {
        code: "invalid_model_name",
      });
    const folder = await scanModelsFolder(this.dataDir);
    const file =
      [fileOrName, `${fileOrName}.gguf`].find((name) => folder.models.some((m) => m.file === name) || folder.partial.some((p) => p.file === name)) ??
      null;
    if (file === null)
      throw new AppError("not_found", `No model named '${fileOrName}' in ${this.directory}. \`svc models list\` shows what is there.`, {
        code: "model_not_found",
      });
    const active = this.active();
    const wasActive = active?.file === file;
    if (wasActive && !options.force)
      throw new AppError("conflict", `${file} is the active model. Select another with \`svc models use\` first, or remove it with --force.`, {
        code: "model_active",
      });
    const removed: string[] = [];
    if (folder.models.some((m) => m.file === file))
      for (const part of filesOfModel(file)) {
        try {
          await rm(join(this.directory, part));
          removed.push(part);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code === "ENOENT") continue;
          throw new AppError("conflict", `Cannot delete ${part} (${code}); a running server may be using it. Stop it first.`, { code: "model_in_use" });
        }
      }
    if (await removePartial(this.dataDir, file)) removed.push(`${file} (partial download)`);
    this.store.modelFiles.delete(file);
    if (wasActive) this.store.settings.delete(ACTIVE_MODEL_SETTING);
    return { file, removed, wasActive };
  }

  /** Checks a pull's source before the pull starts (the window refuses a bad one on the spot): AppError (400). */
  checkSource(sourceText: string | undefined, kind: ModelKind = "llm"): void {
    this.profile(kind).parse(sourceText);
  }

  /** Downloads a model into the models folder: see PullOptions. Throws AppError with a readable message. */
  async pull(sourceText: string | undefined, options: PullOptions = {}): Promise<PullResult> {
    const kind = this.profile(options.kind);
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
      const madeActive = this.activateIfNone(file, options, kind.setting);
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
        return this.pull(sourceText, options);
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
      const madeActive = this.activateIfNone(file, options, kind.setting);
      options.onEvent?.({ phase: "done", file });
      return { file, path: target, source: source.uri, sizeBytes, summary, alreadyPresent: false, resumedFromBytes, madeActive };
    } finally {
      await release?.();
    }
  }

  /** The GPU preference for loads from now on (auto when the server was started without one). */
  gpuPreference(): GpuPreference {
    return this.engineOptions.gpu ?? "auto";
  }

  /**
   * Changes the GPU preference, remembers it for the next start (GPU_PREFERENCE_SETTING) and loads the
   * serving model again with it, so the change shows at once. Throws AppError when that load fails.
   */
  async setGpuPreference(gpu: GpuPreference): Promise<void> {
    if (!GPU_PREFERENCES.includes(gpu))
      throw new AppError("invalid_request", `GPU preference must be one of ${GPU_PREFERENCES.join(", ")}.`, { code: "invalid_gpu_preference" });
    this.engineOptions = { ...this.engineOptions, gpu };
    this.store.settings.set(GPU_PREFERENCE_SETTING, gpu);
    const current = this.host?.files().current;
    if (!this.host || !current) return;
    this.log("info", `GPU preference: ${gpu}; loading the model again.`);
    try {
      await this.host.load(this.loadOptions(current));
    } catch (err) {
      throw new AppError("unprocessable", `The model did not load with GPU preference ${gpu}: ${(err as Error).message}`, { code: "model_load_failed" });
    }
  }

  /** Warm start for the loads from now on (it is part of every load's options, a switch's and a restart's too). */
  warmStart(): WarmStartState {
    return { enabled: this.engineOptions.warmStart !== undefined, forced: this.warm.forced, dir: warmStartDir(this.dataDir), maxBytes: this.warm.maxBytes };
  }

  /**
   * Turns warm start on or off, remembers it for the next start (WARM_START_SETTING) and loads the serving
   * model again with it (a model's engine takes it when it loads). A load that fails puts the previous choice
   * back (the host has loaded the model again as it was) and rejects. Refused when the start-up options decided it.
   */
  async setWarmStart(enabled: boolean): Promise<void> {
    if (this.warm.forced)
      throw new AppError("conflict", "Warm start was set by the server's start-up options (--warm-start or SVC_WARM_START), which win over the stored setting.", {
        code: "warm_start_forced",
      });
    const previous = { options: this.engineOptions, setting: this.store.settings.get(WARM_START_SETTING) };
    const { warmStart: _, ...rest } = this.engineOptions;
    this.engineOptions = enabled ? { ...rest, warmStart: { dir: warmStartDir(this.dataDir), maxBytes: this.warm.maxBytes } } : rest;
    this.store.settings.set(WARM_START_SETTING, enabled ? "on" : "off");
    const current = this.host?.files().current;
    if (!this.host || !current) return;
    this.log("info", `Warm start ${enabled ? "on" : "off"}: loading the model again.`);
    try {
      await this.host.load(this.loadOptions(current));
    } catch (err) {
      this.engineOptions = previous.options;
      if (previous.setting) this.store.settings.set(WARM_START_SETTING, previous.setting.value);
      else this.store.settings.delete(WARM_START_SETTING);
      throw new AppError("unprocessable", `The model did not load with warm start ${enabled ? "on" : "off"}: ${(err as Error).message}`, { code: "model_load_failed" });
    }
  }

  /** The prefixes warm start saved, the most recently used first. */
  warmPrefixes(): WarmPrefix[] {
    return listWarmPrefixes(warmStartDir(this.dataDir));
  }

  /** Deletes every saved prefix (a running engine saves new ones from its next long prompt); returns how many. */
  clearWarmPrefixes(): number {
    return clearWarmPrefixes(warmStartDir(this.dataDir));
  }

  /** A model's own load settings ({} when it has none): by its name in the models folder, or its path. */
  modelSettings(fileOrPath: string): ModelLoadSettings {
    const row = this.store.settings.get(MODEL_SETTINGS_PREFIX + this.resolveModel(fileOrPath).file);
    if (!row) return {};
    try {
      return parseModelLoadSettings(JSON.parse(row.value) as Record<string, unknown>);
    } catch {
      return {};
    }
  }

  /** What a load of this model file takes: the server's options with the model's own settings over them. */
  loadOptions(path: string): LlamaEngineOptions {
    return { ...this.engineOptions, ...this.modelSettings(path), modelPath: path };
  }

  /**
   * Saves a model's own settings; when the running server has that model loaded, loads it again with them
   * (through the host, as a switch: running requests finish first). A load that fails puts the previous
   * settings back and rejects (the host has loaded the model again with its previous options).
   */
  async setModelSettings(fileOrPath: string, settings: ModelLoadSettings): Promise<ModelLoadSettings> {
    const { file, path } = this.resolveModel(fileOrPath);
    const checked = parseModelLoadSettings(settings as Record<string, unknown>);
    const key = MODEL_SETTINGS_PREFIX + file;
    const previous = this.store.settings.get(key);
    if (Object.keys(checked).length === 0) this.store.settings.delete(key);
    else this.store.settings.set(key, JSON.stringify(checked));
    const current = this.host?.files().current;
    if (!this.host || !current || resolve(current) !== resolve(path)) return checked;
    this.log("info", `New settings for ${basename(path)}: loading it again.`);
    try {
      await this.host.load(this.loadOptions(current));
    } catch (err) {
      if (previous) this.store.settings.set(key, previous.value);
      else this.store.settings.delete(key);
      throw err;
    }
    return checked;
  }

  async hardware(): Promise<HardwareReport> {
    const gpu = this.host ? await this.host.gpuNow() : await detectGpu(this.engineOptions.gpu ?? "auto").catch(() => null);
    const cores = availableParallelism();
    return { gpu, cpuCores: cores, defaultThreads: chooseThreads({ cores }), ramTotalBytes: totalmem(), ramFreeBytes: freemem() };
  }

  /**
   * Follows the active-model setting: when another process (`svc models use`) changes it, the running server
   * switches within `intervalMs`. Only for a server started without an explicit --model.
   */
  follow(intervalMs = DEFAULT_FOLLOW_INTERVAL_MS): void {
    if (!this.host || this.timer) return;
    this.seen = this.store.settings.get(ACTIVE_MODEL_SETTING);
    this.serving = this.host.files().current ? this.seen : undefined;
    this.timer = setInterval(() => {
      if (this.applying) return;
      const row = this.store.settings.get(ACTIVE_MODEL_SETTING);
      if (sameSetting(row, this.seen)) return;
      this.seen = row;
      this.applying = this.apply(row).finally(() => (this.applying = null));
    }, intervalMs);
    this.timer.unref();
  }

  /** Loads the active model again now (SIGHUP): the setting's file, or the current file for an explicit --model. */
  async reload(): Promise<void> {
    if (!this.host) return;
    if (!this.timer) {
      await this.host.reload().catch((err: unknown) => this.log("error", `Reload failed: ${(err as Error).message}`));
      return;
    }
    const row = this.store.settings.get(ACTIVE_MODEL_SETTING);
    this.seen = row;
    await this.apply(row);
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.applying;
  }

  private async apply(row: SettingRow | undefined): Promise<void> {
    if (!this.host) return;
    try {
      if (!row) {
        this.log("info", "The active model setting was cleared; unloading the model.");
        await this.host.unload();
        return;
      }
      this.log("info", `Active model: ${row.value}; loading it.`);
      await this.host.load(this.loadOptions(this.pathOf(row.value)));
      this.serving = row;
    } catch (err) {
      this.log("error", `Could not switch to ${row?.value}: ${(err as Error).message}`);
      // The setting names what the server runs: put back the model that is still serving.
      if (row) this.restoreSetting(this.serving, row);
    }
  }

  /** Puts `previous` back as the active setting, unless someone changed it again since `tried` was set. */
  private restoreSetting(previous: SettingRow | undefined, tried: SettingRow | undefined): void {
    if (!sameSetting(this.store.settings.get(ACTIVE_MODEL_SETTING), tried)) return;
    if (previous && this.host?.files().current !== this.pathOf(previous.value)) previous = undefined;
    if (previous) this.store.settings.set(ACTIVE_MODEL_SETTING, previous.value);
    else this.store.settings.delete(ACTIVE_MODEL_SETTING);
    this.seen = this.store.settings.get(ACTIVE_MODEL_SETTING);
    this.serving = this.seen;
  }

  private activateIfNone(file: string, options: PullOptions, setting = ACTIVE_MODEL_SETTING): boolean {
    if (options.activateIfNone === false || this.store.settings.get(setting)) return false;
    this.store.settings.set(setting, file);
    return true;
  }

  private profile(kind: ModelKind = "llm"): KindProfile {
    if (kind === "speech")
      return {
        kind,
        directory: speechModelsDir(this.dataDir),
        parse: (source) => parseSpeechModelSource(source, this.env),
        summarize: speechSummary,
        verify: speechSummary,
        record: (file) => `speech/${file}`,
        setting: SPEECH_MODEL_SETTING,
        flag: "--speech ",
      };
    return {
      kind,
      directory: this.directory,
      parse: (source) => parseModelSource(source, this.env),
      summarize: readGgufSummary,
      verify: verifyGgufFile,
      record: (file) => file,
      setting: ACTIVE_MODEL_SETTING,
      flag: "",
    };
  }

  private pathOf(file: string): string {
    return isAbsolute(file) ? file : join(this.directory, file);
  }

  /** A name in the models folder (".gguf" may be left off), or a path to a file anywhere. */
  private resolveModel(fileOrPath: string): { file: string; path: string } {
    const text = fileOrPath.trim();
    if (text === "") throw new AppError("invalid_request", "Name a model file (see `svc models list`).", { code: "invalid_model_name" });
    if (text.includes("/") || text.includes(sep) || isAbsolute(text)) {
      const path = resolve(text);
      // A file inside the models folder is stored by name, so the data dir can move.
      return resolve(this.directory, basename(path)) === path ? { file: basename(path), path } : { file: path, path };
    }
    const name = text.toLowerCase().endsWith(".gguf") ? text : `${text}.gguf`;
    return { file: name, path: join(this.directory, name) };
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
