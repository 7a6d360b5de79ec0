// `svc`: the headless server and its management commands.
import { parseArgs } from "node:util";
import { ConfigError, defaultDataDir, resolveServeConfig, type Flags } from "./config.js";
import { isAddressInUse, isPortTaken } from "./core/port.js";
import { AppError } from "./core/errors.js";
import { AccountsService, type AccountInfo } from "./features/accounts/accounts-service.js";
import { KeysService, type KeyInfo } from "./features/keys/keys-service.js";
import { ACCOUNTS_HELP, ENGINE_HELP, KEYS_HELP, MODELS_HELP, SERVE_HELP, USAGE } from "./cli-help.js";
import { Store } from "./store/store.js";
import { packageVersion } from "./core/version.js";

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
      upstream: { type: "string" },
      "upstream-key": { type: "string" },
      "upstream-affinity": { type: "string" },
      speculation: { type: "string" },
      "draft-model": { type: "string" },
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
