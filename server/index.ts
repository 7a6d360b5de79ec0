// The server as a library: `svc serve` and the Electron main process both call startServer.
import { open } from "node:fs/promises";
import type { FastifyInstance } from "fastify";
import type { ServeConfig } from "./config.js";
import { isLoopbackHost } from "./core/loopback.js";
import { EngineHost, type EngineLoader } from "./engine/engine-host.js";
import type { EngineSpawner } from "./engine/engine-protocol.js";
import { ProcessEngine } from "./engine/process-engine.js";
import { UpstreamEngine } from "./engine/upstream-engine.js";
import { readUpstreamAffinitySetting, readUpstreamsSetting, UPSTREAM_AFFINITY_SETTING, UPSTREAMS_SETTING } from "./engine/upstream-settings.js";
import { WARM_START_SETTING, warmStartDir } from "./engine/warm-start.js";
import { detectGpu } from "./engine/llama-runtime.js";
import { AccountsService } from "./features/accounts/accounts-service.js";
import { AuditService } from "./features/audit/audit-service.js";
import { BatchService } from "./features/batches/batch-service.js";
import { FilesService } from "./features/files/files-service.js";
import { KeysService } from "./features/keys/keys-service.js";
import { Ingest } from "./ingest/ingest.js";
import { IngestPool } from "./ingest/ingest-pool.js";
import { RECOMMENDED_MODEL } from "./features/models/model-sources.js";
import { GPU_PREFERENCE_SETTING, GPU_PREFERENCES, ModelsService } from "./features/models/models-service.js";
import { resolveModelFile } from "./features/models/models-folder.js";
import type { GpuPreference } from "./engine/resource-plan.js";
import { buildApp } from "./app.js";
import { lanWarning, MachineNames } from "./http/lan.js";
import { InferencePipeline, schedulerForHost } from "./pipeline/pipeline.js";
import type { Scheduler } from "./pipeline/scheduler.js";
import { DEFAULT_ACCOUNT_NAME } from "./store/accounts-repository.js";
import { DataDirLock, DataDirLockedError } from "./store/data-dir-lock.js";
import { Store } from "./store/store.js";
import type { Log } from "./core/log.js";
import { packageVersion } from "./core/version.js";

export interface RunningServer {
  url: string;
  port: number;
  app: FastifyInstance;
  store: Store;
  keys: KeysService;
  /** Accounts: the operator's consoles (window, CLI) and the account holders' console (/v1/console). */
  accounts: AccountsService;
  audit: AuditService;
  engineHost: EngineHost;
  /** Admission, priorities and per-account limits for every inference. */
  scheduler: Scheduler;
  /** Model files, the active model, downloads and switching (the desktop app's main process calls this). */
  models: ModelsService;
  /** Message batches and the worker that runs them. */
  batches: BatchService;
  /**
   * The upstream engines it generates on (their addresses; null: the built-in engine) and with which affinity,
   * and whether the start-up options (flags, environment) chose them, so the window's setting waits.
   */
  upstreams: { urls: string[] | null; affinity: boolean; fromStartup: boolean; affinityFromStartup: boolean };
  close(): Promise<void>;
}

export type { Log };

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

/** Listening beyond loopback exposes the API to the network: only with --lan (the window's LAN switch sets it). */
function checkExposure(config: ServeConfig): void {
  if (isLoopbackHost(config.host) || config.lan) return;
  throw new StartupError(
    `--host ${config.host} would let other machines on the network reach the API. Add --lan (or set SVC_LAN=1) to ` +
      "confirm; without it the server listens on this machine only (--host 127.0.0.1).",
  );
}

function lockDataDir(config: ServeConfig): DataDirLock {
  try {
    return DataDirLock.acquire(config.dataDir, { nativeBinding: config.nativeBinding });
  } catch (err) {
    if (err instanceof DataDirLockedError) throw new StartupError(err.message, { cause: err });
    throw err;
  }
}

/** The window's upstream setting ([{url, key?}] as JSON), if it has one that is valid. */
function storedUpstreams(store: Store, log: Log): ServeConfig["upstreams"] {
  try {
    return readUpstreamsSetting(store.settings.get(UPSTREAMS_SETTING)?.value);
  } catch (err) {
    log("error", `The upstream setting is not valid (${(err as Error).message}); using the built-in engine.`);
    return undefined;
  }
}

export interface StartOptions {
  /** Starts the engine process (default: a forked Node process); the desktop app passes Electron's utilityProcess. */
  spawnEngine?: EngineSpawner;
  /**
   * Starts the engine instead of an engine process (with no upstreams): bench:trace loads it in the server's
   * own process (LlamaEngine.load) to time the decodes at node-llama-cpp's binding.
   */
  loadEngine?: EngineLoader;
}

export async function startServer(config: ServeConfig, log: Log = consoleLog(config.logLevel), options: StartOptions = {}): Promise<RunningServer> {
  checkExposure(config);
  if (config.modelPath) await checkModelFile(config.modelPath);
  // --draft-model: a path, or a file in the models folder (as the window's per-model setting names one).
  const draftModelPath = config.draftModel ? resolveModelFile(config.dataDir, config.draftModel).path : undefined;
  if (draftModelPath) await checkModelFile(draftModelPath);
  const lock = lockDataDir(config);
  let store: Store;
  try {
    store = Store.open(config.dataDir, { nativeBinding: config.nativeBinding });
  } catch (err) {
    lock.release();
    throw err;
  }
  const keys = new KeysService(store);
  store.accounts.ensure(DEFAULT_ACCOUNT_NAME);
  const spawn = options.spawnEngine;
  // Upstream inference servers (--upstream, or the window's setting) instead of the built-in engine process.
  const upstreams = config.upstreams ?? storedUpstreams(store, log);
  const affinity = config.upstreamAffinity ?? readUpstreamAffinitySetting(store.settings.get(UPSTREAM_AFFINITY_SETTING)?.value) ?? true;
  const engineHost = new EngineHost({
    log,
    restartLimit: config.engineRestartLimit,
    loader: upstreams ? (o) => UpstreamEngine.load({ modelPath: o.modelPath, upstreams, affinity, log }) : (options.loadEngine ?? ((o) => ProcessEngine.start({ ...o, spawn }))),
  });
  if (upstreams) log("info", `Generating on ${upstreams.length} upstream(s): ${upstreams.map((u) => u.url).join(", ")}; switching models is theirs to do.`);
  const storedGpu = store.settings.get(GPU_PREFERENCE_SETTING)?.value as GpuPreference | undefined;
  const gpu = config.gpu === "auto" && storedGpu && GPU_PREFERENCES.includes(storedGpu) ? storedGpu : config.gpu;
  // Warm start: the flag or environment, else the window's setting; off unless turned on (warm-start.ts).
  // The choice is part of the options every later load takes (ModelsService.setWarmStart changes it).
  const warm = config.warmStart ?? store.settings.get(WARM_START_SETTING)?.value === "on";
  const warmStartMaxBytes = (config.warmStartMaxGb ?? 8) * 2 ** 30;
  const warmStart = warm ? { dir: warmStartDir(config.dataDir), maxBytes: warmStartMaxBytes } : undefined;
  const engineOptions = { threads: config.threads, sequences: config.sequences, contextSize: config.contextSize, gpu, mmap: config.mmap, warmStart, speculation: config.speculation, draftModelPath, log };
  const models = new ModelsService({
    store,
    dataDir: config.dataDir,
    host: engineHost,
    engineOptions,
    log,
    warmStart: { maxBytes: warmStartMaxBytes, forced: config.warmStart !== undefined },
  });
  // The model loads in the engine process while this one builds the rest (files, the app's routes and their
  // schemas): on two cores the two overlap. Listening waits for the load, so a --model that cannot load still
  // stops the start before anything listens.
  const loading = (async () => {
    if (config.modelPath) await engineHost.load(models.loadOptions(config.modelPath));
    else {
      const active = models.active();
      if (active)
        // The active model is a setting the user can fix while the server runs, so a failure here is not fatal:
        // the server starts, /health says why there is no model, and `svc models use` loads another.
        await engineHost.load(models.loadOptions(active.path)).catch((err: unknown) => {
          log("error", `Could not load the active model ${active.file}: ${(err as Error).message}`);
        });
      else {
        log(
          "warn",
          `No model yet: inference endpoints answer 503 until one is loaded. \`svc models pull\` downloads the recommended ` +
            `${RECOMMENDED_MODEL.title}, about 2.5 GB; \`svc models use FILE\` selects one; --model PATH.gguf (or SVC_MODEL) loads a file directly.`,
          `No model yet: inference endpoints answer 503 until one is loaded. Download the recommended ${RECOMMENDED_MODEL.title} (about 2.5 GB), or pick another, on the Model page.`,
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
  })();
  // Awaited below, after the app is built; handled there.
  loading.catch(() => undefined);

  const ingestPool = new IngestPool();
  // Transcripts use the speech model set now (`svc models pull --speech` or `use --speech`, this process or another).
  const ingest = new Ingest(ingestPool, () => ({ speechModelPath: models.active("speech")?.path ?? null }));
  const files = new FilesService({ store, dataDir: config.dataDir, ingest, log, imageInput: () => (engineHost.status().model?.vision ? "vision" : "ocr") });
  await files.start();
  const scheduler = schedulerForHost(engineHost, { accountLimit: config.concurrencyLimit, maxQueue: config.queueLimit });
  const pipeline = new InferencePipeline(engineHost, { scheduler, log, files, ingest });
  const accounts = new AccountsService(store, keys, config.consoleSessionMinutes ? { session: { idleSeconds: config.consoleSessionMinutes * 60 } } : {});
  const audit = new AuditService(store, { retentionDays: config.auditRetentionDays, log });
  const batches = new BatchService({ repo: store.batches, pipeline, log });
  const lan = !isLoopbackHost(config.host);
  const app = await buildApp(
    {
      pipeline,
      keys,
      accounts,
      audit,
      engineHost,
      batches,
      files,
      agent: { runsPerAccount: config.agentRunsLimit },
      version: packageVersion(),
      log,
      observers: [audit.observer],
      streamWriteTimeoutMs: config.streamWriteTimeoutMs,
    },
    {
      allowedHosts: lan ? "lan" : "loopback",
      extraHosts: config.allowedHosts ?? [],
      corsOrigins: config.corsOrigins ?? [],
      connections: config.connections,
      logger: config.logLevel === "debug" ? { level: "debug", stream: process.stderr } : false,
    },
  );
  // A start that fails from here on (the model's load, or listening) closes what it opened.
  const abandon = async (): Promise<void> => {
    await app.close();
    await models.close();
    await files.close();
    await ingestPool.close();
    await engineHost.close();
    audit.close();
    store.close();
    lock.release();
  };
  try {
    await loading;
  } catch (err) {
    await abandon();
    throw new StartupError((err as Error).message);
  }
  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    await abandon();
    throw new StartupError(`Cannot listen on ${config.host}:${config.port}: ${(err as Error).message}`, { cause: err });
  }
  audit.startRetention();
  // After listen: batches left running by the last stop resume now.
  batches.start();
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const hostForUrl = config.host.includes(":") ? `[${config.host}]` : config.host;
  const url = `http://${hostForUrl}:${port}`;
  lock.listening(url);
  if (lan) log("warn", lanWarning(config.host, port, new MachineNames(config.allowedHosts)));
  let closing: Promise<void> | null = null;
  return {
    url,
    port,
    app,
    store,
    keys,
    accounts,
    audit,
    engineHost,
    scheduler,
    models,
    batches,
    upstreams: {
      urls: upstreams ? upstreams.map((u) => u.url) : null,
      affinity,
      fromStartup: config.upstreams !== undefined,
      affinityFromStartup: config.upstreamAffinity !== undefined,
    },
    close() {
      closing ??= (async () => {
        await models.close();
        // Running batch requests stop and go back to pending: they run again on the next start.
        await batches.close();
        await app.close();
        audit.close();
        await files.close();
        await ingestPool.close();
        await engineHost.close();
        store.close();
        lock.release();
      })();
      return closing;
    },
  };
}
