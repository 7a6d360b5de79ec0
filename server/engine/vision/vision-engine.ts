// The engine process's handle on its vision process (vision-child.ts): starts it, loads the model with its
// projector there, and turns its messages into promises (token counts) and async streams (completions).
// If the vision process dies, what was running in it fails with a clear error and the next image request
// starts another.
import { fork, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { basename } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { AppError } from "../../core/errors.js";
import type { GpuInfo } from "../types.js";
import type { FromVision, VisionCompletion, VisionGpu, VisionLoadOptions, VisionMedia, VisionPlacement, VisionResult } from "./vision-protocol.js";

type Item =
  | { kind: "prompt"; promptTokens: number; cachedTokens: number; imageTokens: number[]; maxTokens: number }
  | { kind: "text"; text: string } | { kind: "done"; result: VisionResult } | { kind: "error"; error: Error };

export type VisionStep =
  | { prompt: { tokens: number; cached: number; imageTokens: number[]; maxTokens: number } }
  | { text: string }
  | { result: VisionResult };

/** The prompt leaves the context no room for an answer (the engine words the client's error). */
export class VisionPromptTooLong extends Error {
  constructor(readonly promptTokens: number) {
    super(`the prompt is ${promptTokens} tokens, more than the context holds with an answer`);
  }
}

function childEntry(): { entry: string; execArgv: string[] } {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith(".js")) return { entry: fileURLToPath(new URL("./vision-child.js", import.meta.url)), execArgv: [] };
  const source = fileURLToPath(new URL("./vision-child.ts", import.meta.url));
  if (!existsSync(source)) throw new Error(`The vision process's entry is missing beside ${here}.`);
  const tsx = new URL(`file://${createRequire(import.meta.url).resolve("tsx")}`).href;
  return { entry: source, execArgv: ["--import", tsx] };
}

/** The last lines the vision process wrote, for the report of its failure. */
const TAIL_LINES = 20;

export class VisionEngine {
  private readonly pending = new Map<number, (message: FromVision) => void>();
  private readonly tail: string[] = [];
  private nextId = 1;
  private dead: Error | null = null;

  /** Where the vision process runs, as it said once loaded. */
  placement: VisionPlacement = { devices: [], gpuLayers: 0 };

  private constructor(private readonly child: ChildProcess) {}

  static start(options: VisionLoadOptions): Promise<VisionEngine> {
    const { entry, execArgv } = childEntry();
    const child = fork(entry, [], { env: { ...process.env, ELECTRON_RUN_AS_NODE: "1" }, execArgv, stdio: ["ignore", "ignore", "pipe", "ipc"] });
    const engine = new VisionEngine(child);
    child.stderr!.on("data", (chunk: Buffer) => {
      for (const line of chunk.toString("utf8").split("\n")) if (line.trim()) engine.tail.push(line.trim());
      engine.tail.splice(0, Math.max(0, engine.tail.length - TAIL_LINES));
    });
    return new Promise((resolve, reject) => {
      let loaded = false;
      child.on("message", (raw) => {
        const message = raw as FromVision;
        if (message.type === "loaded") {
          loaded = true;
          engine.placement = message.placement;
          if (!message.imageSupport) {
            child.kill("SIGKILL");
            reject(new Error(`the projector ${options.projectorPath} does not read images`));
          } else resolve(engine);
        } else if (message.type === "load_failed") {
          child.kill("SIGKILL");
          reject(new Error(message.message));
        } else if ("id" in message) engine.pending.get(message.id)?.(message);
      });
      child.on("exit", (code, signal) => {
        const how = signal ? `signal ${signal}` : `exit code ${code}`;
        const last = engine.tail.at(-1);
        // The last line it wrote says why only when it says something went wrong (not llama.cpp's chatter).
        const error = new Error(`the vision process stopped (${how})${last && /error|abort|assert|fail|terminate/i.test(last) ? `: ${last}` : ""}`);
        engine.dead = error;
        if (!loaded) reject(error);
        for (const listener of engine.pending.values()) listener({ type: "failed", id: 0, message: error.message });
        engine.pending.clear();
      });
      child.send({ type: "load", options });
    });
  }

  get alive(): boolean {
    return this.dead === null;
  }

  /** The vision process's id (tests end it to see it come back). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The prompt's tokens with its images in place, and each image's share. */
  async tokenize(prompt: string, media: VisionMedia[]): Promise<{ tokens: number; imageTokens: number[] }> {
    const id = this.open();
    return new Promise((resolve, reject) => {
      this.pending.set(id, (message) => {
        this.pending.delete(id);
        if (message.type === "tokens") resolve({ tokens: message.tokens, imageTokens: message.imageTokens });
        else if (message.type === "failed") reject(visionError(message.message));
      });
      this.child.send({ type: "tokenize", id, prompt, media });
    });
  }

  /** Streams the completion's text, then its result; aborting the signal stops it. */
  async *complete(completion: VisionCompletion, signal: AbortSignal): AsyncGenerator<VisionStep, void, void> {
    const id = this.open();
    const items: Item[] = [];
    let wake: (() => void) | null = null;
    const push = (item: Item) => {
      items.push(item);
      wake?.();
      wake = null;
    };
    this.pending.set(id, (message) => {
      if (message.type === "prompt")
        push({ kind: "prompt", promptTokens: message.promptTokens, cachedTokens: message.cachedTokens, imageTokens: message.imageTokens, maxTokens: message.maxTokens });
      else if (message.type === "too_long") push({ kind: "error", error: new VisionPromptTooLong(message.promptTokens) });
      else if (message.type === "text") push({ kind: "text", text: message.text });
      else if (message.type === "done") push({ kind: "done", result: message.result });
      else if (message.type === "failed") push({ kind: "error", error: visionError(message.message) });
    });
    const onAbort = () => this.child.send({ type: "abort", id });
    signal.addEventListener("abort", onAbort, { once: true });
    this.child.send({ type: "complete", id, completion });
    try {
      while (true) {
        while (items.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        const item = items.shift()!;
        if (item.kind === "error") throw item.error;
        if (item.kind === "done") {
          yield { result: item.result };
          return;
        }
        if (item.kind === "prompt") yield { prompt: { tokens: item.promptTokens, cached: item.cachedTokens, imageTokens: item.imageTokens, maxTokens: item.maxTokens } };
        else yield { text: item.text };
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      this.pending.delete(id);
    }
  }

  close(): void {
    if (this.dead) return;
    this.child.send({ type: "close" });
    setTimeout(() => this.child.kill("SIGKILL"), 5000).unref();
  }

  private open(): number {
    if (this.dead) throw visionError(this.dead.message);
    return this.nextId++;
  }
}

/**
 * The engine process's vision process over its life: started with the model, and started again when it
 * died (a native abort, the OOM killer) by the next request that needs it.
 */
export class VisionSlot {
  private restart: Promise<VisionEngine> | null = null;

  private constructor(
    private readonly options: VisionLoadOptions,
    private current: VisionEngine,
  ) {}

  /** Starts the vision process; null (with a warning saying why) when the projector does not load. */
  static async open(options: VisionLoadOptions, log?: (level: "info" | "warn", message: string) => void): Promise<VisionSlot | null> {
    const started = performance.now();
    try {
      const engine = await VisionEngine.start(options);
      const { devices, gpuLayers, note } = engine.placement;
      const where = options.gpu && !note ? `on ${devices.join(", ")} with ${gpuLayers} layers of the model` : `on the CPU${note ? ` (${note})` : ""}`;
      log?.("info", `Vision: the projector ${basename(options.projectorPath)} is loaded in the vision process ${where} (${Math.round(performance.now() - started)} ms); images go to the model.`);
      return new VisionSlot(options, engine);
    } catch (err) {
      log?.("warn", `Vision: the projector ${options.projectorPath} could not be loaded (${(err as Error).message}); images are read with OCR.`);
      return null;
    }
  }

  /** Where the vision process runs now (placement of VisionEngine). */
  get placement(): VisionPlacement {
    return this.current.placement;
  }

  async engine(): Promise<VisionEngine> {
    if (this.current.alive) return this.current;
    this.restart ??= VisionEngine.start(this.options).finally(() => (this.restart = null));
    try {
      this.current = await this.restart;
    } catch (err) {
      throw new AppError("unavailable", `The vision process could not be started again: ${(err as Error).message}`, { code: "vision_failed", retryAfter: 5 });
    }
    return this.current;
  }

  close(): void {
    this.current.close();
  }
}

/** VRAM the vision process needs beside the layers it offloads: its KV cache and compute buffers. */
export const VISION_VRAM_RESERVE = 1024 ** 3;

/**
 * Where the vision process runs (docs/architecture.md, "Vision"). Where the text engine runs on a GPU, there
 * too, with its projector and as many of the model's layers as the text engine offloaded and the VRAM left
 * after the text engine's load holds (less VISION_VRAM_RESERVE and twice the projector): the weights are a
 * second copy in VRAM, where on the CPU both processes map the same file. Where the text engine runs on the
 * CPU, or no VRAM is left, on the CPU (absent).
 */
export function visionOffload(
  gpu: Pick<GpuInfo, "backend" | "vramFreeBytes"> | null,
  model: { gpuLayers?: number; totalLayers?: number; sizeBytes: number },
  projectorBytes: number,
): VisionGpu | undefined {
  const offloaded = model.gpuLayers ?? 0;
  if (!gpu || gpu.backend === "cpu" || offloaded <= 0) return undefined;
  const spare = gpu.vramFreeBytes - VISION_VRAM_RESERVE - 2 * projectorBytes;
  if (spare <= 0) return undefined;
  // The file's bytes shared by its layers, the embeddings and the output counted as one more.
  const perLayer = model.sizeBytes / ((model.totalLayers ?? offloaded) + 1);
  return { backend: gpu.backend, layers: Math.min(offloaded, Math.floor(spare / perLayer)) };
}

function visionError(message: string): AppError {
  return new AppError("unavailable", `The vision engine failed: ${message}`, { code: "vision_failed", retryAfter: 5 });
}
