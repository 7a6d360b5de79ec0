// The local model as something a user gets, sees and changes: the files in <data-dir>/models, which one is
// active (a setting in the database), downloads with progress and resume, and switching the running
// server. The CLI (`svc models ...`) and the desktop app's main process both drive this service; it is not
// exposed over HTTP, so an API key holder cannot download files onto the machine or swap its model.
//
// This class is the one door to the models feature, and does no job of its own: each job has its module,
//   model-catalogue.ts  the files, what each is and where it came from; removing them
//   model-downloads.ts  pulls: download, resume, verify, move in
//   active-model.ts     which model is active, for the setting and the engine together; following it
//   load-settings.ts    how a model loads: GPU preference, warm start, a model's own settings
// and this class builds them over one store, data dir and engine host, and hands each call to its owner.
import { availableParallelism, freemem, totalmem } from "node:os";
import { EngineHost, type HostLog, type LlamaEngineOptions } from "../../engine/engine-host.js";
import { WARM_START_MAX_BYTES, type WarmPrefix } from "../../engine/warm-start.js";
import { chooseThreads, type GpuPreference } from "../../engine/resource-plan.js";
import type { GpuInfo } from "../../engine/types.js";
import type { Store } from "../../store/store.js";
import { ActiveModel } from "./active-model.js";
import { LoadSettings, type ModelLoadSettings, type WarmStartState } from "./load-settings.js";
import { ModelCatalogue, type ModelList } from "./model-catalogue.js";
import { ModelDownloads, type PullOptions, type PullResult } from "./model-downloads.js";
import type { RecommendedModel } from "./model-sources.js";
import type { ModelEntry, ModelKind } from "./models-folder.js";

export { ACTIVE_MODEL_MARKER, ACTIVE_MODEL_SETTING, SPEECH_MODEL_SETTING } from "./active-model.js";
export { GPU_PREFERENCE_SETTING, GPU_PREFERENCES, MODEL_SETTINGS_PREFIX, parseModelLoadSettings } from "./load-settings.js";
export type { ModelLoadSettings, WarmStartState } from "./load-settings.js";
export type { ModelList, PartialDownload } from "./model-catalogue.js";
export type { PullEvent, PullOptions, PullResult } from "./model-downloads.js";
export type { ModelEntry, ModelKind } from "./models-folder.js";

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

export class ModelsService {
  private readonly host: EngineHost | undefined;
  private readonly settings: LoadSettings;
  private readonly activeModel: ActiveModel;
  private readonly catalogue: ModelCatalogue;
  private readonly downloads: ModelDownloads;

  constructor(options: ModelsServiceOptions) {
    const { store, dataDir } = options;
    const log: HostLog = options.log ?? (() => undefined);
    this.host = options.host;
    this.settings = new LoadSettings({
      store,
      dataDir,
      host: options.host,
      log,
      engineOptions: options.engineOptions ?? {},
      warm: { maxBytes: options.warmStart?.maxBytes ?? options.engineOptions?.warmStart?.maxBytes ?? WARM_START_MAX_BYTES, forced: options.warmStart?.forced === true },
    });
    this.activeModel = new ActiveModel({ store, dataDir, host: options.host, log, load: this.settings });
    this.catalogue = new ModelCatalogue({ store, dataDir, env: options.env ?? process.env, activeModel: this.activeModel });
    this.downloads = new ModelDownloads({ store, dataDir, catalogue: this.catalogue, activeModel: this.activeModel });
  }

  get directory(): string {
    return this.catalogue.directory;
  }

  recommended(): RecommendedModel {
    return this.catalogue.recommended();
  }

  /** What a first run needs to know: is there any model, and is one active. */
  async needsModel(): Promise<boolean> {
    return this.catalogue.needsModel();
  }

  /**
   * The active model of a kind, resolved to a path; null when none is set. Without a speech model, audio and
   * video uploads say that no transcript is available; it is read at every extraction, so a pull or use in
   * another process counts.
   */
  active(kind: ModelKind = "llm"): { file: string; path: string } | null {
    return this.activeModel.active(kind);
  }

  async list(): Promise<ModelList> {
    return this.catalogue.list();
  }

  /**
   * Makes a model the active one of its kind (a language model unless `kind` says speech): `svc serve` loads
   * the language model at start, and a running server switches to it (at once through this call, or as soon
   * as another process sets it); transcripts use the speech model. Throws AppError when the file is missing
   * or not a model of that kind, or (with a running server) when a language model fails to load.
   */
  async use(fileOrPath: string, options: { kind?: ModelKind } = {}): Promise<ModelEntry> {
    return this.activeModel.use(fileOrPath, options.kind ?? "llm");
  }

  /**
   * Deletes a model of a kind from its folder (all parts of a split model), or its download in progress. The
   * active one is only removed with `force`, which also clears the setting (a server following it unloads).
   */
  async remove(fileOrName: string, options: { kind?: ModelKind; force?: boolean } = {}): Promise<{ file: string; removed: string[]; wasActive: boolean }> {
    return this.catalogue.remove(fileOrName, options);
  }

  /** Checks a pull's source before the pull starts (the window refuses a bad one on the spot): AppError (400). */
  checkSource(sourceText: string | undefined, kind: ModelKind = "llm"): void {
    this.catalogue.checkSource(sourceText, kind);
  }

  /** Downloads a model into the models folder: see PullOptions. Throws AppError with a readable message. */
  async pull(sourceText: string | undefined, options: PullOptions = {}): Promise<PullResult> {
    return this.downloads.pull(sourceText, options);
  }

  /** The GPU preference for loads from now on (auto when the server was started without one). */
  gpuPreference(): GpuPreference {
    return this.settings.gpuPreference();
  }

  /**
   * Changes the GPU preference, remembers it for the next start (GPU_PREFERENCE_SETTING) and loads the
   * serving model again with it, so the change shows at once. Throws AppError when that load fails.
   */
  async setGpuPreference(gpu: GpuPreference): Promise<void> {
    return this.settings.setGpuPreference(gpu);
  }

  /** Warm start for the loads from now on (it is part of every load's options, a switch's and a restart's too). */
  warmStart(): WarmStartState {
    return this.settings.warmStart();
  }

  /**
   * Turns warm start on or off, remembers it for the next start (WARM_START_SETTING) and loads the serving
   * model again with it (a model's engine takes it when it loads). A load that fails puts the previous choice
   * back (the host has loaded the model again as it was) and rejects. Refused when the start-up options decided it.
   */
  async setWarmStart(enabled: boolean): Promise<void> {
    return this.settings.setWarmStart(enabled);
  }

  /** The prefixes warm start saved, the most recently used first. */
  warmPrefixes(): WarmPrefix[] {
    return this.settings.warmPrefixes();
  }

  /** Deletes every saved prefix (a running engine saves new ones from its next long prompt); returns how many. */
  clearWarmPrefixes(): number {
    return this.settings.clearWarmPrefixes();
  }

  /** A model's own load settings ({} when it has none): by its name in the models folder, or its path. */
  modelSettings(fileOrPath: string): ModelLoadSettings {
    return this.settings.modelSettings(fileOrPath);
  }

  /** What a load of this model file takes: the server's options with the model's own settings over them. */
  loadOptions(path: string): LlamaEngineOptions {
    return this.settings.loadOptions(path);
  }

  /**
   * Saves a model's own settings; when the running server has that model loaded, loads it again with them
   * (through the host, as a switch: running requests finish first). A load that fails puts the previous
   * settings back and rejects (the host has loaded the model again with its previous options).
   */
  async setModelSettings(fileOrPath: string, settings: ModelLoadSettings): Promise<ModelLoadSettings> {
    return this.settings.setModelSettings(fileOrPath, settings);
  }

  async hardware(): Promise<HardwareReport> {
    const gpu = this.host ? await this.host.gpuNow() : await EngineHost.detectGpu(this.settings.gpuPreference()).catch(() => null);
    const cores = availableParallelism();
    return { gpu, cpuCores: cores, defaultThreads: chooseThreads({ cores }), ramTotalBytes: totalmem(), ramFreeBytes: freemem() };
  }

  /**
   * Follows the active-model setting: when another process (`svc models use`) changes it, the running server
   * switches as soon as it is written (a watched marker file, not a poll). Only for a server started without
   * an explicit --model.
   */
  follow(): void {
    this.activeModel.follow();
  }

  /** Loads the active model again now (SIGHUP): the setting's file, or the current file for an explicit --model. */
  async reload(): Promise<void> {
    return this.activeModel.reload();
  }

  async close(): Promise<void> {
    return this.activeModel.close();
  }
}
