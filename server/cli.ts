// `svc`: the headless server and its management commands.
import { parseArgs } from "node:util";
import { ConfigError, defaultDataDir, resolveServeConfig, type Flags } from "./config.js";
import { AppError } from "./core/errors.js";
import { KeysService, type KeyInfo } from "./features/keys/keys-service.js";
import { Store } from "./store/store.js";
import { packageVersion } from "./version.js";

const USAGE = `svc ${packageVersion()}: a local LLM API server (Chat Completions, Responses, Messages).

Usage:
  svc serve [--host 127.0.0.1] [--port N|0] [--data-dir DIR] [--model PATH.gguf] [--threads N]
            [--sequences N] [--context-size N] [--gpu auto|cuda|vulkan|metal|cpu] [--log-level LEVEL]
            [--cors-origins ORIGIN,...] [--concurrency-limit N] [--queue-limit N] [--lan] [--allowed-hosts NAME,...]
            [--headers-timeout S] [--request-timeout S] [--keep-alive-timeout S] [--stream-write-timeout S]
            [--max-connections N]
  svc keys create [--data-dir DIR] [--account NAME] [--name LABEL] [--reasoning-trace]
  svc keys list [--data-dir DIR] [--account NAME] [--json]
  svc keys revoke KEY_ID [--data-dir DIR]
  svc keys update KEY_ID --reasoning-trace on|off [--data-dir DIR]
  svc models list [--data-dir DIR] [--json]
  svc models pull [hf:user/repo:quant | hf:user/repo/file.gguf | https://URL | recommended] [--sha256 HEX] [--data-dir DIR]
  svc models use FILE [--data-dir DIR]
  svc models remove FILE [--force] [--data-dir DIR]
  svc models bench-threads [--model FILE] [--threads 1,2,4] [--tokens N] [--data-dir DIR]

A --host other than loopback needs --lan (the API is then reachable from the network; see docs/security.md).
Without --model, \`svc serve\` loads the active model (\`svc models use\`) and follows it: a running server
switches when it changes. SIGHUP reloads the model.
Environment: SVC_HOST, SVC_PORT, SVC_DATA_DIR, SVC_MODEL, SVC_THREADS, SVC_SEQUENCES, SVC_CONTEXT_SIZE,
SVC_GPU, SVC_LOG_LEVEL, SVC_CORS_ORIGINS, SVC_CONCURRENCY_LIMIT, SVC_QUEUE_LIMIT, SVC_LAN, SVC_ALLOWED_HOSTS,
SVC_HEADERS_TIMEOUT, SVC_REQUEST_TIMEOUT, SVC_KEEP_ALIVE_TIMEOUT, SVC_STREAM_WRITE_TIMEOUT, SVC_MAX_CONNECTIONS,
SVC_DOWNLOAD_STALL_TIMEOUT. Flags win over the environment.
Default data dir: ${defaultDataDir()}
`;

class UsageError extends Error {}

async function serve(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: "string" },
      port: { type: "string" },
      "data-dir": { type: "string" },
      model: { type: "string" },
      threads: { type: "string" },
      sequences: { type: "string" },
      "context-size": { type: "string" },
      gpu: { type: "string" },
      "log-level": { type: "string" },
      "cors-origins": { type: "string" },
      "concurrency-limit": { type: "string" },
      "queue-limit": { type: "string" },
      lan: { type: "boolean" },
      "allowed-hosts": { type: "string" },
      "headers-timeout": { type: "string" },
      "request-timeout": { type: "string" },
      "keep-alive-timeout": { type: "string" },
      "stream-write-timeout": { type: "string" },
      "max-connections": { type: "string" },
    },
    strict: true,
  });
  const config = resolveServeConfig(values as Flags);
  // The server (Fastify, node-llama-cpp) loads only for `serve`, so the other commands start fast.
  const { consoleLog, startServer } = await import("./index.js");
  const log = consoleLog(config.logLevel);
  // A promise some request path forgot to handle must not take the server down with every other request.
  process.on("unhandledRejection", (reason) => log("error", `Unhandled rejection (a bug; the server keeps running): ${(reason as Error)?.stack ?? String(reason)}`));
  const server = await startServer(config, log);
  console.log(`svc listening on ${server.url} (data dir ${config.dataDir})`);
  console.log(`  Chat Completions and Responses: base URL ${server.url}/v1   Messages: base URL ${server.url}`);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      log("warn", `${signal} again: exiting now.`);
      process.exit(130);
    }
    stopping = true;
    log("info", `${signal}: finishing requests in flight, then stopping.`);
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log("error", `Shutdown failed: ${(err as Error).message}`);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
  // SIGHUP reloads the model (the active one, or the --model file), as daemons reload their configuration.
  if (process.platform !== "win32")
    process.on("SIGHUP", () => {
      if (stopping) return;
      log("info", "SIGHUP: reloading the model.");
      void server.models.reload();
    });
}

function describeKey(k: KeyInfo): string {
  const state = k.revoked_at !== null ? "revoked" : "active";
  const trace = k.reasoning_trace ? " trace:on" : "";
  return `${k.id}  ${k.hint}  account:${k.account}  ${state}${trace}${k.name ? `  "${k.name}"` : ""}`;
}

function withKeys<T>(dataDir: string | undefined, action: (keys: KeysService) => T): T {
  const store = Store.open(dataDir ?? process.env.SVC_DATA_DIR ?? defaultDataDir());
  try {
    return action(new KeysService(store));
  } finally {
    store.close();
  }
}

function parseOnOff(value: string | undefined): boolean {
  if (value === "on" || value === "true") return true;
  if (value === "off" || value === "false") return false;
  throw new UsageError("--reasoning-trace takes on or off.");
}

function keys(argv: string[]): void {
  const [command, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    options: {
      "data-dir": { type: "string" },
      account: { type: "string" },
      name: { type: "string" },
      json: { type: "boolean" },
      "reasoning-trace": { type: command === "update" ? "string" : "boolean" },
    },
    allowPositionals: true,
    strict: true,
  });
  const dataDir = values["data-dir"];
  switch (command) {
    case "create": {
      const created = withKeys(dataDir, (k) =>
        k.create({ account: values.account, name: values.name, reasoningTrace: values["reasoning-trace"] === true }),
      );
      console.log(`Created ${created.id} for account '${created.account}'${created.reasoning_trace ? " (reasoning trace on)" : ""}.`);
      console.log("This key is shown once; store it now:");
      console.log(created.key);
      return;
    }
    case "list": {
      const list = withKeys(dataDir, (k) => k.list(values.account));
      if (values.json) console.log(JSON.stringify(list, null, 2));
      else if (list.length === 0) console.log("No keys yet. Create one with `svc keys create`.");
      else for (const k of list) console.log(describeKey(k));
      return;
    }
    case "revoke": {
      const id = positionals[0];
      if (!id) throw new UsageError("svc keys revoke needs a key id (see `svc keys list`).");
      console.log(describeKey(withKeys(dataDir, (k) => k.revoke(id))));
      return;
    }
    case "update": {
      const id = positionals[0];
      if (!id) throw new UsageError("svc keys update needs a key id (see `svc keys list`).");
      const trace = values["reasoning-trace"];
      if (trace === undefined) throw new UsageError("svc keys update needs --reasoning-trace on|off.");
      console.log(describeKey(withKeys(dataDir, (k) => k.setReasoningTrace(id, parseOnOff(String(trace))))));
      return;
    }
    default:
      throw new UsageError(`Unknown keys command '${command ?? ""}'. Use create, list, revoke or update.`);
  }
}

export async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  switch (command) {
    case "serve":
      return serve(rest);
    case "keys":
      return keys(rest);
    case "models": {
      // Loaded only here: it pulls in node-llama-cpp, which `svc keys` does not need.
      const { runModelsCommand } = await import("./features/models/models-cli.js");
      // Exit explicitly: the downloader may leave idle connections that would keep the process alive.
      process.exit(await runModelsCommand(rest, defaultDataDir()));
    }
    case "--version":
    case "-v":
      console.log(packageVersion());
      return;
    case undefined:
    case "help":
    case "--help":
    case "-h":
      console.log(USAGE);
      return;
    default:
      throw new UsageError(`Unknown command '${command}'.`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (
    err instanceof UsageError ||
    (err instanceof Error && err.name === "UsageError") ||
    (err instanceof TypeError && (err as NodeJS.ErrnoException).code?.startsWith("ERR_PARSE_ARGS"))
  ) {
    console.error(`svc: ${err.message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (err instanceof ConfigError || err instanceof AppError || (err instanceof Error && err.name === "StartupError")) {
    console.error(`svc: ${err.message}`);
    process.exit(1);
  }
  console.error(err);
  process.exit(1);
});
