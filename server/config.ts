// Server settings: flags, then environment variables (SVC_*), then defaults.
import { availableParallelism, homedir, platform } from "node:os";
import { join } from "node:path";
import { checkUpstreamUrl } from "./core/upstream-url.js";
import { chooseThreads, type GpuPreference } from "./engine/resource-plan.js";
import type { ConnectionLimits } from "./http/connection-limits.js";
import { parseMmapSetting, type WeightsSetting } from "./engine/huge-pages.js";

export interface ServeConfig {
  host: string;
  port: number;
  dataDir: string;
  /** From --model / SVC_MODEL; without one the server loads the active model (`svc models use`). */
  modelPath?: string;
  /** Undefined: chosen when the model loads, from the cores and how much of the model is on the GPU. */
  threads?: number;
  /** Undefined: as many as the free memory holds (up to 2 on a CPU, 4 on a GPU). */
  sequences?: number;
  /** Undefined: sized to the free memory, up to 16384. */
  contextSize?: number;
  gpu: GpuPreference;
  /** How the model's weights are held (--mmap / SVC_MMAP): on (mapped from the file), off (read into memory); undefined: auto. */
  mmap?: WeightsSetting;
  logLevel: "silent" | "error" | "warn" | "info" | "debug";
  /** Interactive requests one account may have in flight (running plus waiting); undefined: 4 per sequence. */
  concurrencyLimit?: number;
  /** Interactive requests that may wait for a sequence at once, all accounts together; undefined: 64. */
  queueLimit?: number;
  /** Agent runs one account may have in progress at once; undefined: 2. */
  agentRunsLimit?: number;
  /** Engine process deaths within a minute after which it is not started again; undefined: 3. */
  engineRestartLimit?: number;
  /** Warm start (--warm-start on|off); undefined: the window's setting (off unless turned on there). */
  warmStart?: boolean;
  /** Gigabytes warm start's saved prefixes may take together; undefined: 8. */
  warmStartMaxGb?: number;
  /** Browser origins allowed to call the API besides pages on this machine and the desktop window ("*": all). */
  corsOrigins?: string[];
  /** Audit records older than this many days are removed automatically; undefined: 90. */
  auditRetentionDays?: number;
  /** Minutes a console session may sit unused before it ends; undefined: 30. */
  consoleSessionMinutes?: number;
  /** A better_sqlite3.node built for the host runtime (the desktop app in development); never from flags or env. */
  nativeBinding?: string;
  /** Required to listen on an address other than loopback (--lan, SVC_LAN=1, the window's LAN switch). */
  lan?: boolean;
  /** Host names besides this machine's own that clients may use to reach a server on the LAN. */
  allowedHosts?: string[];
  /** Connection deadlines and cap (ms; unset: the defaults in server/http/connection-limits.ts). */
  connections?: Partial<ConnectionLimits>;
  /** A stream whose client reads nothing for this long is closed (ms; unset: 30 s). */
  streamWriteTimeoutMs?: number;
  /**
   * Inference servers to generate on instead of the built-in engine (--upstream URL,... / SVC_UPSTREAM, with
   * --upstream-key KEY,... / SVC_UPSTREAM_KEY); undefined: the window's setting, else the built-in engine.
   */
  upstreams?: Array<{ url: string; key?: string }>;
  /**
   * Prefix affinity over the upstreams' slots (--upstream-affinity on|off / SVC_UPSTREAM_AFFINITY); undefined:
   * the window's setting, else on. Off: round-robin (bench:upstream compares them).
   */
  upstreamAffinity?: boolean;
  /** Speculation (--speculation prompt-lookup|off / SVC_SPECULATION): prompt lookup's guesses checked as answers are written; undefined: on. */
  speculation?: "prompt-lookup" | "off";
  /**
   * A draft model for speculation (--draft-model FILE / SVC_DRAFT_MODEL: a path, or a file in the models
   * folder), a small GGUF with the served model's vocabulary; undefined: prompt lookup (or a model's own setting).
   */
  draftModel?: string;
}

export const APP_NAME = "svc-desktop";
export const DEFAULT_PORT = 8787;

/** The platform's app-data folder (the same one the desktop app uses). */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  switch (platform()) {
    case "darwin":
      return join(homedir(), "Library", "Application Support", APP_NAME);
    case "win32":
      return join(env.APPDATA ?? join(homedir(), "AppData", "Roaming"), APP_NAME);
    default:
      return join(env.XDG_CONFIG_HOME ?? join(homedir(), ".config"), APP_NAME);
  }
}

/**
 * Threads for generation on this machine when nothing is on the GPU, not knowing the model or the libuv
 * pool (so 1 on 2 cores; `svc serve` picks 2 there for models of 32 MiB and up: chooseThreads).
 */
export function defaultThreads(cores = availableParallelism()): number {
  return chooseThreads({ cores });
}

export type Flags = Partial<
  Record<
    | "host"
    | "port"
    | "data-dir"
    | "model"
    | "threads"
    | "sequences"
    | "context-size"
    | "gpu"
    | "mmap"
    | "log-level"
    | "cors-origins"
    | "concurrency-limit"
    | "queue-limit"
    | "agent-runs-limit"
    | "engine-restart-limit"
    | "warm-start"
    | "warm-start-max-gb"
    | "allowed-hosts"
    | "headers-timeout"
    | "request-timeout"
    | "keep-alive-timeout"
    | "stream-write-timeout"
    | "max-connections"
    | "connections-per-client"
    | "idle-connections-per-client"
    | "audit-retention-days"
    | "console-session-minutes"
    | "upstream"
    | "upstream-key"
    | "upstream-affinity"
    | "speculation"
    | "draft-model",
    string
  >
> & { lan?: boolean };

export class ConfigError extends Error {}

function speculationSetting(value: string | undefined): ServeConfig["speculation"] {
  const v = (value ?? "").trim().toLowerCase();
  if (v === "") return undefined;
  if (v === "prompt-lookup" || v === "on") return "prompt-lookup";
  if (v === "off") return "off";
  throw new ConfigError(`--speculation must be prompt-lookup or off (got '${value}').`);
}

function intOption(name: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined || value === "") return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) throw new ConfigError(`--${name} must be an integer from ${min} to ${max} (got '${value}').`);
  return n;
}

function onOff(name: string, value: string | undefined): boolean | undefined {
  const v = (value ?? "").trim().toLowerCase();
  if (v === "") return undefined;
  if (["on", "1", "true", "yes"].includes(v)) return true;
  if (["off", "0", "false", "no"].includes(v)) return false;
  throw new ConfigError(`--${name} must be on or off (got '${value}').`);
}

function list(value: string | undefined): string[] {
  return (value ?? "")
    .split(",")
    .map((o) => o.trim())
    .filter((o) => o !== "");
}

function seconds(name: string, value: string | undefined): number | undefined {
  const s = intOption(name, value, 1, 86_400);
  return s === undefined ? undefined : s * 1000;
}

/**
 * --upstream URL[,URL...] with --upstream-key KEY[,KEY...]: one key for all, or one per upstream in order
 * (an empty entry: none for that one).
 */
export function parseUpstreams(urls: string | undefined, keys: string | undefined): ServeConfig["upstreams"] {
  const list = (urls ?? "").split(",").map((u) => u.trim()).filter((u) => u !== "");
  if (list.length === 0) return undefined;
  const keyList = (keys ?? "").split(",").map((k) => k.trim());
  if (keys !== undefined && keys.trim() !== "" && keyList.length !== 1 && keyList.length !== list.length)
    throw new ConfigError(`--upstream-key must give one key for all upstreams or one per upstream (${list.length}); got ${keyList.length}.`);
  return list.map((url, i) => {
    const checked = checkUpstreamUrl(url);
    if ("problem" in checked)
      throw new ConfigError(
        checked.problem === "credentials"
          ? `--upstream URLs take no user name or password: give the key with --upstream-key (got '${url}').`
          : checked.problem === "query"
            ? `--upstream URLs end at the server's address or path, without ?query or #fragment (got '${url}').`
            : `--upstream must be http:// or https:// URLs (got '${url}').`,
      );
    const key = keyList.length === 1 ? keyList[0] : keyList[i];
    return { url: checked.url, ...(key ? { key } : {}) };
  });
}

export function resolveServeConfig(flags: Flags, env: NodeJS.ProcessEnv = process.env): ServeConfig {
  const pick = (flag: Exclude<keyof Flags, "lan">, variable: string) => flags[flag] ?? env[variable];
  const gpu = (pick("gpu", "SVC_GPU") ?? "auto") as GpuPreference;
  if (!["auto", "cuda", "vulkan", "metal", "cpu"].includes(gpu)) throw new ConfigError(`--gpu must be auto, cuda, vulkan, metal or cpu (got '${gpu}').`);
  const mmapValue = pick("mmap", "SVC_MMAP");
  const mmap = parseMmapSetting(mmapValue) ?? (mmapValue === undefined || mmapValue.trim() === "" ? "auto" : undefined);
  if (!mmap) throw new ConfigError(`--mmap must be auto, on or off (got '${mmapValue}').`);
  const logLevel = (pick("log-level", "SVC_LOG_LEVEL") ?? "info") as ServeConfig["logLevel"];
  if (!["silent", "error", "warn", "info", "debug"].includes(logLevel)) throw new ConfigError(`--log-level must be silent, error, warn, info or debug.`);
  return {
    host: pick("host", "SVC_HOST") ?? "127.0.0.1",
    port: intOption("port", pick("port", "SVC_PORT"), 0, 65535) ?? DEFAULT_PORT,
    dataDir: pick("data-dir", "SVC_DATA_DIR") ?? defaultDataDir(env),
    modelPath: pick("model", "SVC_MODEL") || undefined,
    threads: intOption("threads", pick("threads", "SVC_THREADS"), 1, 256),
    sequences: intOption("sequences", pick("sequences", "SVC_SEQUENCES"), 1, 64),
    contextSize: intOption("context-size", pick("context-size", "SVC_CONTEXT_SIZE"), 256, 1_048_576),
    gpu,
    mmap,
    logLevel,
    concurrencyLimit: intOption("concurrency-limit", pick("concurrency-limit", "SVC_CONCURRENCY_LIMIT"), 1, 100_000),
    queueLimit: intOption("queue-limit", pick("queue-limit", "SVC_QUEUE_LIMIT"), 0, 100_000),
    agentRunsLimit: intOption("agent-runs-limit", pick("agent-runs-limit", "SVC_AGENT_RUNS_LIMIT"), 1, 1000),
    engineRestartLimit: intOption("engine-restart-limit", pick("engine-restart-limit", "SVC_ENGINE_RESTART_LIMIT"), 1, 1000),
    warmStart: onOff("warm-start", pick("warm-start", "SVC_WARM_START")),
    warmStartMaxGb: intOption("warm-start-max-gb", pick("warm-start-max-gb", "SVC_WARM_START_MAX_GB"), 1, 100_000),
    auditRetentionDays: intOption("audit-retention-days", pick("audit-retention-days", "SVC_AUDIT_RETENTION_DAYS"), 1, 36_500),
    consoleSessionMinutes: intOption("console-session-minutes", pick("console-session-minutes", "SVC_CONSOLE_SESSION_MINUTES"), 1, 24 * 60),
    corsOrigins: list(pick("cors-origins", "SVC_CORS_ORIGINS")).map((o) => o.replace(/\/+$/, "")),
    lan: flags.lan === true || ["1", "true", "on", "yes"].includes((env.SVC_LAN ?? "").trim().toLowerCase()),
    allowedHosts: list(pick("allowed-hosts", "SVC_ALLOWED_HOSTS")).map((h) => h.toLowerCase()),
    connections: {
      headersTimeoutMs: seconds("headers-timeout", pick("headers-timeout", "SVC_HEADERS_TIMEOUT")),
      requestTimeoutMs: seconds("request-timeout", pick("request-timeout", "SVC_REQUEST_TIMEOUT")),
      keepAliveTimeoutMs: seconds("keep-alive-timeout", pick("keep-alive-timeout", "SVC_KEEP_ALIVE_TIMEOUT")),
      maxConnections: intOption("max-connections", pick("max-connections", "SVC_MAX_CONNECTIONS"), 1, 1_000_000),
      perClientConnections: intOption("connections-per-client", pick("connections-per-client", "SVC_CONNECTIONS_PER_CLIENT"), 1, 1_000_000),
      idleConnectionsPerClient: intOption("idle-connections-per-client", pick("idle-connections-per-client", "SVC_IDLE_CONNECTIONS_PER_CLIENT"), 0, 1_000_000),
    },
    streamWriteTimeoutMs: seconds("stream-write-timeout", pick("stream-write-timeout", "SVC_STREAM_WRITE_TIMEOUT")),
    upstreams: parseUpstreams(pick("upstream", "SVC_UPSTREAM"), pick("upstream-key", "SVC_UPSTREAM_KEY")),
    upstreamAffinity: onOff("upstream-affinity", pick("upstream-affinity", "SVC_UPSTREAM_AFFINITY")),
    speculation: speculationSetting(pick("speculation", "SVC_SPECULATION")),
    draftModel: pick("draft-model", "SVC_DRAFT_MODEL")?.trim() || undefined,
  };
}
