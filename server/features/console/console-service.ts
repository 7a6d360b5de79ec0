// Why one file (over 500 lines): it is the one implementation of ConsoleApi (contract.ts), a method per thing
// the window can ask, each a few lines over a service (keys, accounts, models, settings); what is not a call's
// own few lines is apart (console-views.ts, model-downloads.ts, window-feed.ts), and splitting the calls by page
// would split one interface's implementation across files.
// What the desktop window's console does, over the running server's own services. The Electron main process
// answers the window's IPC calls with it; the UI tests answer the same calls with it, so both drive one code
// path. Nothing here is reachable over HTTP.
import { mkdirSync, watch, type FSWatcher } from "node:fs";
import { basename } from "node:path";
import { AppError } from "../../core/errors.js";
import { nowSeconds } from "../../core/ids.js";
import { isLoopbackHost } from "../../core/loopback.js";
import { engineBuildHintInWindow } from "../../engine/engine-build.js";
import type { UpstreamTarget } from "../../engine/upstream-client.js";
import {
  readUpstreamAffinitySetting,
  readUpstreamsSetting,
  savedKeys,
  UPSTREAM_AFFINITY_SETTING,
  UPSTREAMS_SETTING,
  UpstreamSettingError,
  upstreamsToSave,
  writeUpstreamsSetting,
} from "../../engine/upstream-settings.js";
import { WARM_START_MIN_TOKENS } from "../../engine/warm-start.js";
import type { FastifyInstance } from "fastify";
import type { EngineHost } from "../../engine/engine-host.js";
import type { Scheduler } from "../../pipeline/scheduler.js";
import { DEFAULT_ACCOUNT_NAME } from "../../store/accounts-repository.js";
import type { Store } from "../../store/store.js";
import type { AccountsService } from "../accounts/accounts-service.js";
import { encodeBatch } from "../batches/batch-object.js";
import type { BatchService } from "../batches/batch-service.js";
import { toFileOut } from "../files/files-service.js";
import type { KeysService } from "../keys/keys-service.js";
import { RECOMMENDED_VISION_MODEL } from "../models/model-sources.js";
import type { ModelList, ModelsService } from "../models/models-service.js";
import type {
  AccountView,
  ConsoleApi,
  CreatedAccountView,
  ConsoleResult,
  CreatedKeyView,
  DownloadView,
  FirstRunView,
  GpuPreference,
  KeyView,
  LogLine,
  ModelKind,
  ModelSettings,
  ModelsView,
  PasswordResetView,
  ServerInfo,
  StatusView,
  UpstreamsSettingView,
  WarmStartView,
  WindowTopic,
  WindowUpdate,
} from "./contract.js";
import { CONSOLE_METHODS } from "./contract.js";
import { accountView, describeSettings, inWindowWords, keyView, kindOf, modelsView, settingsView } from "./console-views.js";
import type { LogBuffer } from "./log-buffer.js";
import { ModelDownloads } from "./model-downloads.js";
import type { FileOut, MessageBatch } from "./wire.js";
import { WindowFeed } from "./window-feed.js";

export const WINDOW_KEY_NAME = "Desktop window";
export const LAN_EXPOSURE_SETTING = "lan_exposure";
/** The desktop app's port for its next start (SVC_PORT wins over it). */
export const PORT_SETTING = "desktop_port";

/** The parts of the running server (server/index.ts's RunningServer) the console works over. */
export interface ConsoleServer {
  url: string;
  port: number;
  app: FastifyInstance;
  store: Store;
  keys: KeysService;
  accounts: AccountsService;
  engineHost: EngineHost;
  scheduler: Scheduler;
  models: ModelsService;
  batches: BatchService;
  /** What it generates on: upstream engines or the built-in one (RunningServer's upstreams). */
  upstreams: { urls: string[] | null; affinity: boolean; fromStartup: boolean; affinityFromStartup: boolean };
}

export interface ConsoleServiceOptions {
  server: ConsoleServer;
  host: string;
  dataDir: string;
  version: string;
  logs: LogBuffer;
  /** Why the server is not on the configured port, when it is not. */
  portNote?: string | null;
  /** SVC_PORT set the port (the window's port setting then does not apply). */
  portFromEnv?: boolean;
}



/** The server's URL as a client on this machine reaches it (a server on all interfaces answers on loopback). */
export function localBaseUrl(url: string): string {
  return url.replace("://0.0.0.0:", "://127.0.0.1:").replace("://[::]:", "://127.0.0.1:");
}




export class ConsoleService implements ConsoleApi {
  private windowKeyValue: { id: string; key: string } | null = null;
  private readonly modelDownloads: ModelDownloads;
  private readonly startedAt = Date.now();
  private readonly traffic = { requests: 0, errors: 0 };
  private readonly feed: WindowFeed;
  /** What the feed last read of the window account's files and batches (for the work still under way). */
  private seen: { files: FileOut[]; batches: MessageBatch[] } = { files: [], batches: [] };
  private folderWatch: FSWatcher | null = null;

  constructor(private readonly options: ConsoleServiceOptions) {
    this.feed = new WindowFeed(
      {
        info: () => this.serverInfo(),
        status: () => this.status(),
        downloads: () => this.downloads(),
        firstRun: () => this.firstRun(),
        models: () => this.listModels(),
        files: async () => (this.seen.files = this.windowFiles()),
        batches: async () => (this.seen.batches = this.windowBatches()),
        warmStart: () => this.warmStart(),
        logSeq: async () => options.logs.lastSeq(),
      },
      {
        backgroundWork: () => {
          const topics: WindowTopic[] = [];
          if (this.seen.files.some((f) => f.status === "uploaded")) topics.push("files");
          if (this.seen.batches.some((b) => b.processing_status !== "ended")) topics.push("batches");
          if (this.server.scheduler.stats().running > 0) topics.push("status");
          return topics;
        },
        onError: (topic, err) => options.logs.log("debug", `The window's ${topic} could not be read: ${(err as Error).message}`),
      },
    );
    this.modelDownloads = new ModelDownloads(options.server.models, options.logs, (...topics) => this.feed.touch(...topics));
    // Counted where Node hands requests to Fastify, so the count needs nothing from the HTTP layer. A request
    // that ended may have changed what the window shows (an upload, a batch, the counters).
    options.server.app.server?.on("request", (req: { url?: string }, res: { statusCode: number; once(event: "finish" | "close", fn: () => void): unknown }) => {
      if (!req.url?.startsWith("/v1/")) return;
      this.traffic.requests++;
      this.feed.touch("status");
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        if (res.statusCode >= 400) this.traffic.errors++;
        // A long system prompt's first request saves its prefix (warm start).
        this.feed.touch("status", "files", "batches", "warmStart");
      };
      res.once("finish", end);
      res.once("close", end);
    });
    options.server.engineHost.onChange(() => this.feed.touch("status", "models", "firstRun", "warmStart"));
    options.logs.onLine(() => this.feed.touch("logSeq"));
    // A model file put into (or taken out of) the folder by hand, or by the command line, shows at once.
    try {
      mkdirSync(options.server.models.directory, { recursive: true });
      this.folderWatch = watch(options.server.models.directory, { persistent: false }, () => this.feed.touch("models", "firstRun"));
      this.folderWatch.on("error", () => this.folderWatch?.close());
    } catch {
      // No watching here: the folder's changes show with the next load, use or download.
    }
  }

  async watch(version: number): Promise<WindowUpdate> {
    return this.feed.watch(typeof version === "number" && Number.isFinite(version) ? version : 0);
  }

  /** Ends the event stream (waiting watches return at once). */
  close(): void {
    this.feed.close();
    this.folderWatch?.close();
  }

  /** The account the window's key belongs to (the default account). */
  private windowAccountId(): string | null {
    return this.server.store.accounts.findByName(DEFAULT_ACCOUNT_NAME)?.id ?? null;
  }

  private windowFiles(): FileOut[] {
    const account = this.windowAccountId();
    if (!account) return [];
    return this.server.store.files.list(account, nowSeconds(), { limit: 100, order: "desc" }).rows.map((row) => toFileOut(row));
  }

  private windowBatches(): MessageBatch[] {
    const account = this.windowAccountId();
    if (!account) return [];
    const base = localBaseUrl(this.server.url);
    return this.server.batches.list({ accountId: account, limit: 100 }).rows.map((row) => encodeBatch(row, base));
  }

  private get server() {
    return this.options.server;
  }

  async serverInfo(): Promise<ServerInfo> {
    const baseUrl = localBaseUrl(this.server.url);
    return {
      version: this.options.version,
      baseUrl,
      openaiBaseUrl: `${baseUrl}/v1`,
      anthropicBaseUrl: baseUrl,
      host: this.options.host,
      port: this.server.port,
      portNote: this.options.portNote ?? null,
      dataDir: this.options.dataDir,
      lanExposure: this.server.store.settings.get(LAN_EXPOSURE_SETTING)?.value === "on",
      lanExposed: !isLoopbackHost(this.options.host),
      portSetting: parsePortSetting(this.server.store.settings.get(PORT_SETTING)?.value),
      portFromEnv: this.options.portFromEnv === true,
      startedAt: this.startedAt,
      upstreams: this.upstreamsView(),
    };
  }

  /** The saved upstreams (an unreadable setting reads as none: the server starts on its built-in engine then). */
  private savedUpstreams(): UpstreamTarget[] {
    try {
      return readUpstreamsSetting(this.server.store.settings.get(UPSTREAMS_SETTING)?.value) ?? [];
    } catch {
      return [];
    }
  }

  private upstreamsView(): UpstreamsSettingView {
    const saved = this.savedUpstreams();
    const { keys, hint } = savedKeys(saved);
    const running = this.server.upstreams;
    return {
      urls: saved.map((u) => u.url),
      keys,
      keyHint: hint,
      affinity: readUpstreamAffinitySetting(this.server.store.settings.get(UPSTREAM_AFFINITY_SETTING)?.value) ?? true,
      fromStartup: running.fromStartup,
      affinityFromStartup: running.affinityFromStartup,
      running: running.urls,
      runningAffinity: running.affinity,
    };
  }

  async status(): Promise<StatusView> {
    const status = this.server.engineHost.status();
    const files = this.server.engineHost.files();
    const hardware = await this.server.models.hardware();
    const queue = this.server.scheduler.stats();
    const info = status.model;
    return {
      model: {
        state: status.state,
        name: info?.name ?? null,
        file: files.current ? basename(files.current) : null,
        loadingFile: files.pending ? basename(files.pending) : null,
        contextSize: info?.contextSize ?? null,
        threads: info?.threads ?? null,
        gpuLayers: info?.gpuLayers ?? null,
        contextNote: info?.contextNote ?? null,
        contextRemedy: info?.contextRemedy ?? null,
        agentContextSize: info?.agentContextSize ?? null,
        trainContextSize: info?.trainContextSize || null,
        sequences: info?.sequences ?? null,
        totalLayers: info?.totalLayers ?? null,
        vision: info?.vision ? { devices: info.vision.devices, gpuLayers: info.vision.gpuLayers, note: info.vision.note ?? null } : null,
        settings: settingsView(files.current ? this.server.models.modelSettings(files.current) : {}),
        ...(info?.upstreams
          ? { upstreams: info.upstreams.map(({ url, healthy, slots, contextSize, model, error }) => ({ url, healthy, slots, contextSize, model, error })) }
          : {}),
        error: status.error,
      },
      gpu: hardware.gpu
        ? {
            backend: hardware.gpu.backend,
            devices: hardware.gpu.devices,
            vramTotalBytes: hardware.gpu.vramTotalBytes,
            vramFreeBytes: hardware.gpu.vramFreeBytes,
            build: hardware.gpu.build ?? null,
            localBuild: hardware.gpu.localBuild ?? null,
            // The window's wording: it has no command line to name.
            buildHint: engineBuildHintInWindow(hardware.gpu),
          }
        : null,
      speculation: this.server.engineHost.speculation(),
      gpuPreference: this.server.models.gpuPreference(),
      cpuCores: hardware.cpuCores,
      ramTotalBytes: hardware.ramTotalBytes,
      ramFreeBytes: hardware.ramFreeBytes,
      requests: { active: queue.running, queued: queue.waiting },
      usage: { ...this.traffic, ...this.server.engineHost.usage },
    };
  }

  async firstRun(): Promise<FirstRunView> {
    const { source, title, description, approxBytes } = this.server.models.recommended();
    const needsModel = !this.server.engineHost.files().current && (await this.server.models.needsModel());
    const vision = RECOMMENDED_VISION_MODEL;
    return {
      needsModel,
      recommended: { source, title, description, approxBytes },
      vision: { source: vision.source, title: vision.title, description: vision.description, approxBytes: vision.approxBytes },
    };
  }

  async windowKey(): Promise<string> {
    // A key of a disabled account is refused, and a new one would be too: say what fixes it.
    const account = this.server.store.accounts.findByName(DEFAULT_ACCOUNT_NAME);
    if (account && account.status !== "active")
      throw new AppError(
        "permission",
        `The '${DEFAULT_ACCOUNT_NAME}' account, which holds the window's key, is disabled, so the server refuses the key. Enable it on the Keys page (Accounts, '${DEFAULT_ACCOUNT_NAME}', Enable).`,
        { code: "window_account_disabled" },
      );
    const current = this.windowKeyValue;
    if (current) {
      // Still good unless someone revoked it outside the window (from the command line): then make a new one.
      const row = this.server.store.keys.findById(current.id);
      if (row && row.revoked_at === null) return current.key;
      this.options.logs.log("warn", "The window's key was revoked outside the window; it made a new one.");
    }
    // Keys are stored hashed, so an earlier window key cannot be shown again: retire it.
    for (const key of this.server.keys.list()) if (key.name === WINDOW_KEY_NAME && key.revoked_at === null) this.server.keys.revoke(key.id);
    const created = this.server.keys.create({ name: WINDOW_KEY_NAME });
    this.windowKeyValue = { id: created.id, key: created.key };
    return created.key;
  }

  async listKeys(): Promise<KeyView[]> {
    return this.server.keys.list().map((k) => keyView(k, this.windowKeyValue?.id ?? null));
  }

  async createKey(input: { name?: string; account?: string; reasoningTrace?: boolean } = {}): Promise<CreatedKeyView> {
    const name = input.name?.trim() || undefined;
    const account = input.account?.trim() || undefined;
    if (name && name.length > 100) throw new AppError("invalid_request", "A key name has at most 100 characters.", { code: "invalid_name" });
    if (account && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(account))
      throw new AppError("invalid_request", "An account name is 1 to 64 letters, digits, '.', '_' or '-'.", { code: "invalid_account" });
    const created = this.server.keys.create({ name, account, reasoningTrace: input.reasoningTrace === true });
    return { ...keyView(created), key: created.key };
  }

  async revokeKey(id: string): Promise<KeyView> {
    if (this.windowKeyValue && String(id) === this.windowKeyValue.id)
      throw new AppError("conflict", "This is the window's own key: its Chat page uses it. It is replaced each time the app starts, so it needs no revoking.", {
        code: "window_key",
      });
    return keyView(this.server.keys.revoke(String(id)));
  }

  async setKeyTrace(id: string, enabled: boolean): Promise<KeyView> {
    return keyView(this.server.keys.setReasoningTrace(String(id), enabled === true), this.windowKeyValue?.id ?? null);
  }

  async listAccounts(): Promise<AccountView[]> {
    return this.server.accounts.list().map(accountView);
  }

  async createAccount(input: { name: string }): Promise<CreatedAccountView> {
    const created = await this.server.accounts.create(String(input?.name ?? ""));
    this.options.logs.log("info", `Account '${created.account.name}' created with a temporary password and its first key.`);
    return { account: accountView(created.account), temporaryPassword: created.temporary_password, key: { ...keyView(created.key), key: created.key.key } };
  }

  async disableAccount(name: string): Promise<AccountView> {
    // The window chats with a key of the default account: disabling it here would break the window itself.
    if (String(name) === DEFAULT_ACCOUNT_NAME)
      throw new AppError("invalid_request", `The '${DEFAULT_ACCOUNT_NAME}' account holds the window's own key: disabling it would stop the Chat, Files, Batches and Audit pages, so the window keeps it enabled.`, {
        code: "window_account",
      });
    const account = this.server.accounts.disable(String(name));
    this.options.logs.log("warn", `Account '${account.name}' disabled: its keys are refused from now on.`);
    return accountView(account);
  }

  async enableAccount(name: string): Promise<AccountView> {
    return accountView(this.server.accounts.enable(String(name)));
  }

  async resetAccountPassword(name: string): Promise<PasswordResetView> {
    const reset = await this.server.accounts.resetPassword(String(name));
    this.options.logs.log("info", `Account '${reset.account.name}' has a new temporary password.`);
    return { account: accountView(reset.account), temporaryPassword: reset.temporary_password };
  }

  async listModels(): Promise<ModelsView> {
    const list: ModelList = await this.server.models.list();
    const recommended = this.server.models.recommended();
    const loaded = this.server.engineHost.files().current;
    const hardware = await this.server.models.hardware();
    const machine = { ramTotalBytes: hardware.ramTotalBytes, vramTotalBytes: hardware.gpu?.vramTotalBytes ?? 0, gpu: (hardware.gpu?.backend ?? "cpu") !== "cpu" };
    return modelsView(list, { loaded, recommended, machine, settingsOf: (path) => this.server.models.modelSettings(path) });
  }

  async useModel(file: string, options: { kind?: ModelKind } = {}): Promise<ModelsView> {
    try {
      if (kindOf(options) === "speech") {
        const used = await this.server.models.use(String(file ?? ""), { kind: "speech" });
        this.options.logs.log("info", `Speech model: ${used.file}; uploads of audio and video get transcripts made with it.`);
      } else await this.server.models.use(String(file));
    } catch (err) {
      throw inWindowWords(err, kindOf(options));
    } finally {
      this.feed.touch("models", "status", "firstRun");
    }
    return this.listModels();
  }

  async removeModel(file: string, options: { kind?: ModelKind; force?: boolean } = {}): Promise<ModelsView> {
    try {
      if (kindOf(options) === "speech") {
        const removed = await this.server.models.remove(String(file ?? ""), { kind: "speech", force: options?.force === true });
        if (removed.wasActive) this.options.logs.log("warn", `Removed ${removed.file}, the speech model in use: uploads get no transcript until another is chosen.`);
      } else await this.server.models.remove(String(file));
    } catch (err) {
      throw inWindowWords(err, kindOf(options));
    } finally {
      this.feed.touch("models", "firstRun");
    }
    return this.listModels();
  }

  async setModelSettings(file: string | null, settings: ModelSettings): Promise<StatusView> {
    const target = file === null || file === undefined ? this.server.engineHost.files().current : String(file);
    if (!target) throw new AppError("invalid_request", "No model is loaded: pick one on the Model page first.", { code: "model_not_loaded" });
    const given = (settings ?? {}) as Partial<ModelSettings>;
    try {
      const saved = await this.server.models.setModelSettings(target, {
        contextSize: given.contextSize ?? undefined,
        sequences: given.sequences ?? undefined,
        gpuLayers: given.gpuLayers ?? undefined,
        threads: given.threads ?? undefined,
        draftModel: given.draftModel ?? undefined,
      });
      this.options.logs.log("info", `Settings of ${basename(target)}: ${describeSettings(saved)}.`);
    } catch (err) {
      if (err instanceof AppError && err.code === "model_load_failed")
        throw new AppError(err.kind, `The model did not load with these settings, so it is back on its previous ones. ${err.message}`, { code: err.code, cause: err });
      throw inWindowWords(err);
    } finally {
      this.feed.touch("models", "status");
    }
    return this.status();
  }

  /** Starts a download in the background; its progress is read with downloads(). */
  async startDownload(input: { source: string; sha256?: string; kind?: ModelKind }): Promise<DownloadView> {
    return this.modelDownloads.start(input);
  }

  async downloads(): Promise<DownloadView[]> {
    return this.modelDownloads.list();
  }

  async cancelDownload(id: string): Promise<DownloadView> {
    return this.modelDownloads.cancel(id);
  }

  async dismissDownload(id: string): Promise<DownloadView[]> {
    return this.modelDownloads.dismiss(id);
  }

  async setGpuPreference(gpu: GpuPreference): Promise<StatusView> {
    try {
      await this.server.models.setGpuPreference(gpu);
    } finally {
      this.feed.touch("status", "models");
    }
    return this.status();
  }

  async warmStart(): Promise<WarmStartView> {
    const state = this.server.models.warmStart();
    const model = this.server.engineHost.status();
    const active = model.state === "ready" ? (model.model?.warmStart ?? null) : null;
    return {
      enabled: state.enabled,
      forced: state.forced,
      active: active !== null,
      minTokens: active?.minTokens ?? WARM_START_MIN_TOKENS,
      maxBytes: state.maxBytes,
      prefixes: this.server.models.warmPrefixes().map((p) => ({ id: p.key.slice(0, 12), tokens: p.tokens, bytes: p.bytes, lastUsed: Math.round(p.lastUsed) })),
    };
  }

  async setWarmStart(enabled: boolean): Promise<WarmStartView> {
    if (typeof enabled !== "boolean") throw new AppError("invalid_request", "Warm start is on (true) or off (false).", { code: "invalid_warm_start" });
    try {
      await this.server.models.setWarmStart(enabled);
      this.options.logs.log("info", enabled ? "Warm start turned on: long system prompts are saved and restored after a restart." : "Warm start turned off: nothing more is saved; saved prompts stay until cleared.");
    } catch (err) {
      throw inWindowWords(err);
    } finally {
      this.feed.touch("warmStart", "status", "models");
    }
    return this.warmStart();
  }

  async clearWarmPrefixes(): Promise<WarmStartView> {
    const count = this.server.models.clearWarmPrefixes();
    this.options.logs.log("info", `Warm start: deleted ${count} saved prompt prefix${count === 1 ? "" : "es"}.`);
    this.feed.touch("warmStart");
    return this.warmStart();
  }

  async logs(afterSeq?: number): Promise<LogLine[]> {
    return this.options.logs.since(typeof afterSeq === "number" ? afterSeq : 0);
  }

  async setPort(port: number | null): Promise<ServerInfo> {
    if (port === null) this.server.store.settings.delete(PORT_SETTING);
    else {
      if (!Number.isInteger(port) || port < 1024 || port > 65535)
        throw new AppError("invalid_request", "A port is a whole number from 1024 to 65535.", { code: "invalid_port" });
      this.server.store.settings.set(PORT_SETTING, String(port));
    }
    this.options.logs.log("info", `Port for the next start: ${port ?? "8787 (the default)"}; it applies when the app restarts.`);
    this.feed.touch("info");
    return this.serverInfo();
  }

  async setUpstreams(input: { urls: string[]; key?: string | null; affinity: boolean }): Promise<ServerInfo> {
    const { urls, key, affinity } = (input ?? {}) as { urls?: unknown; key?: unknown; affinity?: unknown };
    let targets: UpstreamTarget[];
    try {
      if (typeof affinity !== "boolean") throw new UpstreamSettingError("Upstreams are a list of addresses and an affinity (on or off).", "shape");
      targets = upstreamsToSave(urls, key, this.savedUpstreams());
    } catch (err) {
      if (err instanceof UpstreamSettingError) throw new AppError("invalid_request", err.message, { code: "invalid_upstream" });
      throw err;
    }
    const list = targets.map((t) => t.url);
    if (targets.length === 0) this.server.store.settings.delete(UPSTREAMS_SETTING);
    else this.server.store.settings.set(UPSTREAMS_SETTING, writeUpstreamsSetting(targets));
    this.server.store.settings.set(UPSTREAM_AFFINITY_SETTING, affinity ? "on" : "off");
    // The addresses, never the key.
    this.options.logs.log(
      "info",
      targets.length === 0
        ? "Upstream engines for the next start: none (the built-in engine); it applies when the app restarts."
        : `Upstream engines for the next start: ${list.join(", ")} (${affinity ? "prefix affinity" : "round-robin"}); it applies when the app restarts.`,
    );
    this.feed.touch("info");
    return this.serverInfo();
  }

  async setLanExposure(enabled: boolean): Promise<ServerInfo> {
    this.server.store.settings.set(LAN_EXPOSURE_SETTING, enabled === true ? "on" : "off");
    this.options.logs.log("warn", enabled ? "LAN exposure turned on: it applies when the app restarts." : "LAN exposure turned off: it applies when the app restarts.");
    this.feed.touch("info");
    return this.serverInfo();
  }
}


/** The stored port setting, or null when it is unset or not a port. */
export function parsePortSetting(value: string | undefined): number | null {
  const port = Number(value);
  return value !== undefined && Number.isInteger(port) && port >= 1024 && port <= 65535 ? port : null;
}



/**
 * Answers one call from the window: only the contract's methods, with errors as data. The main process's IPC
 * handler and the UI test harness both go through here.
 */
export async function dispatchConsoleCall(service: ConsoleApi, method: unknown, args: unknown): Promise<ConsoleResult> {
  if (typeof method !== "string" || !Object.hasOwn(CONSOLE_METHODS, method))
    return { ok: false, error: { message: `Unknown console method '${String(method)}'.`, code: "unknown_method" } };
  const list = Array.isArray(args) ? args : [];
  try {
    const fn = service[method as keyof ConsoleApi] as (...a: unknown[]) => Promise<unknown>;
    const value = await fn.apply(service, list);
    return { ok: true, value };
  } catch (err) {
    const code = err instanceof AppError ? (err.code ?? err.kind) : null;
    return { ok: false, error: { message: (err as Error).message, code } };
  }
}
