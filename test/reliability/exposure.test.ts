// What the server exposes and to whom (issue 17, item 7): `--host 0.0.0.0` worked with no opt-in and no
// warning, turned the Host check off, and keyless /health showed hardware and queue state to the LAN; the
// data dir was 0755 and its database 0644; two servers ran on one data dir. Servers here bind loopback only
// (the house rule): the LAN side is driven through app.inject with a LAN peer address.
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { hostname, networkInterfaces } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { resolveServeConfig } from "../../server/config.js";
import { EngineHost } from "../../server/engine/engine-host.js";
import { KeysService } from "../../server/features/keys/keys-service.js";
import { buildApp, type AppOptions } from "../../server/app.js";
import { lanWarning, MachineNames } from "../../server/http/lan.js";
import { InferencePipeline } from "../../server/pipeline/pipeline.js";
import { AccountsService } from "../../server/features/accounts/accounts-service.js";
import { AuditService } from "../../server/features/audit/audit-service.js";
import { FilesService } from "../../server/features/files/files-service.js";
import { sharedIngest } from "../../server/ingest/ingest.js";
import { Store } from "../../server/store/store.js";
import { FakeEngine } from "../support/fake-engine.js";
import { createKey, runSvc, runSvcAsync, startSvc, tempDataDir } from "../support/svc-process.js";

const POSIX = process.platform !== "win32";
const mode = (path: string) => statSync(path).mode & 0o777;

describe("LAN exposure needs an explicit flag", () => {
  it("`svc serve --host 0.0.0.0` without --lan refuses to start and says why; so does SVC_HOST", () => {
    const dataDir = tempDataDir();
    try {
      for (const run of [
        runSvc(["serve", "--host", "0.0.0.0", "--port", "0", "--data-dir", dataDir]),
        runSvc(["serve", "--port", "0", "--data-dir", dataDir], { SVC_HOST: "::" }),
      ]) {
        expect(run.status).toBe(1);
        expect(run.stderr).toContain("would let other machines on the network reach the API. Add --lan (or set SVC_LAN=1)");
        expect(run.stdout).not.toContain("listening");
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("the flag and the variable are read; the timeouts are seconds", () => {
    expect(resolveServeConfig({}, {}).lan).toBe(false);
    expect(resolveServeConfig({ lan: true }, {}).lan).toBe(true);
    expect(resolveServeConfig({}, { SVC_LAN: "1" }).lan).toBe(true);
    expect(resolveServeConfig({}, { SVC_LAN: "off" }).lan).toBe(false);
    const config = resolveServeConfig({ "request-timeout": "5", "allowed-hosts": "MyBox.lan, other" }, { SVC_STREAM_WRITE_TIMEOUT: "7", SVC_MAX_CONNECTIONS: "10" });
    expect(config.connections).toMatchObject({ requestTimeoutMs: 5000, maxConnections: 10 });
    expect(config.streamWriteTimeoutMs).toBe(7000);
    expect(config.allowedHosts).toEqual(["mybox.lan", "other"]);
    expect(() => resolveServeConfig({ "headers-timeout": "0" }, {})).toThrow("--headers-timeout must be an integer from 1 to 86400");
  });

  it("the warning says what is exposed and how the Host check works", () => {
    const text = lanWarning("0.0.0.0", 8787, new MachineNames(["mybox.example"]));
    expect(text).toContain("LAN exposure: listening on 0.0.0.0:8787");
    expect(text).toContain("a /health that says only ok or loading");
    expect(text).toContain("needs an API key");
    expect(text).toContain("plain HTTP");
    expect(text).toContain("mybox.example");
    expect(text).toContain("--allowed-hosts");
  });
});

describe("on the LAN: the Host check and a /health that says only ok or loading", () => {
  const dataDir = tempDataDir();
  const store = Store.open(dataDir);
  const keys = new KeysService(store);
  const key = keys.create().key;
  afterAll(() => {
    store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  async function app(options: AppOptions, host = EngineHost.of(new FakeEngine())) {
    return buildApp({ pipeline: new InferencePipeline(host), keys, accounts: new AccountsService(store, keys), audit: new AuditService(store), files: new FilesService({ store, dataDir, ingest: sharedIngest() }), engineHost: host, version: "test" }, options);
  }
  const lanAddress = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && !a.internal && a.family === "IPv4")?.address;

  it("serves this machine's names and addresses and the names given, and refuses any other (DNS rebinding)", async () => {
    const lan = await app({ allowedHosts: "lan", extraHosts: ["MyBox.example"] });
    const get = (host: string) => lan.inject({ url: "/v1/models", headers: { host } });
    for (const host of ["127.0.0.1:8787", "localhost", `${hostname()}:8787`, `${hostname().split(".")[0]}.local`, "mybox.example:8787", ...(lanAddress ? [`${lanAddress}:8787`] : [])])
      expect((await get(host)).statusCode, host).toBe(200);
    const rebound = await get("attacker.example:8787");
    expect(rebound.statusCode).toBe(403);
    expect(rebound.json().error).toMatchObject({ code: "host_not_allowed" });
    expect(rebound.json().error.message).toContain("--allowed-hosts");
    // On loopback only, the machine's own name is refused too (nothing outside can reach it anyway).
    const local = await app({});
    expect((await local.inject({ url: "/v1/models", headers: { host: `${hostname()}:8787` } })).statusCode).toBe(403);
    await lan.close();
    await local.close();
  });

  it("/health: full details to this machine and to key holders, only ok or loading to other machines", async () => {
    const lan = await app({ allowedHosts: "lan" });
    for (const url of ["/health", "/v1/messages/_health"]) {
      const remote = await lan.inject({ url, remoteAddress: "192.168.1.20" });
      expect(remote.statusCode).toBe(200);
      expect(remote.json()).toEqual({ status: "ok" });
      const withKey = await lan.inject({ url, remoteAddress: "192.168.1.20", headers: { "x-api-key": key } });
      expect(withKey.json()).toMatchObject({ status: "ok", model: { state: "ready" }, requests: { active: 0 } });
      const badKey = await lan.inject({ url, remoteAddress: "192.168.1.20", headers: { authorization: "Bearer sk-svc-nope" } });
      expect(badKey.json()).toEqual({ status: "ok" });
      for (const local of ["127.0.0.1", "::1", "::ffff:127.0.0.1"])
        expect((await lan.inject({ url, remoteAddress: local })).json()).toHaveProperty("memory.ram_total_bytes");
    }
    await lan.close();
    const loading = await app({ allowedHosts: "lan" }, EngineHost.of(null));
    expect((await loading.inject({ url: "/health", remoteAddress: "10.0.0.7" })).json()).toEqual({ status: "loading" });
    await loading.close();
  });
});

describe.skipIf(!POSIX)("the data dir is the user's alone: 0700, files 0600", () => {
  it("a new data dir, and one an earlier version left world-readable, end up private", async () => {
    const fresh = join(tempDataDir(), "data");
    const old = tempDataDir();
    chmodSync(old, 0o755);
    createKey(old);
    chmodSync(old, 0o755);
    chmodSync(join(old, "svc.sqlite3"), 0o644);
    for (const dataDir of [fresh, old]) {
      const server = await startSvc({ dataDir });
      try {
        expect(mode(dataDir)).toBe(0o700);
        for (const file of ["svc.sqlite3", "svc.sqlite3-wal", "svc.sqlite3-shm", "server.lock", "server.json"]) {
          expect(existsSync(join(dataDir, file)), file).toBe(true);
          expect(mode(join(dataDir, file)), file).toBe(0o600);
        }
      } finally {
        await server.stop();
      }
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("`svc keys create` on a new data dir makes it private too, and the key itself is nowhere in it", () => {
    const dataDir = join(tempDataDir(), "keys-only");
    const key = createKey(dataDir);
    expect(mode(dataDir)).toBe(0o700);
    expect(mode(join(dataDir, "svc.sqlite3"))).toBe(0o600);
    for (const file of readdirSync(dataDir)) expect(readFileSync(join(dataDir, file)).includes(key), file).toBe(false);
    expect(readFileSync(join(dataDir, "svc.sqlite3")).includes(createHash("sha256").update(key).digest("hex"))).toBe(true);
    rmSync(dataDir, { recursive: true, force: true });
  });
});

describe("one server per data dir", () => {
  it("a second server is refused with a message naming the first; the CLI works beside it; a killed server leaves no stale lock", async () => {
    const dataDir = tempDataDir();
    const first = await startSvc({ dataDir, model: inject("tinyModelPath") });
    try {
      const second = await runSvcAsync(["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir]);
      expect(second.status).toBe(1);
      expect(second.stderr).toContain(`Another svc server (pid ${first.process.pid}, ${first.url}, started `);
      expect(second.stderr).toContain(`is using the data dir ${dataDir}. Stop it first, or give this server its own --data-dir`);
      // Keys and models commands share the data dir with a running server.
      const created = await runSvcAsync(["keys", "create", "--data-dir", dataDir]);
      expect(created.status).toBe(0);
      const key = created.stdout.trim().split("\n").at(-1)!;
      expect((await runSvcAsync(["keys", "list", "--data-dir", dataDir])).status).toBe(0);
      expect((await runSvcAsync(["models", "list", "--data-dir", dataDir])).status).toBe(0);
      const res = await fetch(`${first.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 4, reasoning_effort: "none" }),
      });
      expect(res.status).toBe(200);
    } finally {
      // SIGKILL: no clean-up runs, as after a crash.
      expect(await first.stop("SIGKILL")).toBe(null);
    }
    const again = await startSvc({ dataDir });
    expect(await again.stop()).toBe(0);
    // A clean stop removes the holder's note (the lock file itself stays; the lock is the OS's).
    expect(existsSync(join(dataDir, "server.json"))).toBe(false);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("a server in the same process is refused as well", async () => {
    const { startServer } = await import("../../server/index.js");
    const dataDir = tempDataDir();
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(join(dataDir, "server.json"), "not json");
    const quiet = () => undefined;
    const server = await startServer({ host: "127.0.0.1", port: 0, dataDir, gpu: "cpu", logLevel: "silent" }, quiet);
    try {
      await expect(startServer({ host: "127.0.0.1", port: 0, dataDir, gpu: "cpu", logLevel: "silent" }, quiet)).rejects.toThrow(
        `(pid ${process.pid}, ${server.url}, started`,
      );
    } finally {
      await server.close();
    }
    rmSync(dataDir, { recursive: true, force: true });
  });
});
