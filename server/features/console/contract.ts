// The desktop console's contract: what the window may ask the main process for (keys, accounts, models,
// settings: the things no API key may do). The preload exposes one function, `window.svc.call`; the main
// process and the UI test harness both answer it with dispatchConsoleCall over the same ConsoleService.
// This file imports nothing, so the renderer can import its types without pulling in the server.

export type GpuPreference = "auto" | "cuda" | "vulkan" | "metal" | "cpu";

export interface ServerInfo {
  version: string;
  /** Where the window and local clients reach the server, e.g. http://127.0.0.1:8787. */
  baseUrl: string;
  /** Base URL for the OpenAI clients (Chat Completions, Responses). */
  openaiBaseUrl: string;
  /** Base URL for the Anthropic clients (Messages). */
  anthropicBaseUrl: string;
  host: string;
  port: number;
  /** Set when the configured port was taken and the server took another one. */
  portNote: string | null;
  dataDir: string;
  /** The LAN-exposure setting (off by default); it applies when the server starts. */
  lanExposure: boolean;
  /** Whether the running server listens beyond this machine. */
  lanExposed: boolean;
  /** The port the app asks for at its next start (the window's setting); null: the default, 8787. */
  portSetting: number | null;
  /** Set when SVC_PORT decides the port, so the window's setting does not apply. */
  portFromEnv: boolean;
  /** When the server started (epoch ms). */
  startedAt: number;
}

export interface GpuView {
  backend: "cuda" | "vulkan" | "metal" | "cpu";
  devices: string[];
  vramTotalBytes: number;
  vramFreeBytes: number;
  /** Which llama.cpp binaries run: node-llama-cpp's prebuilt ones, or a build made on this machine; null: not known. */
  build: "prebuilt" | "local" | null;
  /**
   * Where the CPU runs node-llama-cpp's prebuilt binaries on Linux: what `svc engine build` would give and
   * what it needs (the server logs the same line); null elsewhere.
   */
  buildHint: string | null;
}

export interface StatusView {
  model: {
    state: string;
    name: string | null;
    file: string | null;
    loadingFile: string | null;
    contextSize: number | null;
    threads: number | null;
    gpuLayers: number | null;
    /** Why coding agents' requests will not fit the context, and what would help; null when they fit. */
    contextNote: string | null;
    error: string | null;
  };
  gpu: GpuView | null;
  gpuPreference: GpuPreference;
  cpuCores: number;
  ramTotalBytes: number;
  ramFreeBytes: number;
  requests: { active: number; queued: number };
  /** Since the server started: HTTP requests to the API, those answered with an error, and tokens served. */
  usage: {
    requests: number;
    errors: number;
    generations: number;
    promptTokens: number;
    cachedTokens: number;
    completionTokens: number;
    reasoningTokens: number;
  };
}

export interface KeyView {
  id: string;
  account: string;
  name: string | null;
  hint: string;
  reasoningTrace: boolean;
  createdAt: number;
  lastUsedAt: number | null;
  revokedAt: number | null;
  /** The window's own key (its Chat page uses it): the window does not offer to revoke it. */
  windowKey: boolean;
}

export interface CreatedKeyView extends KeyView {
  /** The key itself: shown once, never again. */
  key: string;
}

export interface AccountView {
  id: string;
  name: string;
  status: string;
  createdAt: number;
  activeKeys: number;
  /** Whether the account has a console password (see docs/api.md, "Accounts"). */
  canLogIn: boolean;
  /** Its password is a temporary one: the next console login must change it. */
  mustChangePassword: boolean;
  lastLoginAt: number | null;
  disabledAt: number | null;
}

export interface CreatedAccountView {
  account: AccountView;
  /** Shown once, never again. */
  temporaryPassword: string;
  /** The account's first key, shown once. */
  key: CreatedKeyView;
}

export interface PasswordResetView {
  account: AccountView;
  /** Shown once, never again. */
  temporaryPassword: string;
}

export interface ModelFileView {
  file: string;
  sizeBytes: number;
  /** The model `svc serve` and the app load at start (the active-model setting). */
  active: boolean;
  /** The model the running server has loaded now. */
  loaded: boolean;
  name: string | null;
  architecture: string | null;
  quantization: string | null;
  contextLength: number | null;
  source: string | null;
  error: string | null;
}

export type ModelFit = "fits_gpu" | "fits" | "tight" | "too_big";

export interface SuggestedModelView {
  source: string;
  file: string;
  title: string;
  description: string;
  approxBytes: number;
  /** Memory it needs to run. */
  needsBytes: number;
  fit: ModelFit;
  recommended: boolean;
  /** Already in the models folder. */
  downloaded: boolean;
}

/** The language models (GGUF, what answers) or the speech models (whisper.cpp, transcripts of audio and video). */
export type ModelKind = "llm" | "speech";

export interface SpeechModelView {
  file: string;
  sizeBytes: number;
  /** The speech model uploads are transcribed with (the speech_model setting). */
  active: boolean;
  /** whisper.cpp's size name ("base", "small.en"), when the file says. */
  sizeLabel: string | null;
  /** How its weights are stored (F16, Q5_1, ...). */
  weights: string | null;
  source: string | null;
  error: string | null;
}

export interface SpeechModelsView {
  directory: string;
  active: string | null;
  models: SpeechModelView[];
  recommended: { source: string; file: string; title: string; approxBytes: number; downloaded: boolean };
}

export interface ModelsView {
  directory: string;
  active: string | null;
  /** Path of the model loaded now (it may live outside the models folder), or null. */
  loaded: string | null;
  models: ModelFileView[];
  /** Unfinished downloads: what a resumed download keeps. */
  partial: Array<{ file: string; keptBytes: number; totalBytes: number | null; downloadingNow: boolean; source: string | null; kind: ModelKind }>;
  recommended: { source: string; title: string };
  /** A few models sized to this machine, smallest first. */
  suggested: SuggestedModelView[];
  /** Speech models, for transcripts of audio and video uploads (in their own folder). */
  speech: SpeechModelsView;
}

export type DownloadPhase = "resolving" | "downloading" | "verifying" | "done" | "failed" | "cancelled";

export interface DownloadView {
  id: string;
  source: string;
  kind: ModelKind;
  phase: DownloadPhase;
  file: string | null;
  downloadedBytes: number;
  totalBytes: number;
  bytesPerSecond: number;
  etaSeconds: number | null;
  error: string | null;
  startedAt: number;
}

export interface FirstRunView {
  /** No model is loaded, none is active and the models folder is empty: offer the recommended one. */
  needsModel: boolean;
  recommended: { source: string; title: string; description: string; approxBytes: number };
}

export interface LogLine {
  seq: number;
  at: number;
  level: "debug" | "info" | "warn" | "error";
  message: string;
}

export interface ConsoleApi {
  serverInfo(): Promise<ServerInfo>;
  status(): Promise<StatusView>;
  firstRun(): Promise<FirstRunView>;
  /**
   * A key for the window's own chat, made for this app session (the previous session's is revoked). A key
   * revoked meanwhile (say with `svc keys revoke`) is replaced by a new one, so the chat never breaks.
   */
  windowKey(): Promise<string>;
  listKeys(): Promise<KeyView[]>;
  createKey(input: { name?: string; account?: string; reasoningTrace?: boolean }): Promise<CreatedKeyView>;
  revokeKey(id: string): Promise<KeyView>;
  setKeyTrace(id: string, enabled: boolean): Promise<KeyView>;
  listAccounts(): Promise<AccountView[]>;
  /** A new account with a temporary password and its first key (both shown once). */
  createAccount(input: { name: string }): Promise<CreatedAccountView>;
  /** Its keys stop working at once and its console sessions end. */
  disableAccount(name: string): Promise<AccountView>;
  enableAccount(name: string): Promise<AccountView>;
  /** A new temporary password (shown once); the account's console sessions end. */
  resetAccountPassword(name: string): Promise<PasswordResetView>;
  listModels(): Promise<ModelsView>;
  /** kind "speech": the speech model transcripts use from the next upload on. */
  useModel(file: string, options?: { kind?: ModelKind }): Promise<ModelsView>;
  /** kind "speech" with force: also the speech model in use (uploads then get no transcript). */
  removeModel(file: string, options?: { kind?: ModelKind; force?: boolean }): Promise<ModelsView>;
  /** kind "speech": a whisper.cpp model; an empty source is the recommended one (as `svc models pull --speech`). */
  startDownload(input: { source: string; sha256?: string; kind?: ModelKind }): Promise<DownloadView>;
  downloads(): Promise<DownloadView[]>;
  cancelDownload(id: string): Promise<DownloadView>;
  /** Takes an ended download (done, failed or cancelled) off the list. */
  dismissDownload(id: string): Promise<DownloadView[]>;
  setGpuPreference(gpu: GpuPreference): Promise<StatusView>;
  logs(afterSeq?: number): Promise<LogLine[]>;
  setLanExposure(enabled: boolean): Promise<ServerInfo>;
  /** The port for the next start (1024-65535), or null for the default; applies when the app restarts. */
  setPort(port: number | null): Promise<ServerInfo>;
}

export type ConsoleMethod = keyof ConsoleApi;

/** The one list of callable methods; main refuses any other name. */
export const CONSOLE_METHODS = {
  serverInfo: true,
  status: true,
  firstRun: true,
  windowKey: true,
  listKeys: true,
  createKey: true,
  revokeKey: true,
  setKeyTrace: true,
  listAccounts: true,
  createAccount: true,
  disableAccount: true,
  enableAccount: true,
  resetAccountPassword: true,
  listModels: true,
  useModel: true,
  removeModel: true,
  startDownload: true,
  downloads: true,
  cancelDownload: true,
  dismissDownload: true,
  setGpuPreference: true,
  logs: true,
  setLanExposure: true,
  setPort: true,
} as const satisfies Record<ConsoleMethod, true>;

/** What crosses the bridge: errors travel as data, so the window sees the message, not Electron's wrapper. */
export type ConsoleResult<T = unknown> = { ok: true; value: T } | { ok: false; error: { message: string; code: string | null } };

/** What the preload puts on window.svc. */
export interface ConsoleBridge {
  call(method: string, args: unknown[]): Promise<ConsoleResult>;
}

/** The IPC channel the preload and the main process share. */
export const CONSOLE_CHANNEL = "svc:console";
