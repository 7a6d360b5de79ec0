// The server as a library: `svc serve` and the Electron main process both call startServer.
import { open } from "node:fs/promises";
import type { FastifyInstance } from "fastify";
import type { ServeConfig } from "./config.js";
import { isLoopbackHost } from "./core/loopback.js";
import { EngineHost } from "./engine/engine-host.js";
import { detectGpu } from "./engine/llama-engine.js";
import { FilesService } from "./features/files/files-service.js";
import { KeysService } from "./features/keys/keys-service.js";
import { Ingest } from "./ingest/ingest.js";
import { IngestPool } from "./ingest/ingest-pool.js";
import { RECOMMENDED_MODEL } from "./features/models/model-sources.js";
import { GPU_PREFERENCE_SETTING, GPU_PREFERENCES, ModelsService } from "./features/models/models-service.js";
import type { GpuPreference } from "./engine/resource-plan.js";
import { buildApp } from "./http/app.js";
import { InferencePipeline } from "./pipeline/pipeline.js";
import { DEFAULT_ACCOUNT_NAME } from "./store/accounts-repository.js";
import { Store } from "./store/store.js";
import { packageVersion } from "./version.js";

export interface RunningServer {
  url: string;
  port: number;
  app: FastifyInstance;
  store: Store;
  keys: KeysService;
  engineHost: EngineHost;
  /** Model files, the active model, downloads and switching (the desktop app's main process calls this). */
  models: ModelsService;
  close(): Promise<void>;
}

export type Log = (level: "debug" | "info" | "warn" | "error", message: string) => void;

export class StartupError extends Error {
  override name = "StartupError";
}

const LEVELS = ["debug", "info", "warn", "error"] as const;

export function consoleLog(threshold: ServeConfig["logLevel"]): Log {
  const min = threshold === "silent" ? LEVELS.length : LEVELS.indexOf(threshold);
  return (level, message) => {
    if (LEVELS.indexOf(level) >= min) console.error(`[svc] ${level}: ${message}`);
  };
}

/** Fails early, with a plain message, for a model path that cannot be a GGUF model. */
async function checkModelFile(path: string): Promise<void> {
  let handle;
  try {
    handle = await open(path, "r");
  } catch (err) {
    throw new StartupError(`Cannot open the model file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}.`);
  }
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(4), 0, 4, 0);
    if (bytesRead < 4 || buffer.toString("ascii") !== "GGUF") throw new StartupError(`${path} is not a GGUF model file.`);
  } finally {
    await handle.close();
  }
}

export async function startServer(config: ServeConfig, log: Log = consoleLog(config.logLevel)): Promise<RunningServer> {
  if (config.modelPath) await checkModelFile(config.modelPath);
  const store = Store.open(config.dataDir, { nativeBinding: config.nativeBinding });
  const keys = new KeysService(store);
  store.accounts.ensure(DEFAULT_ACCOUNT_NAME);
  const engineHost = new EngineHost({ log });
  const storedGpu = store.settings.get(GPU_PREFERENCE_SETTING)?.value as GpuPreference | undefined;
  const gpu = config.gpu === "auto" && storedGpu && GPU_PREFERENCES.includes(storedGpu) ? storedGpu : config.gpu;
  const engineOptions = { threads: config.threads, sequences: config.sequences, contextSize: config.contextSize, gpu, log };
  const models = new ModelsService({ store, dataDir: config.dataDir, host: engineHost, engineOptions, log });
  try {
    if (config.modelPath) await engineHost.load({ ...engineOptions, modelPath: config.modelPath });
    else {
      const active = models.active();
      if (active)
        // The active model is a setting the user can fix while the server runs, so a failure here is not fatal:
        // the server starts, /health says why there is no model, and `svc models use` loads another.
        await engineHost.load({ ...engineOptions, modelPath: active.path }).catch((err: unknown) => {
          log("error", `Could not load the active model ${active.file}: ${(err as Error).message}`);
        });
      else {
        log(
          "warn",
          `No model yet: inference endpoints answer 503 until one is loaded. \`svc models pull\` downloads the recommended ` +
            `${RECOMMENDED_MODEL.title}, about 2.5 GB; \`svc models use FILE\` selects one; --model PATH.gguf (or SVC_MODEL) loads a file directly.`,
        );
      }
      if (!engineHost.files().current)
        // Report the GPU before any model loads (for /health and the desktop app's model picker).
        void detectGpu(gpu, log).then(
          (gpu) => {
            engineHost.setDetectedGpu(gpu);
            if (gpu.backend !== "cpu")
              log("info", `GPU: ${gpu.backend} (${gpu.devices.join(", ") || "unnamed device"}), ${(gpu.vramFreeBytes / 2 ** 30).toFixed(1)} GiB of VRAM free.`);
          },
          (err: unknown) => log("warn", `GPU detection failed: ${(err as Error).message}`),
        );
      models.follow();
    }
  } catch (err) {
    await models.close();
    store.close();
    throw new StartupError((err as Error).message);
  }

  const ingestPool = new IngestPool();
  const ingest = new Ingest(ingestPool);
  const files = new FilesService({ store, dataDir: config.dataDir, ingest, log });
  await files.start();
  const pipeline = new InferencePipeline(engineHost, { files, ingest });
  const app = await buildApp(
    { pipeline, keys, engineHost, files, version: packageVersion() },
    {
      allowedHosts: isLoopbackHost(config.host) ? "loopback" : "any",
      corsOrigins: config.corsOrigins ?? [],
      logger: config.logLevel === "debug" ? { level: "debug", stream: process.stderr } : false,
    },
  );
  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    await models.close();
    await files.close();
    await ingestPool.close();
    await engineHost.close();
    store.close();
    throw new StartupError(`Cannot listen on ${config.host}:${config.port}: ${(err as Error).message}`, { cause: err });
  }
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const hostForUrl = config.host.includes(":") ? `[${config.host}]` : config.host;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${hostForUrl}:${port}`,
    port,
    app,
    store,
    keys,
    engineHost,
    models,
    close() {
      closing ??= (async () => {
        await models.close();
        await app.close();
        await files.close();
        await ingestPool.close();
        await engineHost.close();
        store.close();
      })();
      return closing;
    },
  };
}
