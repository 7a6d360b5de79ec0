// `svc`: the headless server and its management commands.
import { parseArgs } from "node:util";
import { ConfigError, defaultDataDir, resolveServeConfig, type Flags } from "./config.js";
import { isAddressInUse, isPortTaken } from "./core/port.js";
import { AppError } from "./core/errors.js";
import { AccountsService, type AccountInfo } from "./features/accounts/accounts-service.js";
import { KeysService, type KeyInfo } from "./features/keys/keys-service.js";
import { Store } from "./store/store.js";
import { packageVersion } from "./core/version.js";

const SERVE_USAGE = `  svc serve [--host 127.0.0.1] [--port N|0] [--data-dir DIR] [--model PATH.gguf] [--threads N]
            [--sequences N] [--context-size N] [--gpu auto|cuda|vulkan|metal|cpu] [--mmap auto|on|off]
            [--log-level LEVEL]
            [--cors-origins ORIGIN,...] [--concurrency-limit N] [--queue-limit N] [--agent-runs-limit N]
            [--lan] [--allowed-hosts NAME,...]
            [--headers-timeout S] [--request-timeout S] [--keep-alive-timeout S] [--stream-write-timeout S]
            [--max-connections N] [--connections-per-client N] [--idle-connections-per-client N]
            [--audit-retention-days N] [--console-session-minutes N] [--engine-restart-limit N]
            [--warm-start on|off] [--warm-start-max-gb N]`;
const KEYS_USAGE = `  svc keys create [--data-dir DIR] [--account NAME] [--name LABEL] [--reasoning-trace]
  svc keys list [--data-dir DIR] [--account NAME] [--json]
  svc keys revoke KEY_ID [--data-dir DIR]
  svc keys update KEY_ID --reasoning-trace on|off [--data-dir DIR]`;
const ACCOUNTS_USAGE = `  svc accounts create NAME [--key-name LABEL] [--data-dir DIR] [--json]
  svc accounts list [--data-dir DIR] [--json]
  svc accounts disable NAME [--data-dir DIR]
  svc accounts enable NAME [--data-dir DIR]
  svc accounts reset-password NAME [--data-dir DIR] [--json]`;
export const MODELS_USAGE = `  svc models list [--data-dir DIR] [--json]
  svc models pull [hf:user/repo:quant | hf:user/repo/file.gguf | https://URL | recommended] [--sha256 HEX] [--data-dir DIR]
  svc models use FILE [--data-dir DIR]
  svc models remove FILE [--force] [--data-dir DIR]
  svc models pull --speech [base | small | ... | hf:user/repo/file.bin | https://URL] [--sha256 HEX] [--data-dir DIR]
  svc models use --speech FILE | svc models remove --speech FILE [--force] [--data-dir DIR]
  svc models bench-threads [--model FILE] [--threads 1,2,4] [--tokens N] [--data-dir DIR]`;
const ENGINE_USAGE = `  svc engine [status] | svc engine build | svc engine remove
  svc engine warm-start [list | clear] [--data-dir DIR]`;

const SERVE_HELP = `Usage:
${SERVE_USAGE}

Starts the API server: http://127.0.0.1:8787 unless --port says otherwise (0 picks a free port).
Without --model it loads the active model (\`svc models use\`) and follows it: a running server switches when
it changes. SIGHUP reloads the model; Ctrl+C finishes the requests in flight, then stops.
Environment: SVC_HOST, SVC_PORT, SVC_DATA_DIR, SVC_MODEL, SVC_THREADS, SVC_SEQUENCES, SVC_CONTEXT_SIZE,
SVC_GPU, SVC_MMAP, SVC_LOG_LEVEL, SVC_CORS_ORIGINS, SVC_CONCURRENCY_LIMIT, SVC_QUEUE_LIMIT, SVC_AGENT_RUNS_LIMIT,
SVC_ENGINE_RESTART_LIMIT, SVC_WARM_START, SVC_WARM_START_MAX_GB, SVC_AUDIT_RETENTION_DAYS, SVC_CONSOLE_SESSION_MINUTES. Flags win over the environment.
--mmap: auto reads the model into memory, in huge pages, on Linux with transparent huge pages when it runs
on the CPU and fits (faster decoding), and maps the file elsewhere; on always maps the file (memory the
kernel can reclaim), off always reads it in.
Default data dir: ${defaultDataDir()}
`;

const KEYS_HELP = `Usage:
${KEYS_USAGE}

API keys for the server's clients. A key is printed once, on the last line of \`svc keys create\`; only its
SHA-256 is stored, so a lost key cannot be shown again: create a new one and revoke the old.
`;

const ACCOUNTS_HELP = `Usage:
${ACCOUNTS_USAGE}

Accounts for the people and tools that use this server. \`svc accounts create\` prints a temporary password
and the account's first API key, both once: hand them to the holder, who logs in at /v1/console on the
server, chooses a password and manages their own keys there. Disabling an account stops its keys at once.
`;

const MODELS_HELP = `Usage:
${MODELS_USAGE}

Models live in the models folder of the data dir (${defaultDataDir()}/models unless --data-dir or
SVC_DATA_DIR says otherwise). \`svc models pull\` with no source downloads the recommended model;
\`svc models list\` shows what is there and marks with * the one \`svc serve\` loads.
Speech models (whisper.cpp, for transcripts of uploaded audio and video) live in models/speech:
\`svc models pull --speech\` downloads whisper base (about 148 MB); without one, uploads say that no transcript
is available.
`;

const ENGINE_HELP = `Usage:
${ENGINE_USAGE}

The server runs the model with llama.cpp through node-llama-cpp, whose prebuilt CPU binaries come from an
older compiler. \`svc engine build\` compiles them again on this machine from the same llama.cpp source
(Linux; needs cmake, make, git, patch and a C++ compiler: \`sudo apt-get install cmake build-essential git
patch\`; about 10 minutes on 2 cores), with four changes of ours to node-llama-cpp: llama.cpp's worker
threads are kept from one token to the next, a lone answer's tokens are decoded and sampled by a thread of
their own, several answers' tokens are sampled in the job that decodes them, and a step of a few answers
multiplies each weight row by all of their tokens at once. On a 2-core Zen 4 such a build read prompts 1.7
to 1.9 times as fast as the prebuilt binaries, generated one answer faster than llama.cpp's own
llama-server on the same model file and four at once 1.2 to 1.9 times as fast (docs/performance.md). It is
portable like them (a library per CPU family, the right one chosen at load) and runs the CPU from the
server's next start; a GPU backend keeps its prebuilt binaries.
/health says which runs ("gpu": {"build": "local"} or "prebuilt"). \`svc engine remove\` deletes the
build: the server goes back to the prebuilt binaries. Reinstalling node_modules (npm ci) removes it too.

\`svc engine warm-start\` lists the prompt prefixes warm start saved (\`svc serve --warm-start on\`: the KV
cache of long system prompts and tool definitions, restored after a restart); \`svc engine warm-start clear\`
removes them.
`;

const USAGE = `svc ${packageVersion()}: a local LLM API server (Chat Completions, Responses, Messages).

Usage:
${SERVE_USAGE}
${KEYS_USAGE}
${ACCOUNTS_USAGE}
${MODELS_USAGE}
${ENGINE_USAGE}
  svc COMMAND --help       more about one command

A --host other than loopback needs --lan (the API is then reachable from the network; see docs/security.md).
Without --model, \`svc serve\` loads the active model (\`svc models use\`) and follows it: a running server
switches when it changes. SIGHUP reloads the model.
Environment: SVC_HOST, SVC_PORT, SVC_DATA_DIR, SVC_MODEL, SVC_THREADS, SVC_SEQUENCES, SVC_CONTEXT_SIZE,
SVC_GPU, SVC_MMAP, SVC_LOG_LEVEL, SVC_CORS_ORIGINS, SVC_CONCURRENCY_LIMIT, SVC_QUEUE_LIMIT, SVC_AGENT_RUNS_LIMIT,
SVC_ENGINE_RESTART_LIMIT, SVC_WARM_START, SVC_WARM_START_MAX_GB, SVC_LAN, SVC_ALLOWED_HOSTS, SVC_HEADERS_TIMEOUT, SVC_REQUEST_TIMEOUT, SVC_KEEP_ALIVE_TIMEOUT, SVC_STREAM_WRITE_TIMEOUT, SVC_MAX_CONNECTIONS,
SVC_CONNECTIONS_PER_CLIENT, SVC_IDLE_CONNECTIONS_PER_CLIENT,
SVC_AUDIT_RETENTION_DAYS, SVC_CONSOLE_SESSION_MINUTES, SVC_DOWNLOAD_STALL_TIMEOUT. Flags win over the environment.
Account holders log in to their console at <base URL>/v1/console.
Default data dir: ${defaultDataDir()}
`;

const HELP_FLAGS = new Set(["--help", "-h", "help"]);

/** `svc X --help`, `svc X -h` and `svc X help` (as the first argument) ask for help, not an action. */
function wantsHelp(argv: string[]): boolean {
  return argv.length > 0 && (HELP_FLAGS.has(argv[0]!) || argv.includes("--help") || argv.includes("-h"));
}

class UsageError extends Error {}

async function serve(argv: string[]): Promise<void> {
  if (wantsHelp(argv)) {
    console.log(SERVE_HELP);
    return;
  }
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
      mmap: { type: "string" },
      "log-level": { type: "string" },
      "cors-origins": { type: "string" },
      "concurrency-limit": { type: "string" },
      "queue-limit": { type: "string" },
      "agent-runs-limit": { type: "string" },
      "engine-restart-limit": { type: "string" },
      "warm-start": { type: "string" },
      "warm-start-max-gb": { type: "string" },
      "audit-retention-days": { type: "string" },
      "console-session-minutes": { type: "string" },
      lan: { type: "boolean" },
      "allowed-hosts": { type: "string" },
      "headers-timeout": { type: "string" },
      "request-timeout": { type: "string" },
      "keep-alive-timeout": { type: "string" },
      "stream-write-timeout": { type: "string" },
      "max-connections": { type: "string" },
      "connections-per-client": { type: "string" },
      "idle-connections-per-client": { type: "string" },
    },
    strict: true,
  });
  const config = resolveServeConfig(values as Flags);
  // Before the model loads (seconds to minutes): a port already in use fails now, not after the load.
  if (config.port !== 0 && (await isPortTaken(config.host, config.port))) throw portInUse(config.host, config.port);
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

function portInUse(host: string, port: number): ConfigError {
  return new ConfigError(
    `Port ${port} on ${host} is already in use: another \`svc serve\` or the desktop app may be running there ` +
      `(its API answers at http://${host.includes(":") ? `[${host}]` : host}:${port}/v1). Stop it, or start this server on another port: ` +
      `\`--port 0\` picks a free one (or --port N, SVC_PORT=N).`,
  );
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
  if (argv.length === 0 || wantsHelp(argv)) {
    console.log(KEYS_HELP);
    return;
  }
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

function describeAccount(a: AccountInfo): string {
  const login = !a.can_log_in ? "no console login" : a.must_change_password ? "temporary password" : "password set";
  return `${a.name}  ${a.status}  ${a.active_keys} active key(s)  ${login}  ${a.id}`;
}

async function withAccounts<T>(dataDir: string | undefined, action: (accounts: AccountsService) => Promise<T> | T): Promise<T> {
  const store = Store.open(dataDir ?? process.env.SVC_DATA_DIR ?? defaultDataDir());
  try {
    return await action(new AccountsService(store, new KeysService(store)));
  } finally {
    store.close();
  }
}

async function accounts(argv: string[]): Promise<void> {
  if (argv.length === 0 || wantsHelp(argv)) {
    console.log(ACCOUNTS_HELP);
    return;
  }
  const [command, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    options: { "data-dir": { type: "string" }, "key-name": { type: "string" }, json: { type: "boolean" } },
    allowPositionals: true,
    strict: true,
  });
  const dataDir = values["data-dir"];
  const name = positionals[0];
  const needName = () => {
    if (!name) throw new UsageError(`svc accounts ${command} needs an account name (see \`svc accounts list\`).`);
    return name;
  };
  switch (command) {
    case "create": {
      const created = await withAccounts(dataDir, (a) => a.create(needName(), { keyName: values["key-name"] }));
      if (values.json) return console.log(JSON.stringify(created, null, 2));
      console.log(`Created account '${created.account.name}' (${created.account.id}) with its first key ${created.key.id}.`);
      console.log("Both are shown once; hand them to the account holder now.");
      console.log(`Temporary password (the first console login must change it): ${created.temporary_password}`);
      console.log(`API key: ${created.key.key}`);
      return;
    }
    case "list": {
      const list = await withAccounts(dataDir, (a) => a.list());
      if (values.json) console.log(JSON.stringify(list, null, 2));
      else for (const a of list) console.log(describeAccount(a));
      return;
    }
    case "disable":
      console.log(describeAccount(await withAccounts(dataDir, (a) => a.disable(needName()))));
      return;
    case "enable":
      console.log(describeAccount(await withAccounts(dataDir, (a) => a.enable(needName()))));
      return;
    case "reset-password": {
      const reset = await withAccounts(dataDir, (a) => a.resetPassword(needName()));
      if (values.json) return console.log(JSON.stringify(reset, null, 2));
      console.log(`New temporary password for '${reset.account.name}' (shown once; the next console login must change it):`);
      console.log(reset.temporary_password);
      return;
    }
    default:
      throw new UsageError(`Unknown accounts command '${command ?? ""}'. Use create, list, disable, enable or reset-password.`);
  }
}

export async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  switch (command) {
    case "serve":
      return serve(rest);
    case "keys":
      return keys(rest);
    case "accounts":
      return accounts(rest);
    case "models": {
      if (rest.length === 0 || wantsHelp(rest)) {
        console.log(MODELS_HELP);
        return;
      }
      // Loaded only here: it pulls in node-llama-cpp, which `svc keys` does not need.
      const { runModelsCommand } = await import("./features/models/models-cli.js");
      // Exit explicitly: the downloader may leave idle connections that would keep the process alive.
      process.exit(await runModelsCommand(rest, defaultDataDir()));
    }
    case "engine": {
      if (wantsHelp(rest)) {
        console.log(ENGINE_HELP);
        return;
      }
      const { runEngineCommand } = await import("./features/engine/engine-cli.js");
      process.exit(await runEngineCommand(rest, defaultDataDir()));
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
    // The port check before the load can lose a race with another program: say the same thing then.
    const hint = err.name === "StartupError" && isAddressInUse(err) ? " Another program took the port; `--port 0` picks a free one." : "";
    console.error(`svc: ${err.message}${hint}`);
    process.exit(1);
  }
  console.error(err);
  process.exit(1);
});
