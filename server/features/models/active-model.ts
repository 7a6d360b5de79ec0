// Which model is active, for the setting and the engine together: the one owner of ACTIVE_MODEL_SETTING
// (and SPEECH_MODEL_SETTING, which no engine loads). `use` sets it and switches the running server, putting
// the setting back when the switch fails; `follow` switches when another process (`svc models use`)
// changes it, told by a marker file that every write of the setting touches and a following server watches
// (a push, not a poll); a pull may make its model active when none is; a removal of the active model clears it.
import { watch, writeFileSync, type FSWatcher } from "node:fs";
import { stat } from "node:fs/promises";
import { basename, isAbsolute, join, resolve, sep } from "node:path";
import { AppError } from "../../core/errors.js";
import { SwitchFailure, type EngineHost, type HostLog } from "../../engine/engine-host.js";
import { readGgufSummary, type GgufSummary } from "../../engine/gguf-inspect.js";
import type { SettingRow } from "../../store/settings-repository.js";
import { PRIVATE_FILE_MODE } from "../../store/file-modes.js";
import type { Store } from "../../store/store.js";
import type { LoadSettings } from "./load-settings.js";
import { modelPathOf, modelsDir, resolveModelFile, speechModelsDir, speechSummary, type ModelEntry, type ModelKind } from "./models-folder.js";

export const ACTIVE_MODEL_SETTING = "active_model";
/** The speech model (a file in <data-dir>/models/speech) that transcribes audio and video uploads. */
export const SPEECH_MODEL_SETTING = "speech_model";
/**
 * A file in the data dir that every writer of ACTIVE_MODEL_SETTING rewrites after the write, so that a
 * running server in another process, which watches it, switches at once. It holds only the time of the write.
 */
export const ACTIVE_MODEL_MARKER = "active-model.changed";
/** Where fs.watch is unsupported: how often a following server reads the setting instead. */
export const FALLBACK_POLL_MS = 5_000;
/** How long a burst of marker events is let settle before the setting is read. */
const DEBOUNCE_MS = 50;

function markerPath(dataDir: string): string {
  return join(dataDir, ACTIVE_MODEL_MARKER);
}

function settingOf(kind: ModelKind): string {
  return kind === "speech" ? SPEECH_MODEL_SETTING : ACTIVE_MODEL_SETTING;
}

async function isFile(path: string): Promise<boolean> {
  return stat(path).then((s) => s.isFile(), () => false);
}

function sameSetting(a: SettingRow | undefined, b: SettingRow | undefined): boolean {
  return a?.value === b?.value && a?.updated_at === b?.updated_at;
}

export interface ActiveModelOptions {
  store: Store;
  dataDir: string;
  /** The running server's engine; without one (the CLI) only the setting changes. */
  host: EngineHost | undefined;
  log: HostLog;
  /** How a model loads (the options the host gets). */
  load: LoadSettings;
}

export class ActiveModel {
  private readonly store: Store;
  private readonly dataDir: string;
  private readonly host: EngineHost | undefined;
  private readonly log: HostLog;
  private readonly load: LoadSettings;
  private following = false;
  private watcher: FSWatcher | null = null;
  private debounce: NodeJS.Timeout | null = null;
  /** Only where fs.watch is unsupported. */
  private poll: NodeJS.Timeout | null = null;
  /** The setting changed while a switch ran. */
  private recheck = false;
  /** The setting as last read, and the setting of the model that is serving. */
  private seen: SettingRow | undefined;
  private serving: SettingRow | undefined;
  private applying: Promise<void> | null = null;

  constructor(options: ActiveModelOptions) {
    this.store = options.store;
    this.dataDir = options.dataDir;
    this.host = options.host;
    this.log = options.log;
    this.load = options.load;
  }

  /**
   * The active model of a kind from its setting, resolved to a path; null when none is set. The speech model
   * (transcripts) is read at every extraction, so a pull or use in another process counts; without one, audio
   * and video uploads say that no transcript is available.
   */
  active(kind: ModelKind = "llm"): { file: string; path: string } | null {
    const row = this.store.settings.get(settingOf(kind));
    if (!row) return null;
    if (kind === "speech") return { file: row.value, path: isAbsolute(row.value) ? row.value : join(speechModelsDir(this.dataDir), row.value) };
    return { file: row.value, path: modelPathOf(this.dataDir, row.value) };
  }

  /**
   * Makes a model the active one of its kind: a language model (a name in the models folder, or a path to a
   * GGUF file) is the one `svc serve` loads at start, and a running server switches to it (at once through
   * this call, or as soon as another process sets it); a speech model (a name in the speech folder, or a path
   * to a whisper.cpp file) is the one transcripts use. Throws AppError when the file is missing or not a model
   * of that kind, or (with a running server) when a language model fails to load.
   */
  async use(fileOrPath: string, kind: ModelKind = "llm"): Promise<ModelEntry> {
    const { file, path } = kind === "speech" ? await this.locateSpeech(fileOrPath) : await this.locateLlm(fileOrPath);
    let summary: GgufSummary;
    try {
      summary = kind === "speech" ? await speechSummary(path) : await readGgufSummary(path);
    } catch (err) {
      const message = (err as Error).message;
      throw new AppError("invalid_request", kind === "speech" ? `${basename(path)}: ${message}` : message, { code: "invalid_model_file" });
    }
    if (kind === "speech") this.write("speech", file);
    else await this.switchTo(file, path);
    return {
      file,
      path,
      sizeBytes: await stat(path).then((s) => s.size, () => 0),
      active: true,
      architecture: summary.architecture,
      name: summary.name,
      sizeLabel: summary.sizeLabel,
      quantization: summary.quantization,
      contextLength: summary.contextLength,
      source: this.store.modelFiles.get(kind === "speech" ? `speech/${file}` : file)?.source ?? null,
      error: null,
    };
  }

  /** A language model by its name in the models folder (".gguf" may be left off), or a path to a file anywhere. */
  private async locateLlm(fileOrPath: string): Promise<{ file: string; path: string }> {
    const { file, path } = resolveModelFile(this.dataDir, fileOrPath);
    if (!(await isFile(path)))
      throw new AppError(
        "not_found",
        isAbsolute(file)
          ? `${file} does not exist.`
          : `No model named '${fileOrPath}' in ${modelsDir(this.dataDir)}. \`svc models list\` shows what is there; a path to a .gguf file elsewhere works too.`,
        { code: "model_not_found" },
      );
    return { file, path };
  }

  /** A speech model by its name in the speech folder (".bin" may be left off), or a path to a file anywhere. */
  private async locateSpeech(fileOrPath: string): Promise<{ file: string; path: string }> {
    const text = fileOrPath.trim();
    if (text === "") throw new AppError("invalid_request", "Name a speech model file (see `svc models list`).", { code: "invalid_model_name" });
    const dir = speechModelsDir(this.dataDir);
    const byPath = text.includes("/") || text.includes(sep) || isAbsolute(text);
    let path = byPath ? resolve(text) : join(dir, text);
    if (!byPath && !(await isFile(path))) path = join(dir, `${text}.bin`);
    if (!(await isFile(path)))
      throw new AppError("not_found", byPath ? `${path} does not exist.` : `No speech model named '${text}' in ${dir}. \`svc models list\` shows what is there.`, {
        code: "model_not_found",
      });
    return { file: resolve(dir, basename(path)) === path ? basename(path) : path, path };
  }

  /** Sets the active language model and switches the running server to it (see switchEngine). */
  private async switchTo(file: string, path: string): Promise<void> {
    const previous = this.store.settings.get(ACTIVE_MODEL_SETTING);
    this.write("llm", file);
    this.seen = this.store.settings.get(ACTIVE_MODEL_SETTING);
    if (this.host) await this.switchEngine(this.host, path, previous, this.seen);
  }

  /**
   * Switches the running server to `path`, the model the setting now names (`tried`), as one turn of the
   * host's queue. A failed switch is undone here, the engine and the setting together: the model that was
   * serving loads again, then the setting goes back to what serves (`previous`, or none when that did not
   * come back), unless someone set it again meanwhile. Rejects with the error that reports the switch.
   */
  private async switchEngine(host: EngineHost, path: string, previous: SettingRow | undefined, tried: SettingRow | undefined): Promise<void> {
    await host.exclusively(async (turn) => {
      try {
        await turn.load(this.load.loadOptions(path));
        this.serving = tried;
      } catch (err) {
        // A SwitchFailure unloaded the old model: load it again (restore always rejects, with what to report).
        const failure = err instanceof SwitchFailure ? await turn.restore(err).catch((restored: unknown) => restored) : err;
        this.restoreSetting(previous, tried);
        throw failure;
      }
    });
  }

  /** Makes a pulled model the active one when none of its kind is, unless the pull said not to. */
  activateIfNone(file: string, options: { activateIfNone?: boolean }, kind: ModelKind = "llm"): boolean {
    if (options.activateIfNone === false || this.store.settings.get(settingOf(kind))) return false;
    this.write(kind, file);
    return true;
  }

  /** Clears the active setting of a kind (its model was removed); a server following it unloads. */
  forget(kind: ModelKind): void {
    this.write(kind, null);
  }

  /**
   * Follows the active-model setting: when another process (`svc models use`) changes it, the running server
   * switches as soon as that process has written it. Every writer of the setting touches a marker file in the
   * data dir (ACTIVE_MODEL_MARKER), and this watches it (fs.watch); only where the platform cannot watch a file
   * does it read the setting every FALLBACK_POLL_MS. Only for a server started without an explicit --model.
   */
  follow(): void {
    if (!this.host || this.following) return;
    this.following = true;
    // Watch first, then read: a change written in between is seen by the watch.
    this.watchMarker();
    this.seen = this.store.settings.get(ACTIVE_MODEL_SETTING);
    this.serving = this.host.files().current ? this.seen : undefined;
  }

  /** Loads the active model again now (SIGHUP): the setting's file, or the current file for an explicit --model. */
  async reload(): Promise<void> {
    if (!this.host) return;
    if (!this.following) {
      await this.host.reload().catch((err: unknown) => this.log("error", `Reload failed: ${(err as Error).message}`));
      return;
    }
    const row = this.store.settings.get(ACTIVE_MODEL_SETTING);
    this.seen = row;
    await this.apply(row);
  }

  async close(): Promise<void> {
    this.following = false;
    this.watcher?.close();
    this.watcher = null;
    if (this.poll) clearInterval(this.poll);
    this.poll = null;
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = null;
    await this.applying;
  }

  /**
   * Sets (or, with null, clears) the active model of a kind: the only writes of these settings. A following
   * server is told of a language model's through the marker; the speech model is read at each extraction.
   */
  private write(kind: ModelKind, file: string | null): void {
    if (file === null) this.store.settings.delete(settingOf(kind));
    else this.store.settings.set(settingOf(kind), file);
    if (kind === "speech") return;
    try {
      writeFileSync(markerPath(this.dataDir), `${Date.now()}\n`, { mode: PRIVATE_FILE_MODE });
    } catch (err) {
      // The setting is written; a following server sees it at its next start or SIGHUP.
      this.log("warn", `Could not touch ${markerPath(this.dataDir)}: ${(err as Error).message}`);
    }
  }

  /** Watches the marker file; falls back to a slow poll of the setting where fs.watch is unsupported. */
  private watchMarker(): void {
    if (!this.following) return;
    const marker = markerPath(this.dataDir);
    try {
      // The file must exist to be watched; a writer later rewrites it in place (the same inode).
      writeFileSync(marker, "", { flag: "a", mode: PRIVATE_FILE_MODE });
      const watcher = watch(marker, { persistent: false }, (event) => {
        this.changedSoon();
        // Deleted or replaced: watch the new file (a writer creates it again).
        if (event === "rename") this.rewatch(watcher);
      });
      watcher.on("error", () => this.rewatch(watcher));
      this.watcher = watcher;
    } catch (err) {
      this.log("debug", `Cannot watch ${marker} (${(err as Error).message}); reading the active-model setting every ${FALLBACK_POLL_MS / 1000} s instead.`);
      this.poll ??= setInterval(() => this.check(), FALLBACK_POLL_MS);
      this.poll.unref();
    }
  }

  private rewatch(watcher: FSWatcher): void {
    if (this.watcher !== watcher) return;
    watcher.close();
    this.watcher = null;
    this.watchMarker();
  }

  /** A marker event: writes come in bursts (truncate, write), so read the setting once they settle. */
  private changedSoon(): void {
    if (this.debounce) return;
    this.debounce = setTimeout(() => {
      this.debounce = null;
      this.check();
    }, DEBOUNCE_MS);
    this.debounce.unref();
  }

  /** Switches when the setting differs from the one last seen; a change during a switch is checked after it. */
  private check(): void {
    if (!this.following) return;
    if (this.applying) {
      this.recheck = true;
      return;
    }
    const row = this.store.settings.get(ACTIVE_MODEL_SETTING);
    if (sameSetting(row, this.seen)) return;
    this.seen = row;
    this.applying = this.apply(row).finally(() => {
      this.applying = null;
      if (this.recheck) {
        this.recheck = false;
        this.check();
      }
    });
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
      // The setting names what the server runs: a failed switch puts back the model that was serving.
      await this.switchEngine(this.host, modelPathOf(this.dataDir, row.value), this.serving, row);
    } catch (err) {
      this.log("error", `Could not switch to ${row?.value}: ${(err as Error).message}`);
    }
  }

  /**
   * Puts `previous` back as the active setting, unless someone changed it again since `tried` was set; none
   * when the engine does not serve `previous` (its load failed too). Only in a switch's turn (switchEngine).
   */
  private restoreSetting(previous: SettingRow | undefined, tried: SettingRow | undefined): void {
    if (!sameSetting(this.store.settings.get(ACTIVE_MODEL_SETTING), tried)) return;
    if (previous && this.host?.files().current !== modelPathOf(this.dataDir, previous.value)) previous = undefined;
    this.write("llm", previous ? previous.value : null);
    this.seen = this.store.settings.get(ACTIVE_MODEL_SETTING);
    this.serving = this.seen;
  }
}
