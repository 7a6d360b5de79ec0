// Server settings: flags, then environment variables (SVC_*), then defaults.
import { availableParallelism, homedir, platform } from "node:os";
import { join } from "node:path";
import type { GpuPreference } from "./engine/llama-engine.js";

export interface ServeConfig {
  host: string;
  port: number;
  dataDir: string;
  modelPath?: string;
  threads: number;
  sequences: number;
  contextSize?: number;
  gpu: GpuPreference;
  logLevel: "silent" | "error" | "warn" | "info" | "debug";
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
 * Threads for generation. Measured on a 2-core machine: the library's default of 4 made generation about
 * 400 times slower than 1 thread, because threads spun against each other. Leave a core for the rest.
 */
export function defaultThreads(cores = availableParallelism()): number {
  if (cores <= 2) return 1;
  return Math.max(1, Math.min(8, Math.floor(cores / 2)));
}

export type Flags = Partial<Record<"host" | "port" | "data-dir" | "model" | "threads" | "sequences" | "context-size" | "gpu" | "log-level", string>>;

export class ConfigError extends Error {}

function intOption(name: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined || value === "") return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) throw new ConfigError(`--${name} must be an integer from ${min} to ${max} (got '${value}').`);
  return n;
}

export function resolveServeConfig(flags: Flags, env: NodeJS.ProcessEnv = process.env): ServeConfig {
  const pick = (flag: keyof Flags, variable: string) => flags[flag] ?? env[variable];
  const gpu = (pick("gpu", "SVC_GPU") ?? "auto") as GpuPreference;
  if (!["auto", "cuda", "vulkan", "metal", "cpu"].includes(gpu)) throw new ConfigError(`--gpu must be auto, cuda, vulkan, metal or cpu (got '${gpu}').`);
  const logLevel = (pick("log-level", "SVC_LOG_LEVEL") ?? "info") as ServeConfig["logLevel"];
  if (!["silent", "error", "warn", "info", "debug"].includes(logLevel)) throw new ConfigError(`--log-level must be silent, error, warn, info or debug.`);
  return {
    host: pick("host", "SVC_HOST") ?? "127.0.0.1",
    port: intOption("port", pick("port", "SVC_PORT"), 0, 65535) ?? DEFAULT_PORT,
    dataDir: pick("data-dir", "SVC_DATA_DIR") ?? defaultDataDir(env),
    modelPath: pick("model", "SVC_MODEL") || undefined,
    threads: intOption("threads", pick("threads", "SVC_THREADS"), 1, 256) ?? defaultThreads(),
    sequences: intOption("sequences", pick("sequences", "SVC_SEQUENCES"), 1, 64) ?? 2,
    contextSize: intOption("context-size", pick("context-size", "SVC_CONTEXT_SIZE"), 256, 1_048_576),
    gpu,
    logLevel,
  };
}
