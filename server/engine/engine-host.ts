// Holds the engine the server uses now. Requests ask the host for it; while no model is loaded (or one is
// loading) they get a 503 with Retry-After and a message saying how to provide one.
import { AppError } from "../core/errors.js";
import { LlamaEngine, type LlamaEngineOptions } from "./llama-engine.js";
import type { Engine, EngineStatus } from "./types.js";

export const NO_MODEL_MESSAGE =
  "No model is loaded. Start the server with --model PATH.gguf (or set SVC_MODEL), " +
  "or download one with `svc models pull` and select it with `svc models use`.";

export class EngineHost {
  private current: Engine | null = null;
  private loading: Promise<Engine> | null = null;
  private lastError: string | null = null;

  /** Uses an engine built elsewhere (tests use a scripted fake). */
  static of(engine: Engine | null): EngineHost {
    const host = new EngineHost();
    host.current = engine;
    return host;
  }

  async load(options: LlamaEngineOptions): Promise<Engine> {
    this.loading = LlamaEngine.load(options);
    try {
      const engine = await this.loading;
      const previous = this.current;
      this.current = engine;
      this.lastError = null;
      await previous?.close();
      return engine;
    } catch (err) {
      this.lastError = (err as Error).message;
      throw err;
    } finally {
      this.loading = null;
    }
  }

  /** The engine, or a 503 saying why there is none. */
  engine(): Engine {
    if (this.current) return this.current;
    if (this.loading) throw new AppError("unavailable", "The model is loading; try again shortly.", { code: "model_loading", retryAfter: 5 });
    throw new AppError("unavailable", NO_MODEL_MESSAGE, { code: "model_not_loaded", retryAfter: 30 });
  }

  status(): EngineStatus {
    if (this.current) return this.current.status();
    return {
      state: this.loading ? "loading" : this.lastError ? "error" : "no_model",
      model: null,
      gpu: null,
      active: 0,
      queued: 0,
      error: this.lastError,
    };
  }

  async close(): Promise<void> {
    const engine = this.current;
    this.current = null;
    await engine?.close();
  }
}
