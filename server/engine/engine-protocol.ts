// The one message protocol between the server and its engine process (engine-child.ts, process-engine.ts).
// Both ends import the types from here; nothing else crosses the process boundary.
//
// The server sends work (load, generate, count, abort, close); the engine process answers with the loaded
// model's status, batches of events (those of every generation made since its last message, at most about
// every 16 ms: event-outbox.ts), results and errors, and its log lines. A generation may run ahead of its reader by CREDIT events; the server grants more as it reads, so a
// stalled reader stalls its generation (as a pulled generator did) instead of filling the server's memory.
import { AppError, type AppErrorKind } from "../core/errors.js";
import type { LlamaEngineOptions } from "./llama-engine.js";
import type { EngineEvent, EngineRequest, EngineStatus, GpuInfo } from "./types.js";

/** Events a generation may send ahead of what its reader has taken. */
export const CREDIT = 64;

/** Load options as they cross the boundary (the log function stays in the server). */
export type EngineLoadOptions = Omit<LlamaEngineOptions, "log">;

export type ToEngine =
  | { type: "load"; options: EngineLoadOptions }
  | { type: "generate"; id: number; request: EngineRequest }
  /** The reader took `events` more events of generation `id`. */
  | { type: "credit"; id: number; events: number }
  | { type: "abort"; id: number }
  | { type: "count"; id: number; request: EngineRequest }
  /** What the GPU has free now (the loaded status holds the figures from the load). */
  | { type: "gpu"; id: number }
  | { type: "close" };

export type LogLevel = "debug" | "info" | "warn" | "error";

export type FromEngine =
  | { type: "loaded"; status: EngineStatus }
  | { type: "load_failed"; error: SerializedError }
  /** The events made since the last message, by generation. */
  | { type: "events"; batches: Array<{ id: number; events: EngineEvent[] }> }
  /** The generation ended (after its last events; aborted ones end without `done`). */
  | { type: "end"; id: number }
  | { type: "failed"; id: number; error: SerializedError }
  | { type: "count_result"; id: number; tokens: number }
  | { type: "gpu_result"; id: number; gpu: GpuInfo | null }
  | { type: "log"; level: LogLevel; message: string; inWindow?: string }
  | { type: "closed" };

export interface SerializedError {
  kind: AppErrorKind;
  message: string;
  code?: string;
  param?: string;
  retryAfter?: number;
  details?: Record<string, unknown>;
}

/** An error as it crosses the boundary: AppErrors whole, anything else as an internal error with its message. */
export function serializeError(err: unknown): SerializedError {
  if (err instanceof AppError)
    return {
      kind: err.kind,
      message: err.message,
      ...(err.code !== undefined ? { code: err.code } : {}),
      ...(err.param !== undefined ? { param: err.param } : {}),
      ...(err.retryAfter !== undefined ? { retryAfter: err.retryAfter } : {}),
      ...(err.details !== undefined ? { details: err.details } : {}),
    };
  return { kind: "internal", message: `The engine failed: ${(err as Error)?.message ?? String(err)}`, code: "engine_error" };
}

export function deserializeError(error: SerializedError): AppError {
  return new AppError(error.kind, error.message, { code: error.code, param: error.param, retryAfter: error.retryAfter, details: error.details });
}

/** One end of the channel, whatever carries it (a forked Node process, Electron's utilityProcess). */
export interface EngineChannel {
  send(message: ToEngine): void;
  onMessage(listener: (message: FromEngine) => void): void;
  /** The process ended; `reason` says how (exit code or signal). */
  onExit(listener: (reason: string) => void): void;
  /** Lines the process wrote to stderr (native errors such as a failed GGML_ASSERT end up there). */
  onStderr(listener: (line: string) => void): void;
  kill(): void;
}

/**
 * Starts an engine process running `entry` (the compiled engine-child.js, or its .ts source under tsx) with
 * `execArgv`, the Node options the entry needs (tsx's loader for a source); a spawner that runs only compiled
 * entries (the desktop app's utilityProcess) may leave them out.
 */
export type EngineSpawner = (entry: string, env: NodeJS.ProcessEnv, execArgv?: string[]) => EngineChannel;
