// Why one file (over 400 lines): the host is one state machine (the engine serving, the file loading, the
// last error, the queue of loads and switches, the restarts after a death) that every method reads and
// changes; TrackedEngine is the count of its running generations that a switch waits on.
//
// Holds the engine the server uses now, and swaps it safely. Requests ask the host for the engine; while no
// model is loaded, or one is loading or being switched, they get a 503 with Retry-After and a message saying
// why. A switch lets the requests already running finish on the old model, unloads it (two models rarely
// fit in a laptop's memory at once), loads the new one, and puts the old one back if the new one fails. A
// caller that keeps state beside the engine (the active-model setting) runs its switch as one turn of the
// queue (exclusively) and puts back the old model and its own state together.
//
// The engine runs in a process of its own (process-engine.ts). When that process dies, the requests running
// in it have failed with a 503 saying so; the host loads the same model again in a new one, while requests
// already waiting for a sequence keep waiting and new ones get the 503 of a model loading. Engines that die
// `restartLimit` times within a minute are not started again: the host says why, with the last native line.
import type { Log } from "../core/log.js";
import { AppError } from "../core/errors.js";
import { readGgufSummary } from "./gguf-inspect.js";
import type { LlamaEngineOptions } from "./llama-engine.js";
import { currentGpu, detectGpu } from "./llama-runtime.js";
import { ProcessEngine } from "./process-engine.js";
import type { GpuPreference } from "./resource-plan.js";
import type { Engine, EngineEvent, EngineOutcome, EngineRequest, EngineStatus, GpuInfo, SpeculationCounts } from "./types.js";

// What a load takes: callers above the engine name it through the host, never the concrete engine's module.
export type { LlamaEngineOptions };

export const NO_MODEL_MESSAGE =
  "No model is loaded. Start the server with --model PATH.gguf (or set SVC_MODEL), " +
  "or download one with `svc models pull` and select it with `svc models use`.";

export type EngineLoader = (options: LlamaEngineOptions) => Promise<Engine>;
/** Fails fast (before anything is unloaded) for a file that cannot be a model. */
export type ModelPrecheck = (path: string) => Promise<void>;
export type HostLog = Log;

const LOADING_RETRY_AFTER = 5;

function loadingError(): AppError {
  return new AppError("unavailable", "The model is loading; try again shortly.", { code: "model_loading", retryAfter: LOADING_RETRY_AFTER });
}

/**
 * Counts the generations running on an engine (the one count of them: the scheduler counts tickets, the
 * pool only marks sequences busy), so a switch can wait for them, and refuses new ones once the engine is
 * retired. Requests that asked for the engine but had not started yet get the 503 a new request gets
 * during a switch. Token counting needs no sequence and is not counted.
 */
class TrackedEngine implements Engine {
  private running = 0;
  private retired = false;
  private idle: Array<() => void> = [];

  constructor(
    readonly inner: Engine,
    readonly options: LlamaEngineOptions,
    private readonly totals?: UsageTotals,
  ) {}

  status(): EngineStatus {
    return this.inner.status();
  }

  async countPromptTokens(request: EngineRequest): Promise<number> {
    if (this.retired) throw loadingError();
    return this.inner.countPromptTokens(request);
  }

  async *generate(request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent, void, void> {
    this.enter();
    try {
      for await (const event of this.inner.generate(request, signal)) {
        if (event.type === "done" && this.totals) addUsage(this.totals, event.outcome.usage);
        yield event;
      }
    } finally {
      this.leave();
    }
  }

  get isRetired(): boolean {
    return this.retired;
  }

  /** Refuses new work and resolves once the running requests have finished. */
  retire(): Promise<void> {
    this.retired = true;
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private enter(): void {
    if (this.retired) throw loadingError();
    this.running++;
  }

  private leave(): void {
    this.running--;
    if (this.running === 0) for (const resolve of this.idle.splice(0)) resolve();
  }
}

/** Tokens served since the server started (the desktop window's Server page shows them). */
export interface UsageTotals {
  generations: number;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  reasoningTokens: number;
  /** Speculation: tokens guessed and checked, and those of them the answers took (/health's acceptance rate). */
  draftedTokens: number;
  acceptedDraftTokens: number;
}

function addUsage(totals: UsageTotals, usage: EngineOutcome["usage"]): void {
  totals.generations++;
  totals.promptTokens += usage.promptTokens;
  totals.cachedTokens += usage.cachedTokens;
  totals.completionTokens += usage.completionTokens;
  totals.reasoningTokens += usage.reasoningTokens;
  totals.draftedTokens += usage.draftedTokens ?? 0;
  totals.acceptedDraftTokens += usage.acceptedDraftTokens ?? 0;
}

export interface HostOptions {
  /** Starts an engine with a model (default: an engine process, ProcessEngine.start). */
  loader?: EngineLoader;
  precheck?: ModelPrecheck;
  log?: HostLog;
  /** Engine deaths within a minute after which it is not started again (default 3). */
  restartLimit?: number;
}

const DEFAULT_RESTART_LIMIT = 3;
/** How long /health waits for the engine process's fresh GPU figures before taking the last ones. */
const GPU_WAIT_MS = 50;
/** GPU figures younger than this are answered without asking the engine process first. */
const GPU_FRESH_MS = 1000;
const RESTART_WINDOW_MS = 60_000;

/** A switch whose new model failed after the old one was unloaded: nothing is loaded until HostTurn.restore. */
export class SwitchFailure extends AppError {
  constructor(
    message: string,
    readonly options: LlamaEngineOptions,
    readonly previous: LlamaEngineOptions,
    cause: unknown,
  ) {
    super("unavailable", message, { code: "model_load_failed", cause });
  }
}

/** What a turn of the load queue (EngineHost.exclusively) may do. */
export interface HostTurn {
  /** Loads the model, replacing the current one; a failure after the old one was unloaded is a SwitchFailure. */
  load(options: LlamaEngineOptions): Promise<Engine>;
  /** Loads the old model of a failed switch again; always rejects, with the error that reports the switch. */
  restore(failure: SwitchFailure): Promise<never>;
}

export class EngineHost {
  readonly usage: UsageTotals = { generations: 0, promptTokens: 0, cachedTokens: 0, completionTokens: 0, reasoningTokens: 0, draftedTokens: 0, acceptedDraftTokens: 0 };
  private current: TrackedEngine | null = null;
  /** The file being loaded, while a load or switch runs. */
  private pending: string | null = null;
  private lastError: string | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private gpu: GpuInfo | null = null;
  private readonly loader: EngineLoader;
  private readonly precheck: ModelPrecheck;
  private readonly log: HostLog;
  private readonly listeners = new Set<() => void>();
  private readonly restartLimit: number;
  /** The GPU's figures as the engine last gave them (gpuNow). */
  private lastGpu: GpuInfo | null = null;
  /** When lastGpu came (performance.now()). */
  private lastGpuAt = 0;
  /** The engine process's answer on its way, if one was asked for: one question at a time. */
  private gpuQuery: Promise<GpuInfo | null> | null = null;
  /** When the engine died lately (within RESTART_WINDOW_MS). */
  private deaths: number[] = [];
  /** How the engine died, while it is being started again. */
  private restartingAfter: string | null = null;

  constructor(options: HostOptions = {}) {
    this.loader = options.loader ?? ((o) => ProcessEngine.start(o));
    this.precheck = options.precheck ?? (async (path) => void (await readGgufSummary(path)));
    this.log = options.log ?? (() => undefined);
    this.restartLimit = options.restartLimit ?? DEFAULT_RESTART_LIMIT;
  }

  /** Uses an engine built elsewhere (tests use a scripted fake). */
  static of(engine: Engine | null, options: HostOptions = {}): EngineHost {
    const host = new EngineHost(options);
    if (engine) host.current = new TrackedEngine(engine, { modelPath: engine.status().model?.path ?? "" }, host.usage);
    return host;
  }

  /**
   * Loads the model, replacing the current one if there is one. Loads and switches run one at a time, in
   * the order asked. Throws AppError when the model cannot be loaded; the message says whether the previous
   * model is still serving.
   */
  load(options: LlamaEngineOptions): Promise<Engine> {
    return this.exclusively((turn) => turn.load(options).catch((err: unknown) => (err instanceof SwitchFailure ? turn.restore(err) : Promise.reject(err))));
  }

  /**
   * Runs `job` as one turn of the load queue: no other load, switch or unload starts until it ends (so a
   * caller that keeps state beside the engine, like the active-model setting, can undo a failed switch of
   * both at once). In the turn, `load` does not put the old model back when the new one fails: it rejects
   * with a SwitchFailure, and `restore` loads the old model again (rejecting with the error to report).
   * `job` must not call this host's load, unload or reload (they would wait for the turn it holds).
   */
  exclusively<T>(job: (turn: HostTurn) => Promise<T>): Promise<T> {
    let unrestored: SwitchFailure | null = null;
    const turn: HostTurn = {
      load: (options) =>
        this.switchTo(options).catch((err: unknown) => {
          if (err instanceof SwitchFailure) unrestored = err;
          throw err;
        }),
      restore: (failure) => {
        if (unrestored === failure) unrestored = null;
        return this.restore(failure);
      },
    };
    const run = this.queue.then(() => job(turn)).finally(() => {
      // A failed switch nobody restored leaves no model; /health says why.
      if (unrestored) this.lastError = (unrestored as SwitchFailure).message;
      this.changed();
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Lets running requests finish, then unloads the model (no model afterwards). */
  unload(): Promise<void> {
    const run = this.queue.then(async () => {
      const old = this.current;
      if (!old) return;
      const drained = old.retire();
      this.changed();
      await drained;
      this.current = null;
      this.lastError = null;
      await old.close();
      this.log("info", "Model unloaded.");
    }).finally(() => this.changed());
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Loads the current model's file again, with the same settings (after it was replaced on disk, say). */
  reload(): Promise<Engine> {
    const options = this.current?.options;
    if (!options) return Promise.reject(new AppError("unavailable", NO_MODEL_MESSAGE, { code: "model_not_loaded", retryAfter: 30 }));
    return this.load(options);
  }

  /** The engine, or a 503 saying why there is none. */
  engine(): Engine {
    if (this.pending !== null) throw loadingError();
    if (this.current) return this.current;
    throw new AppError("unavailable", this.lastError ? `${NO_MODEL_MESSAGE} The last load failed: ${this.lastError}` : NO_MODEL_MESSAGE, {
      code: "model_not_loaded",
      retryAfter: 30,
    });
  }

  /** Whether the engine died and is being started again (requests waiting for a sequence keep waiting). */
  get restarting(): boolean {
    return this.restartingAfter !== null;
  }

  /** Sequences that can run now: the loaded model's, or 0 while none is loaded or one is loading. */
  capacity(): number {
    if (this.pending !== null || !this.current || this.current.isRetired) return 0;
    return this.current.status().model?.sequences ?? 0;
  }

  /** Calls `listener` whenever capacity() may have changed (a load, switch or unload began or ended). */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The model file in use, and the one being loaded. */
  files(): { current: string | null; pending: string | null } {
    return { current: this.current?.options.modelPath || null, pending: this.pending };
  }

  /**
   * Speculation (issue 44): the loaded model's mode, and the guessed tokens the answers checked and took
   * since the server started; null while no model of the built-in engine is loaded (none, or upstream).
   */
  speculation(): SpeculationCounts | null {
    const mode = this.status().model?.speculation;
    if (!mode) return null;
    const { draftedTokens, acceptedDraftTokens } = this.usage;
    const draftModel = this.status().model?.draftModel?.name ?? null;
    return { mode, draftModel, draftedTokens, acceptedTokens: acceptedDraftTokens, acceptanceRate: draftedTokens > 0 ? acceptedDraftTokens / draftedTokens : null };
  }

  status(): EngineStatus {
    const base = this.current?.status();
    const gpu = base?.gpu ?? this.gpu;
    if (this.restartingAfter !== null)
      return { state: "loading", model: null, gpu, error: `The engine process stopped (${this.restartingAfter}); it is being started again with the same model.` };
    if (this.pending !== null) return { state: "loading", model: base?.model ?? null, gpu, error: this.lastError };
    if (base) return { ...base, error: this.lastError };
    return { state: this.lastError ? "error" : "no_model", model: null, gpu, error: this.lastError };
  }

  /** What the runtime runs on, with free memory as of now; null until a runtime has been loaded. */
  async gpuNow(): Promise<GpuInfo | null> {
    // The engine process has the runtime; this process has one only if it detected the GPU before any model.
    // The engine process answers between its own jobs (compiling a large grammar holds it a second): /health
    // waits for it at most GPU_WAIT_MS, then takes the last figures, and the answer still arriving updates them.
    // Figures less than GPU_FRESH_MS old are answered at once (and refreshed behind the answer): under load
    // (a flood of /health, the engine decoding) no request waits for the engine process at all.
    const engine = this.current?.inner;
    this.gpuQuery ??= (engine?.gpuNow ? engine.gpuNow() : currentGpu())
      .catch(() => null)
      .then((gpu) => {
        if (gpu) {
          this.lastGpu = gpu;
          this.lastGpuAt = performance.now();
        }
        return gpu;
      })
      .finally(() => (this.gpuQuery = null));
    const query = this.gpuQuery;
    if (this.lastGpu && performance.now() - this.lastGpuAt < GPU_FRESH_MS) return this.lastGpu;
    const fresh = await Promise.race([query, new Promise<null>((resolve) => setTimeout(() => resolve(null), GPU_WAIT_MS).unref())]);
    return fresh ?? this.lastGpu ?? this.status().gpu;
  }

  /**
   * What the runtime would run on with this GPU preference, where there is no host (the CLI's hardware
   * report): it loads the runtime in this process. A host answers gpuNow() instead.
   */
  static detectGpu(preference: GpuPreference = "auto"): Promise<GpuInfo> {
    return detectGpu(preference);
  }

  /** Records what GPU detection found before any model is loaded. */
  setDetectedGpu(gpu: GpuInfo): void {
    this.gpu = gpu;
  }

  async close(): Promise<void> {
    await this.queue;
    const engine = this.current;
    this.current = null;
    this.changed();
    await engine?.close();
  }

  private changed(): void {
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (err) {
        this.log("error", `A model-state listener failed: ${(err as Error).message}`);
      }
    }
  }

  private async switchTo(options: LlamaEngineOptions): Promise<Engine> {
    const old = this.current;
    try {
      await this.precheck(options.modelPath);
    } catch (err) {
      const message = `Cannot load ${options.modelPath}: ${(err as Error).message}`;
      this.lastError = old ? `${message} Still serving ${old.options.modelPath}.` : message;
      this.log("error", this.lastError);
      throw new AppError("invalid_request", this.lastError, { code: "invalid_model_file", cause: err });
    }
    this.pending = options.modelPath;
    this.changed();
    try {
      if (old) {
        this.log("info", `Switching to ${options.modelPath}: new requests get 503 until it is loaded; running requests finish first.`);
        await old.retire();
        this.current = null;
        await old.close();
      }
      let engine: Engine;
      try {
        engine = await this.loader(options);
      } catch (err) {
        const reason = (err as Error).message;
        if (!old) {
          this.lastError = reason;
          throw err;
        }
        // lastError is set by restore, or at the end of the turn when nothing is restored (exclusively).
        throw new SwitchFailure(`Could not switch to ${options.modelPath}: ${reason}`, options, old.options, err);
      }
      this.current = this.watch(new TrackedEngine(engine, options, this.usage));
      this.lastError = null;
      return this.current;
    } finally {
      this.pending = null;
    }
  }

  /** Loads the model a failed switch unloaded again, and rejects with the error that reports the switch. */
  private async restore(failure: SwitchFailure): Promise<never> {
    const { options, previous } = failure;
    const reason = (failure.cause as Error).message;
    // As during the switch: the file asked for is the one loading, until the old one serves again.
    this.pending = options.modelPath;
    this.changed();
    this.log("error", `Could not load ${options.modelPath}: ${reason} Loading ${previous.modelPath} again.`);
    try {
      this.current = this.watch(new TrackedEngine(await this.loader(previous), previous, this.usage));
      this.lastError = `Could not switch to ${options.modelPath}: ${reason} Still serving ${previous.modelPath}.`;
    } catch (restoreErr) {
      this.lastError = `Could not switch to ${options.modelPath}: ${reason} Loading ${previous.modelPath} again failed too: ${(restoreErr as Error).message}`;
    } finally {
      this.pending = null;
    }
    this.log("error", this.lastError);
    throw new AppError("unavailable", this.lastError, { code: "model_load_failed", cause: failure.cause });
  }

  /** Starts the engine again when it dies (the in-flight requests have failed by then). */
  private watch(engine: TrackedEngine): TrackedEngine {
    engine.inner.onCapacityChange?.(() => {
      if (this.current === engine) this.changed();
    });
    engine.inner.onFailure?.((reason) => {
      if (this.current !== engine) return;
      this.current = null;
      this.restart(engine.options, reason);
    });
    return engine;
  }

  private restart(options: LlamaEngineOptions, reason: string): void {
    const now = Date.now();
    this.deaths = [...this.deaths.filter((t) => now - t < RESTART_WINDOW_MS), now];
    if (this.deaths.length >= this.restartLimit) {
      this.restartingAfter = null;
      const stopped = `The engine process stopped ${this.deaths.length} times within a minute, so it is not started again. The last time: ${reason}.`;
      this.lastError = `${stopped} Load a model again once the cause is fixed (svc models use, or the window's Models page; or restart the server).`;
      this.log("error", this.lastError, `${stopped} Load a model again on the Model page once the cause is fixed.`);
      this.changed();
      return;
    }
    this.restartingAfter = reason;
    this.log("error", `The engine process stopped (${reason}); the requests it was running have failed. Loading ${options.modelPath} again.`);
    this.changed();
    this.load(options).then(
      () => {
        this.restartingAfter = null;
        this.log("info", `The engine process is running again with ${options.modelPath}.`);
        this.changed();
      },
      (err: unknown) => {
        const died = err instanceof AppError ? (err.details?.exit as string | undefined) : undefined;
        if (died !== undefined) {
          // It died again while loading: that counts as another death.
          const line = (err as AppError).details?.last_error_line as string | null | undefined;
          this.restart(options, line ? `${died} while loading the model: ${line}` : `${died} while loading the model`);
          return;
        }
        this.restartingAfter = null;
        this.lastError = `The engine process stopped (${reason}), and loading ${options.modelPath} again failed: ${(err as Error).message}`;
        this.log("error", this.lastError);
        this.changed();
      },
    );
  }
}
