// The engine as the server sees it: the Engine interface, served by an engine process (engine-child.ts) over
// the messages of engine-protocol.ts. When that process dies (a native abort, a signal, the OOM killer), the
// generations and counts running in it fail at once with a 503 saying so, and `onFailure` listeners (the
// EngineHost) hear why, with the last line it wrote to stderr, and start another.
import { fork } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import type { Log } from "../core/log.js";
import { AppError } from "../core/errors.js";
import {
  CREDIT,
  deserializeError,
  type EngineChannel,
  type EngineSpawner,
  type FromEngine,
} from "./engine-protocol.js";
import type { LlamaEngineOptions } from "./llama-engine.js";
import type { Engine, EngineEvent, EngineRequest, EngineStatus, GpuInfo } from "./types.js";

/** Seconds a client is told to wait after the engine process died under its request. */
const RESTART_RETRY_AFTER = 5;
/** How long a closing engine process may take before it is killed. */
const CLOSE_TIMEOUT_MS = 10_000;
/** Lines of the engine process's stderr kept for the report of its death (a backtrace may follow the reason). */
const STDERR_LINES = 64;
/**
 * A line of a backtrace: Node's (" 3: node::Abort() [...]", "at f (file:1:2)"), gdb's ("#0  0x... in f"),
 * glibc's backtrace_symbols ("/lib/libggml.so(+0x1234) [0x...]"), or a bare address.
 */
const STACK_FRAME = /^(\d+: |#\d+\s|at\s|\S*\(\+?0x[0-9a-f]+\)|\[?0x[0-9a-f]+\]?$|----- |=+ |Native stack trace|Aborted|Segmentation fault \(core dumped\)$)/i;

/** Where the engine process's entry is: the compiled file beside this one, or (run from source) the .ts file. */
function childEntry(): { entry: string; execArgv: string[] } {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith(".js")) return { entry: fileURLToPath(new URL("./engine-child.js", import.meta.url)), execArgv: [] };
  // Under tsx or vitest: the source, through tsx's loader.
  const source = fileURLToPath(new URL("./engine-child.ts", import.meta.url));
  if (!existsSync(source)) throw new Error(`The engine process's entry is missing beside ${here}.`);
  return { entry: source, execArgv: ["--import", "tsx"] };
}

/** A forked Node process (in the desktop app: Electron's own binary as Node, as for the speech model). */
export function forkEngine(entry: string, env: NodeJS.ProcessEnv, execArgv: string[] = []): EngineChannel {
  const child = fork(entry, [], {
    env: { ...env, ELECTRON_RUN_AS_NODE: "1" },
    execArgv,
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  const stderr: Array<(line: string) => void> = [];
  for (const stream of [child.stdout!, child.stderr!]) {
    const lines = createInterface({ input: stream });
    lines.on("line", (line) => {
      for (const listener of stderr) listener(line);
    });
  }
  return {
    send: (message) => {
      if (child.connected) child.send(message);
    },
    onMessage: (listener) => void child.on("message", (message) => listener(message as FromEngine)),
    // "close", not "exit": by then its stderr has been read to the end (the line saying why comes last).
    onExit: (listener) => void child.on("close", (code, signal) => listener(signal ? `signal ${signal}` : `exit code ${code}`)),
    onStderr: (listener) => void stderr.push(listener),
    kill: () => void child.kill("SIGKILL"),
  };
}

export interface ProcessEngineOptions extends LlamaEngineOptions {
  /** Starts the process (default: a forked Node process); the desktop app passes Electron's utilityProcess. */
  spawn?: EngineSpawner;
  /** Extra environment for the engine process. */
  env?: NodeJS.ProcessEnv;
}

type Item = { kind: "events"; events: EngineEvent[] } | { kind: "end" } | { kind: "error"; error: AppError } | { kind: "aborted" };

/** One generation's items, in order, for its reader. */
class Inbox {
  private readonly items: Item[] = [];
  private waiter: (() => void) | null = null;

  push(item: Item): void {
    this.items.push(item);
    this.waiter?.();
    this.waiter = null;
  }

  async next(): Promise<Item> {
    while (this.items.length === 0) await new Promise<void>((resolve) => (this.waiter = resolve));
    return this.items.shift()!;
  }
}

export class ProcessEngine implements Engine {
  private readonly inboxes = new Map<number, Inbox>();
  private readonly counts = new Map<number, { resolve: (tokens: number) => void; reject: (err: AppError) => void }>();
  private readonly failureListeners = new Set<(reason: string) => void>();
  private readonly gpuQueries = new Map<number, (gpu: GpuInfo | null) => void>();
  private readonly stderrTail: string[] = [];
  private nextId = 1;
  private engineStatus: EngineStatus;
  private death: AppError | null = null;
  private closing = false;
  private closed: (() => void) | null = null;

  private constructor(
    private readonly channel: EngineChannel,
    private readonly log: Log,
  ) {
    this.engineStatus = { state: "loading", model: null, gpu: null, error: null };
  }

  /** Starts an engine process and loads the model in it; rejects (with the process gone) when that fails. */
  static async start(options: ProcessEngineOptions): Promise<ProcessEngine> {
    const { spawn, env, log, ...load } = options;
    const { entry, execArgv } = childEntry();
    // SVC_ENGINE_PROCESS tells the engine process's thread policy that its parent's CPU time is its own; one
    // libuv pool thread (unless the user set a size) keeps every decode on one thread (thread-policy.ts). Set
    // before the process starts, it holds everywhere: in the desktop app and on Windows too.
    const base = { ...process.env, ...env };
    const childEnv = { ...base, SVC_ENGINE_PROCESS: "1", UV_THREADPOOL_SIZE: (base.UV_THREADPOOL_SIZE ?? "").trim() || "1" };
    const channel = (spawn ?? forkEngine)(entry, childEnv, execArgv);
    const engine = new ProcessEngine(channel, log ?? (() => undefined));
    await engine.load(load);
    return engine;
  }

  private load(options: Omit<LlamaEngineOptions, "log">): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      this.channel.onStderr((line) => {
        this.stderrTail.push(line);
        if (this.stderrTail.length > STDERR_LINES) this.stderrTail.shift();
      });
      this.channel.onMessage((message) => {
        if (message.type === "loaded") {
          this.engineStatus = message.status;
          settled = true;
          resolve();
        } else if (message.type === "load_failed") {
          settled = true;
          this.closing = true;
          this.channel.kill();
          reject(deserializeError(message.error));
        } else this.receive(message);
      });
      this.channel.onExit((reason) => {
        const how = this.describeExit(reason);
        if (!settled) {
          settled = true;
          reject(
            new AppError("unavailable", `The engine process stopped while loading the model (${how}).`, {
              code: "model_load_failed",
              details: { exit: reason, last_error_line: this.lastErrorLine() },
            }),
          );
          return;
        }
        this.died(reason, how);
      });
      this.channel.send({ type: "load", options });
    });
  }

  status(): EngineStatus {
    return this.engineStatus;
  }

  /** Calls `listener` when the engine process dies unexpectedly (not on close()), with how it ended. */
  onFailure(listener: (reason: string) => void): () => void {
    this.failureListeners.add(listener);
    return () => this.failureListeners.delete(listener);
  }

  async *generate(request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent, void, void> {
    this.checkAlive();
    if (signal.aborted) return;
    const id = this.nextId++;
    const inbox = new Inbox();
    this.inboxes.set(id, inbox);
    const onAbort = () => inbox.push({ kind: "aborted" });
    signal.addEventListener("abort", onAbort, { once: true });
    this.channel.send({ type: "generate", id, request });
    let taken = 0;
    let over = false;
    try {
      while (true) {
        const item = await inbox.next();
        if (item.kind === "aborted") return;
        if (item.kind === "end") {
          over = true;
          return;
        }
        if (item.kind === "error") {
          over = true;
          throw item.error;
        }
        for (const event of item.events) {
          yield event;
          if (signal.aborted) return;
        }
        // Credit goes back in halves of the window: one message per CREDIT / 2 events read.
        taken += item.events.length;
        if (taken >= CREDIT / 2) {
          this.channel.send({ type: "credit", id, events: taken });
          taken = 0;
        }
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      // Aborted, or a reader that stopped early (return()): the generation ends in the engine process, and
      // this returns once it has (its sequence is free then, so the scheduler's next ticket finds it free).
      if (!over && this.death === null) {
        this.channel.send({ type: "abort", id });
        while (true) {
          const item = await inbox.next();
          if (item.kind === "end" || item.kind === "error") break;
        }
      }
      this.inboxes.delete(id);
    }
  }

  async gpuNow(): Promise<GpuInfo | null> {
    if (this.death !== null || this.closing) return null;
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.gpuQueries.set(id, resolve);
      this.channel.send({ type: "gpu", id });
    });
  }

  async countPromptTokens(request: EngineRequest): Promise<number> {
    this.checkAlive();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.counts.set(id, { resolve, reject });
      this.channel.send({ type: "count", id, request });
    });
  }

  close(): Promise<void> {
    if (this.death !== null || this.closing) {
      this.closing = true;
      return Promise.resolve();
    }
    this.closing = true;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.channel.kill();
        resolve();
      }, CLOSE_TIMEOUT_MS);
      this.closed = () => {
        clearTimeout(timer);
        resolve();
      };
      this.channel.send({ type: "close" });
    });
  }

  private receive(message: FromEngine): void {
    switch (message.type) {
      case "events":
        for (const batch of message.batches) this.inboxes.get(batch.id)?.push({ kind: "events", events: batch.events });
        return;
      case "end":
        this.inboxes.get(message.id)?.push({ kind: "end" });
        return;
      case "failed": {
        const error = deserializeError(message.error);
        const count = this.counts.get(message.id);
        if (count) {
          this.counts.delete(message.id);
          count.reject(error);
        } else this.inboxes.get(message.id)?.push({ kind: "error", error });
        return;
      }
      case "count_result": {
        const count = this.counts.get(message.id);
        this.counts.delete(message.id);
        count?.resolve(message.tokens);
        return;
      }
      case "gpu_result": {
        const query = this.gpuQueries.get(message.id);
        this.gpuQueries.delete(message.id);
        query?.(message.gpu);
        return;
      }
      case "log":
        this.log(message.level, message.message, message.inWindow);
        return;
      case "closed":
        this.closed?.();
        return;
      default:
        return;
    }
  }

  private died(reason: string, how: string): void {
    if (this.closing) {
      this.closed?.();
      return;
    }
    this.death = new AppError(
      "unavailable",
      `The engine process stopped (${how}) while this request was running; the model is being loaded again. Retry in a few seconds.`,
      { code: "engine_restarting", retryAfter: RESTART_RETRY_AFTER, details: { exit: reason } },
    );
    this.engineStatus = { ...this.engineStatus, state: "error", error: `The engine process stopped (${how}).` };
    for (const inbox of this.inboxes.values()) inbox.push({ kind: "error", error: this.death });
    for (const count of this.counts.values()) count.reject(this.death);
    this.counts.clear();
    for (const query of this.gpuQueries.values()) query(null);
    this.gpuQueries.clear();
    for (const listener of this.failureListeners) listener(how);
  }

  /** "signal SIGABRT: GGML_ASSERT(...) failed": how it ended, and the last line it wrote that says why. */
  private describeExit(reason: string): string {
    const line = this.lastErrorLine();
    return line ? `${reason}: ${line}` : reason;
  }

  /** The last line it wrote that is not part of a stack trace (what ggml's abort, Node's or glibc's said). */
  private lastErrorLine(): string | null {
    for (let i = this.stderrTail.length - 1; i >= 0; i--) {
      const line = this.stderrTail[i]!.trim();
      if (line === "" || STACK_FRAME.test(line)) continue;
      return line.length > 300 ? `${line.slice(0, 300)}…` : line;
    }
    return null;
  }

  private checkAlive(): void {
    if (this.death) throw this.death;
    if (this.closing) throw new AppError("unavailable", "The model is being unloaded.", { code: "model_loading", retryAfter: RESTART_RETRY_AFTER });
  }
}
