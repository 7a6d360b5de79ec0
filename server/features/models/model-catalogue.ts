// The models on this machine: the files in <data-dir>/models (language models) and models/speech (speech
// models), with what each is (read from the file) and where it came from (the model_files table); removing
// them; and what differs between the two kinds in a pull (KindProfile). Which one is active is read from,
// and cleared through, the active-model controller (active-model.ts).
import { projectorBeside, projectorPathFor } from "../../engine/vision/projector.js";
import { rm, stat } from "node:fs/promises";
import { basename, isAbsolute, join, sep } from "node:path";
import { AppError } from "../../core/errors.js";
import { InvalidModelFileError, readGgufSummary, verifyGgufFile, type GgufSummary } from "../../engine/gguf-inspect.js";
import { keptBytesOfPartial } from "../../engine/model-downloader.js";
import type { Store } from "../../store/store.js";
import type { ActiveModel } from "./active-model.js";
import { parseModelSource, parseSpeechModelSource, RECOMMENDED_MODEL, type ModelSource, type RecommendedModel } from "./model-sources.js";
import {
  downloadLockOwner,
  filesOfModel,
  modelsDir,
  removePartial,
  scanModelsFolder,
  scanSpeechModels,
  speechModelsDir,
  speechSummary,
  type ModelEntry,
  type ModelKind,
} from "./models-folder.js";

export interface PartialDownload {
  file: string;
  /** Bytes a resumed pull keeps (whole finished pieces; the file on disk is already as long as the model). */
  keptBytes: number;
  /** The model's size, when the download's progress record (or, before there is one, the pull's own record) says. */
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

/** What differs between the kinds of model in a pull: where they come from, live, and how they are checked. */
export interface KindProfile {
  kind: ModelKind;
  directory: string;
  parse(source: string | undefined): ModelSource;
  /** A quick look (an existing file); verify reads the whole download. Both throw InvalidModelFileError. */
  summarize(path: string): Promise<GgufSummary>;
  verify(path: string): Promise<GgufSummary>;
  /** The file's key in the model_files table (speech files are kept apart from GGUF names). */
  record(file: string): string;
  /** The CLI flag that names the kind, for messages. */
  flag: string;
}

export interface ModelCatalogueOptions {
  store: Store;
  dataDir: string;
  env: NodeJS.ProcessEnv;
  activeModel: ActiveModel;
}

export class ModelCatalogue {
  private readonly store: Store;
  private readonly dataDir: string;
  private readonly env: NodeJS.ProcessEnv;
  private readonly activeModel: ActiveModel;

  constructor(options: ModelCatalogueOptions) {
    this.store = options.store;
    this.dataDir = options.dataDir;
    this.env = options.env;
    this.activeModel = options.activeModel;
  }

  get directory(): string {
    return modelsDir(this.dataDir);
  }

  recommended(): RecommendedModel {
    return RECOMMENDED_MODEL;
  }

  /** What a first run needs to know: is there any model, and is one active. */
  async needsModel(): Promise<boolean> {
    if (this.activeModel.active()) return false;
    return (await scanModelsFolder(this.dataDir)).models.length === 0;
  }

  async list(): Promise<ModelList> {
    const active = this.activeModel.active();
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
        projector: projectorBeside(entry.path) ?? null,
      });
    }
    const partial: PartialDownload[] = [];
    for (const p of folder.partial) {
      if (folder.models.some((m) => m.file === p.file)) continue;
      const { keptBytes, totalBytes } = await keptBytesOfPartial(p.path);
      const downloadingNow = (await downloadLockOwner(this.dataDir, p.file)) !== null;
      const speechRecord = sources.has(p.file) ? undefined : sources.get(`speech/${p.file}`);
      const record = sources.get(p.file) ?? speechRecord;
      // Before ipull writes its first progress record the file says nothing; the pull recorded the announced
      // size when it began (a whole model's size, so only for a model in one file).
      const announced = filesOfModel(p.file).length === 1 ? (record?.size_bytes ?? null) : null;
      partial.push({
        file: p.file,
        keptBytes,
        totalBytes: totalBytes ?? announced,
        source: record?.source ?? null,
        downloadingNow,
        kind: speechRecord ? "speech" : "llm",
      });
    }
    const activeSpeech = this.activeModel.active("speech");
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
   * Deletes a model of a kind from its folder (all parts of a split language model), or its download in
   * progress. The active one is only removed with `force`, which also clears the setting (a server following
   * the active language model unloads; audio and video uploads get no transcript without a speech model).
   */
  async remove(fileOrName: string, options: { kind?: ModelKind; force?: boolean } = {}): Promise<{ file: string; removed: string[]; wasActive: boolean }> {
    const kind = options.kind ?? "llm";
    const speech = kind === "speech";
    const dir = speech ? speechModelsDir(this.dataDir) : this.directory;
    if (fileOrName.includes("/") || fileOrName.includes(sep) || isAbsolute(fileOrName))
      throw new AppError("invalid_request", `svc models remove ${speech ? "--speech " : ""}takes a file name from \`svc models list\`; it only deletes files in ${dir}.`, {
        code: "invalid_model_name",
      });
    const folder = await scanModelsFolder(this.dataDir);
    const files = speech ? (await scanSpeechModels(this.dataDir)).map((m) => m.file) : folder.models.map((m) => m.file);
    const partial = folder.partial.map((p) => p.file);
    const file = [fileOrName, `${fileOrName}${speech ? ".bin" : ".gguf"}`].find((name) => files.includes(name) || partial.includes(name)) ?? null;
    if (file === null)
      throw new AppError("not_found", `No ${speech ? "speech " : ""}model named '${fileOrName}' in ${dir}. \`svc models list\` shows what is there.`, {
        code: "model_not_found",
      });
    const wasActive = this.activeModel.active(kind)?.file === file;
    if (wasActive && !options.force)
      throw new AppError(
        "conflict",
        speech
          ? `${file} is the speech model in use. Remove it with --force (transcripts stop until another is pulled or chosen).`
          : `${file} is the active model. Select another with \`svc models use\` first, or remove it with --force.`,
        { code: "model_active" },
      );
    const removed: string[] = [];
    if (files.includes(file))
      // A language model's vision projector goes with it.
      for (const part of speech ? [file] : [...filesOfModel(file), basename(projectorPathFor(join(dir, file)))]) {
        try {
          await rm(join(dir, part));
          removed.push(part);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (speech) throw err;
          if (code === "ENOENT") continue;
          throw new AppError("conflict", `Cannot delete ${part} (${code}); a running server may be using it. Stop it first.`, { code: "model_in_use" });
        }
      }
    if (await removePartial(this.dataDir, file)) removed.push(`${file} (partial download)`);
    this.store.modelFiles.delete(this.profile(kind).record(file));
    if (wasActive) this.activeModel.forget(kind);
    return { file, removed, wasActive };
  }

  /** Checks a pull's source before the pull starts (the window refuses a bad one on the spot): AppError (400). */
  checkSource(sourceText: string | undefined, kind: ModelKind = "llm"): void {
    this.profile(kind).parse(sourceText);
  }

  /** What a pull of this kind of model reads, writes and checks. */
  profile(kind: ModelKind = "llm"): KindProfile {
    if (kind === "speech")
      return {
        kind,
        directory: speechModelsDir(this.dataDir),
        parse: (source) => parseSpeechModelSource(source, this.env),
        summarize: speechSummary,
        verify: speechSummary,
        record: (file) => `speech/${file}`,
        flag: "--speech ",
      };
    return {
      kind,
      directory: this.directory,
      parse: (source) => parseModelSource(source, this.env),
      summarize: readGgufSummary,
      verify: verifyGgufFile,
      record: (file) => file,
      flag: "",
    };
  }
}
