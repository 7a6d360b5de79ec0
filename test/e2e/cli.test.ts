// The CLI as users run it: keys, a server without a model, a bad model path, and graceful shutdown.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { createKey, runSvc, startSvc, tempDataDir } from "../support/svc-process.js";

const KEY_LINE = /^sk-svc-[0-9a-f]{32}$/;
const dirs: string[] = [];
afterAll(() => dirs.splice(0));

describe("svc keys", () => {
  it("creates a 39-character key on the last line of stdout, lists it by hint, revokes it", () => {
    const dataDir = tempDataDir();
    dirs.push(dataDir);
    const created = runSvc(["keys", "create", "--data-dir", dataDir, "--name", "laptop"]);
    expect(created.status).toBe(0);
    const key = created.stdout.trim().split("\n").at(-1)!;
    expect(key).toMatch(KEY_LINE);
    expect(key).toHaveLength(39);
    expect(existsSync(join(dataDir, "svc.sqlite3"))).toBe(true);

    const list = runSvc(["keys", "list", "--data-dir", dataDir, "--json"]);
    expect(list.status).toBe(0);
    const keys = JSON.parse(list.stdout) as Array<{ id: string; hint: string; name: string; revoked_at: number | null; account: string }>;
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ hint: `sk-svc-…${key.slice(-4)}`, name: "laptop", revoked_at: null, account: "local" });
    // Only the hash is stored: the key itself appears nowhere in the listing.
    expect(list.stdout).not.toContain(key);

    const revoked = runSvc(["keys", "revoke", keys[0]!.id, "--data-dir", dataDir]);
    expect(revoked.status).toBe(0);
    expect(revoked.stdout).toContain("revoked");
  });

  it("sets the reasoning-trace flag at creation and with update", () => {
    const dataDir = tempDataDir();
    createKey(dataDir, "--reasoning-trace", "--account", "team");
    const [k] = JSON.parse(runSvc(["keys", "list", "--data-dir", dataDir, "--json"]).stdout);
    expect(k).toMatchObject({ reasoning_trace: true, account: "team" });
    expect(runSvc(["keys", "update", k.id, "--reasoning-trace", "off", "--data-dir", dataDir]).status).toBe(0);
    expect(JSON.parse(runSvc(["keys", "list", "--data-dir", dataDir, "--json"]).stdout)[0].reasoning_trace).toBe(false);
  });

  it("reads SVC_DATA_DIR and explains unknown commands", () => {
    const dataDir = tempDataDir();
    const created = runSvc(["keys", "create"], { SVC_DATA_DIR: dataDir });
    expect(created.status).toBe(0);
    expect(existsSync(join(dataDir, "svc.sqlite3"))).toBe(true);
    const bad = runSvc(["keys", "explode"]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("Unknown keys command");
    expect(runSvc(["revoke", "--data-dir", dataDir, "key_nope"]).status).toBe(2);
    const missing = runSvc(["keys", "revoke", "key_nope", "--data-dir", dataDir]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain("No API key");
  });
});

describe("svc serve", () => {
  it("starts without a model: keyless endpoints work, inference is 503 with Retry-After, keys work beside it", async () => {
    const server = await startSvc();
    try {
      const health = await fetch(`${server.url}/health`);
      expect(health.status).toBe(200);
      expect(((await health.json()) as { model: { state: string } }).model.state).toBe("no_model");
      expect((await fetch(`${server.url}/v1/models`)).status).toBe(200);
      // Keys can be created while the server runs on the same data dir.
      const key = createKey(server.dataDir);
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
      });
      expect(res.status).toBe(503);
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/--model|SVC_MODEL/);
    } finally {
      expect(await server.stop("SIGTERM")).toBe(0);
    }
  });

  it("reads its settings from SVC_* variables and picks a free port with 0", async () => {
    const server = await startSvc({ env: { SVC_PORT: "0", SVC_THREADS: "1", SVC_SEQUENCES: "3", SVC_MODEL: inject("tinyModelPath") } });
    try {
      const health = (await (await fetch(`${server.url}/health`)).json()) as { model: unknown };
      expect(health.model).toMatchObject({ state: "ready", threads: 1, sequences: 3, name: "svc tiny test model" });
    } finally {
      expect(await server.stop("SIGINT")).toBe(0);
    }
  });

  it("fails clearly on a bad model path", () => {
    const result = runSvc(["serve", "--port", "0", "--data-dir", tempDataDir(), "--model", "/nonexistent/model.gguf"]);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("/nonexistent/model.gguf");
    const notGguf = runSvc(["serve", "--port", "0", "--data-dir", tempDataDir(), "--model", join(process.cwd(), "package.json")]);
    expect(notGguf.status).toBe(1);
    expect(notGguf.stderr).toContain("not a GGUF");
  });

  it("rejects bad flag values", () => {
    const result = runSvc(["serve", "--port", "99999"]);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("--port");
  });
});
