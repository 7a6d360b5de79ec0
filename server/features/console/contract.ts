// Why one file (over 400 lines): it is the whole contract between the desktop window and the main process,
// the ConsoleApi interface, the view types its methods return and the method table, and the renderer, the
// preload and the main process each import it as one. It holds types and one table, no logic.
// The desktop console's contract: what the window may ask the main process for (keys, accounts, models,
// settings: the things no API key may do). The preload exposes one function, `window.svc.call`; the main
// process and the UI test harness both answer it with dispatchConsoleCall over the same ConsoleService.
// This file imports nothing but the wire types (types too), so the renderer can import its types without
// pulling in the server.
import type { ContextRemedy, FileOut, MessageBatch } from "./wire.js";

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
  /** Upstream engines: what the app generates on from its next start, and what it generates on now. */
  upstreams: UpstreamsSettingView;
}

/**
 * The upstream inference servers (llama-server or vLLM, docs/scale-out.md) the app generates on instead of its
 * built-in engine: the window's setting (Server page), applied at the next start, and what runs now.
 */
export interface UpstreamsSettingView {
  /** The saved addresses, in order; empty: the built-in engine. */
  urls: string[];
  /** The saved key: none, one for every upstream, or one of their own for each (set outside the window). Never the key itself. */
  keys: "none" | "one" | "each";
  /** With one key: its last four characters, when it is long enough (16 or more) to spare them; else null. */
  keyHint: string | null;
  /** Prefix affinity (a conversation goes back to the replica that holds its start) or round-robin (false). */
  affinity: boolean;
  /** The start-up options (the environment) chose the upstreams: this setting waits until the app starts without them. */
  fromStartup: boolean;
  /** The same for the affinity. */
  affinityFromStartup: boolean;
  /** What the running server generates on: the upstreams' addresses, or null for the built-in engine. */
  running: string[] | null;
  /** The affinity the running server uses over them. */
  runningAffinity: boolean;
}

/** Speculative decoding's counts since the model loaded (issue 44; /health's `speculation`). */
export interface SpeculationView {
  /** How drafts are made: "prompt-lookup" (n-grams of the sequence's own context), "draft-model" or "off". */
  mode: string;
  /** The draft model's name in draft-model mode; null otherwise (absent from older servers). */
  draftModel?: string | null;
  draftedTokens: number;
  acceptedTokens: number;
  /** accepted ÷ drafted; null before any draft. */
  acceptanceRate: number | null;
}

export interface GpuView {
  backend: "cuda" | "vulkan" | "metal" | "cpu";
  devices: string[];
  vramTotalBytes: number;
  vramFreeBytes: number;
  /** Which llama.cpp binaries run: node-llama-cpp's prebuilt ones, or a build made on this machine; null: not known. */
  build: "prebuilt" | "local" | null;
  /** With "local": llama.cpp and our addon built here ("full"), or our addon alone on prebuilt libraries ("addon"). */
  localBuild: "full" | "addon" | null;
  /**
   * Where the CPU runs node-llama-cpp's prebuilt binaries on Linux: what a build made on this machine would
   * give, in the window's words (the log's line without the command it names); null elsewhere.
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
    /** Why coding agents' requests will not fit the context, and what would help (the log's words); null when they fit. */
    contextNote: string | null;
    /** The same as facts: what would take a coding agent's first request; null when it fits. */
    contextRemedy: ContextRemedy | null;
    /** The context a coding agent's first request needs with this model's tokenizer. */
    agentContextSize: number | null;
    /** What the model was trained on (the most any setting can give); null when not known. */
    trainContextSize: number | null;
    /** Answers the model can write at once (each with contextSize tokens). */
    sequences: number | null;
    /** Layers of the model (gpuLayers of them on the GPU). */
    totalLayers: number | null;
    /**
     * The loaded model sees images (its projector loaded): where its vision process runs (llama.cpp's device
     * names, "CPU" on the CPU), the model's layers it holds on the GPU, and why not on the GPU where it could
     * not be (docs/api.md, "Health"). Null for a text-only model; absent from a server that does not say.
     */
    vision?: { devices: string[]; gpuLayers: number; note: string | null } | null;
    /** The loaded model's own settings (Model page), applied when it loads. */
    settings: ModelSettings;
    /**
     * With upstream engines (docs/scale-out.md): each inference server generating, whether it serves now, its
     * slots and context per slot, the model file it names, and why it is drained.
     */
    upstreams?: Array<{ url: string; healthy: boolean; slots: number; contextSize: number; model: string; error: string | null }>;
    error: string | null;
  };
  gpu: GpuView | null;
  /**
   * Speculative decoding on the loaded model: null while none is loaded or it is served upstream; absent from a
   * server that does not report it.
   */
  speculation?: SpeculationView | null;
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

/**
 * A model's own load settings, kept per model file and applied when it loads (the window's Model page sets
 * them; changing the loaded model's reloads it). null: automatic (the server sizes it to the memory, or the
 * server's start-up setting where one was given).
 */
export interface ModelSettings {
  /** Tokens of context per answer. */
  contextSize: number | null;
  /** Answers the model writes at once (each with its own context of contextSize tokens). */
  sequences: number | null;
  /** Layers put on the GPU (0: none). */
  gpuLayers: number | null;
  /** CPU threads. */
  threads: number | null;
  /**
   * The model file speculation's draft model is while this model serves (a smaller one of the same family);
   * null or absent: none of its own (prompt lookup, or the server's --draft-model).
   */
  draftModel?: string | null;
}

export interface ModelFileView {
  file: string;
  sizeBytes: number;
  /** Its own load settings. */
  settings: ModelSettings;
  /** The model the app loads at start (the active-model setting). */
  active: boolean;
  /** The model the running server has loaded now. */
  loaded: boolean;
  name: string | null;
  architecture: string | null;
  quantization: string | null;
  contextLength: number | null;
  source: string | null;
  error: string | null;
  /** A vision projector lies beside it: the model sees images (the Models page's vision badge). */
  vision: boolean;
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
  /** It sees images (its vision projector comes with it). */
  vision: boolean;
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

/** A prompt prefix warm start saved (docs/configuration.md, "Warm start"). */
export interface WarmPrefixView {
  /** The start of its key (a hash of the model, the engine and the prefix's tokens): tells prefixes apart. */
  id: string;
  tokens: number;
  bytes: number;
  /** When it was last saved or restored (epoch ms). */
  lastUsed: number;
}

/**
 * Warm start: the long prompt prefixes (system prompt and tools before the first user message) whose reading
 * the model saves on disk and restores after a restart. Off unless turned on.
 */
export interface WarmStartView {
  /** On for the loads from now on: the window's setting, or the server's start-up options where they decide. */
  enabled: boolean;
  /** The server's start-up options set it on or off: the window's setting does not apply while they do. */
  forced: boolean;
  /** The model loaded now saves and restores prefixes (false while none is loaded, or it loads). */
  active: boolean;
  /** The shortest prefix saved, in tokens. */
  minTokens: number;
  /** Bytes the saved prefixes may take together (the least recently used go first). */
  maxBytes: number;
  /** The saved prefixes, the most recently used first; turning warm start off keeps them until cleared. */
  prefixes: WarmPrefixView[];
}

export interface FirstRunView {
  /** No model is loaded, none is active and the models folder is empty: offer the recommended one. */
  needsModel: boolean;
  recommended: { source: string; title: string; description: string; approxBytes: number };
  /** A small model that also sees images, offered beside the recommended one. */
  vision: { source: string; title: string; description: string; approxBytes: number };
}

/** What the window shows that changes by itself, pushed by watch(). */
export interface WindowState {
  info: ServerInfo;
  status: StatusView;
  downloads: DownloadView[];
  firstRun: FirstRunView;
  models: ModelsView;
  /** The window account's files, newest first (as GET /v1/files lists them). */
  files: FileOut[];
  /** The window account's message batches, newest first (as GET /v1/messages/batches lists them). */
  batches: MessageBatch[];
  /** Warm start's setting and saved prefixes. */
  warmStart: WarmStartView;
  /** The newest log line's seq (logs() reads the lines). */
  logSeq: number;
}

export type WindowTopic = keyof WindowState;

/** The topics that changed after the version the window had, and the version it has now. */
export interface WindowUpdate {
  version: number;
  changed: Partial<WindowState>;
}

export interface LogLine {
  seq: number;
  at: number;
  level: "debug" | "info" | "warn" | "error";
  message: string;
}

export interface ConsoleApi {
  /**
   * The window's event stream: what changed after `version` (everything for 0), at once or as soon as it
   * changes; after about 25 s without a change, an update that changed nothing.
   */
  watch(version: number): Promise<WindowUpdate>;
  serverInfo(): Promise<ServerInfo>;
  status(): Promise<StatusView>;
  firstRun(): Promise<FirstRunView>;
  /**
   * A key for the window's own chat, made for this app session (the previous session's is revoked). A key
   * revoked meanwhile (from the command line, say) is replaced by a new one, so the chat never breaks. Rejects
   * with code window_account_disabled while the account holding it is disabled (Keys page: Enable).
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
  /**
   * Saves a model's own settings (file: a name from listModels, or null for the model loaded now); when it is
   * the loaded model, reloads it with them and resolves once it serves. A load that fails puts the previous
   * settings back (the model serves with them again) and rejects with the reason.
   */
  setModelSettings(file: string | null, settings: ModelSettings): Promise<StatusView>;
  /** kind "speech" with force: also the speech model in use (uploads then get no transcript). */
  removeModel(file: string, options?: { kind?: ModelKind; force?: boolean }): Promise<ModelsView>;
  /** kind "speech": a whisper.cpp model; an empty source is the recommended one. */
  startDownload(input: { source: string; sha256?: string; kind?: ModelKind }): Promise<DownloadView>;
  downloads(): Promise<DownloadView[]>;
  cancelDownload(id: string): Promise<DownloadView>;
  /** Takes an ended download (done, failed or cancelled) off the list. */
  dismissDownload(id: string): Promise<DownloadView[]>;
  setGpuPreference(gpu: GpuPreference): Promise<StatusView>;
  logs(afterSeq?: number): Promise<LogLine[]>;
  warmStart(): Promise<WarmStartView>;
  /**
   * Turns warm start on or off and keeps the choice for the next start; a loaded model loads again with it
   * (resolves once it serves). Rejects with code warm_start_forced when the server's start-up options set it.
   */
  setWarmStart(enabled: boolean): Promise<WarmStartView>;
  /** Deletes every saved prefix. */
  clearWarmPrefixes(): Promise<WarmStartView>;
  setLanExposure(enabled: boolean): Promise<ServerInfo>;
  /** The port for the next start (1024-65535), or null for the default; applies when the app restarts. */
  setPort(port: number | null): Promise<ServerInfo>;
  /**
   * The upstream engines for the next start (no urls: the built-in engine); applies when the app restarts.
   * key: a key for every upstream; null: none; absent: each address kept keeps its key, and a new one gets the
   * key the others share. Rejects with invalid_upstream (an address or key the server would not take).
   */
  setUpstreams(input: { urls: string[]; key?: string | null; affinity: boolean }): Promise<ServerInfo>;
}

export type ConsoleMethod = keyof ConsoleApi;

/** The one list of callable methods; main refuses any other name. */
export const CONSOLE_METHODS = {
  watch: true,
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
  setModelSettings: true,
  startDownload: true,
  downloads: true,
  cancelDownload: true,
  dismissDownload: true,
  setGpuPreference: true,
  logs: true,
  warmStart: true,
  setWarmStart: true,
  clearWarmPrefixes: true,
  setLanExposure: true,
  setPort: true,
  setUpstreams: true,
} as const satisfies Record<ConsoleMethod, true>;

/** What crosses the bridge: errors travel as data, so the window sees the message, not Electron's wrapper. */
export type ConsoleResult<T = unknown> = { ok: true; value: T } | { ok: false; error: { message: string; code: string | null } };

/** What the preload puts on window.svc. */
export interface ConsoleBridge {
  call(method: string, args: unknown[]): Promise<ConsoleResult>;
}

/** The IPC channel the preload and the main process share. */
export const CONSOLE_CHANNEL = "svc:console";
