// How the engine loads a model, as the user set it: the server's start-up options, the GPU preference and
// warm start over them (each remembered in a setting), and each model's own load settings. A change loads
// the serving model again at once (through the EngineHost), and a load that fails puts the previous choice
// back. Which model is active is not this module's job (active-model.ts); it only says how one loads.
import { projectorBeside } from "../../engine/vision/projector.js";
import { existsSync } from "node:fs";
import { basename, resolve } from "node:path";
import { AppError } from "../../core/errors.js";
import type { EngineHost, HostLog } from "../../engine/engine-host.js";
import type { LlamaEngineOptions } from "../../engine/engine-host.js";
import { clearWarmPrefixes, listWarmPrefixes, WARM_START_SETTING, warmStartDir, type WarmPrefix } from "../../engine/warm-start.js";
import type { GpuPreference } from "../../engine/resource-plan.js";
import type { Store } from "../../store/store.js";
import { resolveModelFile } from "./models-folder.js";

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
  /**
   * The draft model speculation guesses with while this model serves (a file in the models folder, or a
   * path): it wins over --draft-model. Absent: the server's (prompt lookup unless --draft-model names one).
   */
  draftModel?: string;
}

type NumericSetting = Exclude<keyof ModelLoadSettings, "draftModel">;

const SETTING_LIMITS: Record<NumericSetting, { min: number; max: number; words: string }> = {
  contextSize: { min: 512, max: 1_048_576, words: "A context size is a whole number of tokens from 512" },
  sequences: { min: 1, max: 64, words: "Answers at once is a whole number from 1" },
  gpuLayers: { min: 0, max: 1024, words: "GPU layers is a whole number from 0" },
  threads: { min: 1, max: 1024, words: "Threads is a whole number from 1" },
};

/** The settings as given, checked; undefined or null fields are left out (automatic). */
export function parseModelLoadSettings(input: Record<string, unknown>): ModelLoadSettings {
  const out: ModelLoadSettings = {};
  const draft = input.draftModel;
  if (draft !== undefined && draft !== null && draft !== "") {
    if (typeof draft !== "string" || draft.trim() === "" || draft.length > 4096)
      throw new AppError("invalid_request", `A draft model is the name of a model file (got ${JSON.stringify(draft)}).`, { code: "invalid_model_settings", param: "draftModel" });
    out.draftModel = draft.trim();
  }
  for (const key of Object.keys(SETTING_LIMITS) as NumericSetting[]) {
    const value = input[key];
    if (value === undefined || value === null) continue;
    const { min, max, words } = SETTING_LIMITS[key];
    if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max)
      throw new AppError("invalid_request", `${words} to ${max} (got ${JSON.stringify(value)}).`, { code: "invalid_model_settings", param: key });
    out[key] = value;
  }
  return out;
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

export interface LoadSettingsOptions {
  store: Store;
  dataDir: string;
  host: EngineHost | undefined;
  log: HostLog;
  /** The server's start-up load options. */
  engineOptions: Omit<LlamaEngineOptions, "modelPath">;
  /** Warm start's byte limit, and whether the start-up options decided it. */
  warm: { maxBytes: number; forced: boolean };
}

export class LoadSettings {
  private readonly store: Store;
  private readonly dataDir: string;
  private readonly host: EngineHost | undefined;
  private readonly log: HostLog;
  private engineOptions: Omit<LlamaEngineOptions, "modelPath">;
  private readonly warm: { maxBytes: number; forced: boolean };

  constructor(options: LoadSettingsOptions) {
    this.store = options.store;
    this.dataDir = options.dataDir;
    this.host = options.host;
    this.log = options.log;
    this.engineOptions = options.engineOptions;
    this.warm = options.warm;
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
    const row = this.store.settings.get(MODEL_SETTINGS_PREFIX + resolveModelFile(this.dataDir, fileOrPath).file);
    if (!row) return {};
    try {
      return parseModelLoadSettings(JSON.parse(row.value) as Record<string, unknown>);
    } catch {
      return {};
    }
  }

  /** What a load of this model file takes: the server's options with the model's own settings over them. */
  loadOptions(path: string): LlamaEngineOptions {
    const projectorPath = projectorBeside(path);
    const { draftModel, ...own } = this.modelSettings(path);
    const draftModelPath = draftModel ? resolveModelFile(this.dataDir, draftModel).path : this.engineOptions.draftModelPath;
    return { ...this.engineOptions, ...own, modelPath: path, ...(projectorPath ? { projectorPath } : {}), ...(draftModelPath ? { draftModelPath } : {}) };
  }

  /**
   * Saves a model's own settings; when the running server has that model loaded, loads it again with them
   * (through the host, as a switch: running requests finish first). A load that fails puts the previous
   * settings back and rejects (the host has loaded the model again with its previous options).
   */
  async setModelSettings(fileOrPath: string, settings: ModelLoadSettings): Promise<ModelLoadSettings> {
    const { file, path } = resolveModelFile(this.dataDir, fileOrPath);
    const checked = parseModelLoadSettings(settings as Record<string, unknown>);
    if (checked.draftModel) {
      const draft = resolveModelFile(this.dataDir, checked.draftModel);
      if (!existsSync(draft.path))
        throw new AppError("not_found", `The draft model ${checked.draftModel} is not in the models folder (see \`svc models list\`).`, { code: "draft_model_not_found", param: "draftModel" });
      if (resolve(draft.path) === resolve(path))
        throw new AppError("invalid_request", "A model cannot be its own draft model: pick a smaller model of the same family.", { code: "invalid_model_settings", param: "draftModel" });
      checked.draftModel = draft.file;
    }
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
}
