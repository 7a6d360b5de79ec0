// What the desktop window's console does, over the running server's own services. The Electron main process
// answers the window's IPC calls with it; the UI tests answer the same calls with it, so both drive one code
// path. Nothing here is reachable over HTTP.
import { basename } from "node:path";
import { AppError } from "../../core/errors.js";
import { isLoopbackHost } from "../../core/loopback.js";
import type { RunningServer } from "../../index.js";
import type { KeyInfo } from "../keys/keys-service.js";
import type { ModelList, PullEvent } from "../models/models-service.js";
import type {
  AccountView,
  ConsoleApi,
  ConsoleResult,
  CreatedKeyView,
  DownloadView,
  FirstRunView,
  GpuPreference,
  KeyView,
  LogLine,
  ModelsView,
  ServerInfo,
  StatusView,
} from "./contract.js";
import { CONSOLE_METHODS } from "./contract.js";
import type { LogBuffer } from "./log-buffer.js";

export const WINDOW_KEY_NAME = "Desktop window";
export const LAN_EXPOSURE_SETTING = "lan_exposure";

export interface ConsoleServiceOptions {
  server: Pick<RunningServer, "url" | "port" | "store" | "keys" | "models" | "engineHost" | "app">;
  host: string;
  dataDir: string;
  version: string;
  logs: LogBuffer;
  /** Why the server is not on the configured port, when it is not. */
  portNote?: string | null;
}

function keyView(info: KeyInfo): KeyView {
  return {
    id: info.id,
    account: info.account,
    name: info.name,
    hint: info.hint,
    reasoningTrace: info.reasoning_trace,
    createdAt: info.created_at,
    lastUsedAt: info.last_used_at,
    revokedAt: info.revoked_at,
  };
}

/** The server's URL as a client on this machine reaches it (a server on all interfaces answers on loopback). */
export function localBaseUrl(url: string): string {
  return url.replace("://0.0.0.0:", "://127.0.0.1:").replace("://[::]:", "://127.0.0.1:");
}

interface DownloadJob {
  view: DownloadView;
  abort: AbortController;
}

export class ConsoleService implements ConsoleApi {
  private windowKeyValue: string | null = null;
  private readonly jobs = new Map<string, DownloadJob>();
  private nextJob = 1;

  constructor(private readonly options: ConsoleServiceOptions) {}

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
    };
  }

  async status(): Promise<StatusView> {
    const status = this.server.engineHost.status();
    const files = this.server.engineHost.files();
    const hardware = await this.server.models.hardware();
    return {
      model: {
        state: status.state,
        name: status.model?.name ?? null,
        file: files.current ? basename(files.current) : null,
        loadingFile: files.pending ? basename(files.pending) : null,
        contextSize: status.model?.contextSize ?? null,
        threads: status.model?.threads ?? null,
        gpuLayers: status.model?.gpuLayers ?? null,
        contextNote: status.model?.contextNote ?? null,
        error: status.error,
      },
      gpu: hardware.gpu
        ? { backend: hardware.gpu.backend, devices: hardware.gpu.devices, vramTotalBytes: hardware.gpu.vramTotalBytes, vramFreeBytes: hardware.gpu.vramFreeBytes }
        : null,
      gpuPreference: this.server.models.gpuPreference(),
      cpuCores: hardware.cpuCores,
      ramTotalBytes: hardware.ramTotalBytes,
      ramFreeBytes: hardware.ramFreeBytes,
      requests: { active: status.active, queued: status.queued },
    };
  }

  async firstRun(): Promise<FirstRunView> {
    const { source, title, description, approxBytes } = this.server.models.recommended();
    const needsModel = !this.server.engineHost.files().current && (await this.server.models.needsModel());
    return { needsModel, recommended: { source, title, description, approxBytes } };
  }

  async windowKey(): Promise<string> {
    if (this.windowKeyValue) return this.windowKeyValue;
    // Keys are stored hashed, so the last session's window key cannot be shown again: retire it.
    for (const key of this.server.keys.list()) if (key.name === WINDOW_KEY_NAME && key.revoked_at === null) this.server.keys.revoke(key.id);
    this.windowKeyValue = this.server.keys.create({ name: WINDOW_KEY_NAME }).key;
    return this.windowKeyValue;
  }

  async listKeys(): Promise<KeyView[]> {
    return this.server.keys.list().map(keyView);
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
    return keyView(this.server.keys.revoke(String(id)));
  }

  async setKeyTrace(id: string, enabled: boolean): Promise<KeyView> {
    return keyView(this.server.keys.setReasoningTrace(String(id), enabled === true));
  }

  async listAccounts(): Promise<AccountView[]> {
    const keys = this.server.keys.list();
    return this.server.store.accounts.list().map((row) => ({
      id: row.id,
      name: row.name,
      status: row.status,
      createdAt: row.created_at,
      activeKeys: keys.filter((k) => k.account_id === row.id && k.revoked_at === null).length,
    }));
  }

  async listModels(): Promise<ModelsView> {
    const list: ModelList = await this.server.models.list();
    const recommended = this.server.models.recommended();
    return {
      directory: list.directory,
      active: list.active,
      models: list.models.map((m) => ({
        file: m.file,
        sizeBytes: m.sizeBytes,
        active: m.active,
        name: m.name,
        architecture: m.architecture,
        quantization: m.quantization,
        contextLength: m.contextLength,
        source: m.source,
        error: m.error,
      })),
      partial: list.partial.map((p) => ({ file: p.file, bytesOnDisk: p.bytesOnDisk })),
      recommended: { source: recommended.source, title: recommended.title },
    };
  }

  async useModel(file: string): Promise<ModelsView> {
    await this.server.models.use(String(file));
    return this.listModels();
  }

  async removeModel(file: string): Promise<ModelsView> {
    await this.server.models.remove(String(file));
    return this.listModels();
  }

  /** Starts a download in the background; its progress is read with downloads(). */
  async startDownload(input: { source: string; sha256?: string }): Promise<DownloadView> {
    const source = String(input?.source ?? "").trim();
    if (source === "") throw new AppError("invalid_request", "Give a model source: an hf: URI or an https:// URL of a .gguf file.", { code: "invalid_model_source" });
    if ([...this.jobs.values()].some((j) => j.view.source === source && !isFinished(j.view)))
      throw new AppError("conflict", `${source} is already downloading.`, { code: "download_in_progress" });
    const job: DownloadJob = {
      abort: new AbortController(),
      view: {
        id: `dl_${this.nextJob++}`,
        source,
        phase: "resolving",
        file: null,
        downloadedBytes: 0,
        totalBytes: 0,
        bytesPerSecond: 0,
        etaSeconds: null,
        error: null,
        startedAt: Date.now(),
      },
    };
    this.jobs.set(job.view.id, job);
    const onEvent = (event: PullEvent) => {
      job.view.phase = event.phase;
      if ("file" in event) job.view.file = event.file;
      if (event.phase === "downloading") {
        job.view.downloadedBytes = event.progress.downloadedBytes;
        job.view.totalBytes = event.progress.totalBytes;
        job.view.bytesPerSecond = event.progress.bytesPerSecond;
        job.view.etaSeconds = event.progress.etaSeconds;
      }
    };
    this.server.models.pull(source, { sha256: input.sha256, signal: job.abort.signal, onEvent }).then(
      (result) => {
        job.view.phase = "done";
        job.view.file = result.file;
        job.view.downloadedBytes = job.view.totalBytes = result.sizeBytes;
        job.view.etaSeconds = 0;
        this.options.logs.log("info", `Downloaded ${result.file}${result.madeActive ? " (now the active model)" : ""}.`);
      },
      (err: unknown) => {
        if (job.abort.signal.aborted) job.view.phase = "cancelled";
        else {
          job.view.phase = "failed";
          job.view.error = (err as Error).message;
          this.options.logs.log("error", `Download of ${source} failed: ${(err as Error).message}`);
        }
      },
    );
    return { ...job.view };
  }

  async downloads(): Promise<DownloadView[]> {
    return [...this.jobs.values()].map((j) => ({ ...j.view }));
  }

  async cancelDownload(id: string): Promise<DownloadView> {
    const job = this.jobs.get(String(id));
    if (!job) throw new AppError("not_found", `No download with id '${id}'.`, { code: "download_not_found" });
    if (!isFinished(job.view)) {
      job.abort.abort();
      job.view.phase = "cancelled";
    }
    return { ...job.view };
  }

  async setGpuPreference(gpu: GpuPreference): Promise<StatusView> {
    await this.server.models.setGpuPreference(gpu);
    return this.status();
  }

  async logs(afterSeq?: number): Promise<LogLine[]> {
    return this.options.logs.since(typeof afterSeq === "number" ? afterSeq : 0);
  }

  async setLanExposure(enabled: boolean): Promise<ServerInfo> {
    this.server.store.settings.set(LAN_EXPOSURE_SETTING, enabled === true ? "on" : "off");
    this.options.logs.log("warn", enabled ? "LAN exposure turned on: it applies when the app restarts." : "LAN exposure turned off: it applies when the app restarts.");
    return this.serverInfo();
  }
}

function isFinished(view: DownloadView): boolean {
  return view.phase === "done" || view.phase === "failed" || view.phase === "cancelled";
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
