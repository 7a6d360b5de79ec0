// The models folder: <data-dir>/models holds finished model files; <data-dir>/models/.downloads holds
// downloads in progress (and their resume data), so a half-written file is never mistaken for a model.
import { PROJECTOR_SUFFIX } from "../../engine/vision/projector.js";
import { open, readdir, readFile, rm, stat } from "node:fs/promises";
import { basename, isAbsolute, join, resolve, sep } from "node:path";
import { AppError } from "../../core/errors.js";
import { InvalidModelFileError, type GgufSummary } from "../../engine/gguf-inspect.js";
import { PARTIAL_DOWNLOAD_SUFFIX } from "../../engine/model-downloader.js";
import { InvalidSpeechModelError, readWhisperModel } from "../../ingest/whisper-model.js";
import { PRIVATE_FILE_MODE } from "../../store/file-modes.js";

export function modelsDir(dataDir: string): string {
  return join(dataDir, "models");
}

/** Speech models (whisper.cpp .bin files) for transcripts: a folder of their own, apart from the language models. */
export function speechModelsDir(dataDir: string): string {
  return join(modelsDir(dataDir), "speech");
}

/** The speech model files in their folder (what `svc models pull --speech` keeps). */
export async function scanSpeechModels(dataDir: string): Promise<FolderEntry[]> {
  const dir = speechModelsDir(dataDir);
  const out: FolderEntry[] = [];
  for (const file of (await readdir(dir).catch(() => [] as string[])).sort()) {
    if (file.startsWith(".")) continue;
    const size = await sizeOf(join(dir, file));
    if (size !== null) out.push({ file, path: join(dir, file), sizeBytes: size });
  }
  return out;
}

export function downloadsDir(dataDir: string): string {
  return join(modelsDir(dataDir), ".downloads");
}

const SPLIT_PART = /-(\d{5})-of-(\d{5})\.gguf$/i;

/** Part 2 and later of a split model ("x-00002-of-00003.gguf"); they load through part 1. */
export function isLaterSplitPart(file: string): boolean {
  const m = SPLIT_PART.exec(file);
  return m !== null && Number(m[1]) > 1;
}

/** All files of a model: itself, or every part of a split model named by its first part. */
export function filesOfModel(file: string): string[] {
  const m = SPLIT_PART.exec(file);
  if (!m || Number(m[1]) !== 1) return [file];
  const total = Number(m[2]);
  const stem = file.slice(0, m.index);
  return Array.from({ length: total }, (_, i) => `${stem}-${String(i + 1).padStart(5, "0")}-of-${m[2]}.gguf`);
}

export interface FolderEntry {
  file: string;
  path: string;
  /** All parts together for a split model; bytes on disk so far for a partial download. */
  sizeBytes: number;
}

async function sizeOf(path: string): Promise<number | null> {
  return stat(path).then(
    (s) => (s.isFile() ? s.size : null),
    () => null,
  );
}

/** The .gguf models in the folder (one entry per split model) and the downloads in progress. */
export async function scanModelsFolder(dataDir: string): Promise<{ models: FolderEntry[]; partial: FolderEntry[] }> {
  const dir = modelsDir(dataDir);
  const names = await readdir(dir).catch(() => [] as string[]);
  const models: FolderEntry[] = [];
  for (const file of names.sort()) {
    // A vision projector belongs to the model it is named after (engine/vision/projector.ts), listed with it.
    if (!file.toLowerCase().endsWith(".gguf") || isLaterSplitPart(file) || file.toLowerCase().endsWith(PROJECTOR_SUFFIX)) continue;
    let total = 0;
    let complete = true;
    for (const part of filesOfModel(file)) {
      const size = await sizeOf(join(dir, part));
      if (size === null) complete = false;
      else total += size;
    }
    if (complete || total > 0) models.push({ file, path: join(dir, file), sizeBytes: total });
  }
  const partial: FolderEntry[] = [];
  const downloads = downloadsDir(dataDir);
  for (const name of (await readdir(downloads).catch(() => [] as string[])).sort()) {
    if (!name.endsWith(PARTIAL_DOWNLOAD_SUFFIX)) continue;
    const size = await sizeOf(join(downloads, name));
    if (size !== null) partial.push({ file: name.slice(0, -PARTIAL_DOWNLOAD_SUFFIX.length), path: join(downloads, name), sizeBytes: size });
  }
  return { models, partial };
}

/** Deletes a download in progress (its data and resume information). */
export async function removePartial(dataDir: string, file: string): Promise<boolean> {
  let removed = false;
  for (const part of filesOfModel(file))
    for (const name of [part + PARTIAL_DOWNLOAD_SUFFIX, part]) {
      const path = join(downloadsDir(dataDir), name);
      if ((await sizeOf(path)) !== null) {
        await rm(path, { force: true });
        removed = true;
      }
    }
  return removed;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The pid of a live process downloading `file` now, or null. */
export async function downloadLockOwner(dataDir: string, file: string): Promise<number | null> {
  const pid = Number((await readFile(join(downloadsDir(dataDir), `${basename(file)}.lock`), "utf8").catch(() => "")).trim());
  return Number.isInteger(pid) && pid > 0 && processAlive(pid) ? pid : null;
}

/**
 * One download of a file at a time, across processes: two downloaders writing the same resume file would
 * corrupt it. The lock holds the owner's pid; a lock whose process is gone is taken over.
 */
export async function lockDownload(dataDir: string, file: string): Promise<() => Promise<void>> {
  const path = join(downloadsDir(dataDir), `${basename(file)}.lock`);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(path, "wx", PRIVATE_FILE_MODE);
      await handle.writeFile(String(process.pid));
      await handle.close();
      return () => rm(path, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const pid = Number((await readFile(path, "utf8").catch(() => "")).trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && processAlive(pid))
        throw new AppError("conflict", `${file} is already being downloaded (process ${pid}). Wait for it, or stop it first.`, {
          code: "download_in_progress",
        });
      if (pid === process.pid)
        throw new AppError("conflict", `${file} is already being downloaded.`, { code: "download_in_progress" });
      await rm(path, { force: true });
    }
  }
  throw new AppError("conflict", `Could not lock the download of ${file}.`, { code: "download_in_progress" });
}

/** The language models (GGUF, what `svc serve` loads) or the speech models (whisper.cpp, for transcripts). */
export type ModelKind = "llm" | "speech";

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
  /** The vision projector beside it (`<model>.mmproj.gguf`): the model sees images. Null for a text-only model. */
  projector?: string | null;
}

/** The path of a model the active setting names: a name in the models folder, or an absolute path. */
export function modelPathOf(dataDir: string, file: string): string {
  return isAbsolute(file) ? file : join(modelsDir(dataDir), file);
}

/** A name in the models folder (".gguf" may be left off), or a path to a file anywhere. */
export function resolveModelFile(dataDir: string, fileOrPath: string): { file: string; path: string } {
  const directory = modelsDir(dataDir);
  const text = fileOrPath.trim();
  if (text === "") throw new AppError("invalid_request", "Name a model file (see `svc models list`).", { code: "invalid_model_name" });
  if (text.includes("/") || text.includes(sep) || isAbsolute(text)) {
    const path = resolve(text);
    // A file inside the models folder is stored by name, so the data dir can move.
    return resolve(directory, basename(path)) === path ? { file: basename(path), path } : { file: path, path };
  }
  const name = text.toLowerCase().endsWith(".gguf") ? text : `${text}.gguf`;
  return { file: name, path: join(directory, name) };
}

/** A whisper.cpp model described in the shape `svc models list` prints (architecture "whisper"). */
export async function speechSummary(path: string): Promise<GgufSummary> {
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
