// The upstream replicas' slots (server/engine/upstream-pool.ts) against small fake llama-servers on loopback
// (/props and /health only): spreading, prefix affinity, drain and return; and --upstream's parsing
// (the window's setting and its address check: upstream-settings.test.ts).
import { createServer, type Server } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import { ReplicaPool } from "../../server/engine/upstream-pool.js";
import { ConfigError, parseUpstreams } from "../../server/config.js";
import { UpstreamClient } from "../../server/engine/upstream-client.js";
import { CLI_WORDS } from "../ui/cli-words.js";

const servers: Server[] = [];
const pools: ReplicaPool[] = [];
afterEach(async () => {
  for (const p of pools.splice(0)) p.close();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A fake llama-server with `slots` slots; `up.healthy = false` makes /health fail. */
async function fake(slots: number): Promise<{ url: string; up: { healthy: boolean } }> {
  const up = { healthy: true };
  const server = createServer((req, res) => {
    if (req.url === "/props") return void res.end(JSON.stringify({ total_slots: slots, model_path: "m.gguf", default_generation_settings: { n_ctx: 4096 } }));
    if (req.url === "/health") return void res.writeHead(up.healthy ? 200 : 503).end();
    res.writeHead(404).end();
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, up };
}

async function pool(urls: string[], affinity = true): Promise<ReplicaPool> {
  const p = new ReplicaPool(urls.map((url) => ({ url })), { affinity });
  pools.push(p);
  await p.start();
  return p;
}

const prompt = (conversation: number, length: number) => Array.from({ length }, (_, i) => (i < 20 ? i : 1000 * conversation + i));
const never = new AbortController().signal;

describe("the replica pool", () => {
  it("counts every replica's slots and spreads new conversations over the replicas", async () => {
    const [a, b] = [await fake(2), await fake(2)];
    const p = await pool([a.url, b.url]);
    expect(p.capacity()).toBe(4);
    expect(p.contextSize()).toBe(4096);
    const leases = await Promise.all([0, 1, 2, 3].map((c) => p.acquire(prompt(c, 50), undefined, never)));
    expect(leases.map((l) => l.replica.client.url).sort()).toEqual([a.url, a.url, b.url, b.url].sort());
  });

  it("sends a conversation's next turn to the slot that holds it, not to another conversation's", async () => {
    const [a, b] = [await fake(2), await fake(2)];
    const p = await pool([a.url, b.url]);
    const where = new Map<number, string>();
    for (const c of [0, 1, 2, 3]) {
      const lease = await p.acquire(prompt(c, 50), undefined, never);
      where.set(c, `${lease.replica.client.url}#${lease.slot}`);
      lease.release(prompt(c, 60));
    }
    // Four conversations, four slots: each got its own, though all share a 20-token system prompt.
    expect(new Set(where.values()).size).toBe(4);
    for (const c of [3, 1, 0, 2]) {
      const lease = await p.acquire(prompt(c, 80), undefined, never);
      expect(`${lease.replica.client.url}#${lease.slot}`).toBe(where.get(c));
      lease.release(prompt(c, 90));
    }
  });

  it("round-robin (affinity off) alternates the replicas whatever the prompt", async () => {
    const [a, b] = [await fake(2), await fake(2)];
    const p = await pool([a.url, b.url], false);
    const urls: string[] = [];
    for (let i = 0; i < 4; i++) {
      const lease = await p.acquire(prompt(0, 50), undefined, never);
      urls.push(lease.replica.client.url);
      lease.release(prompt(0, 60));
    }
    expect(urls).toEqual([a.url, b.url, a.url, b.url]);
  });

  it("drains a failed replica: its leases abort with a clean 503, new ones go to the other, it comes back", async () => {
    const [a, b] = [await fake(1), await fake(1)];
    const p = await pool([a.url, b.url]);
    const changes: number[] = [];
    p.onChange(() => changes.push(p.capacity()));
    const onA = await p.acquire(prompt(0, 50), undefined, never);
    const replica = onA.replica;
    a.up.healthy = replica.client.url === a.url ? false : a.up.healthy;
    b.up.healthy = replica.client.url === b.url ? false : b.up.healthy;
    p.drain(replica, "it stopped answering.");
    expect(onA.signal.aborted).toBe(true);
    expect(onA.signal.reason).toBeInstanceOf(AppError);
    expect((onA.signal.reason as AppError).status).toBe(503);
    expect(p.capacity()).toBe(1);
    const other = await p.acquire(prompt(1, 50), undefined, never);
    expect(other.replica).not.toBe(replica);
    onA.release([]);
    other.release([]);
    a.up.healthy = true;
    b.up.healthy = true;
    const deadline = Date.now() + 5000;
    while (p.capacity() < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(p.capacity()).toBe(2);
    expect(changes).toEqual([1, 2]);
  });

  it("with every replica down, a request gets a 503 naming them", async () => {
    const a = await fake(1);
    const p = await pool([a.url]);
    p.drain(p.replicas[0]!, "gone.");
    await expect(p.acquire(prompt(0, 10), undefined, never)).rejects.toMatchObject({ status: 503, message: expect.stringContaining(a.url) });
  });
});

describe("--upstream and --upstream-key", () => {
  it("pairs keys with URLs: one for all, or one per upstream", () => {
    expect(parseUpstreams("http://a:1, http://b:2/", "k")).toEqual([{ url: "http://a:1", key: "k" }, { url: "http://b:2", key: "k" }]);
    expect(parseUpstreams("http://a:1,http://b:2", "ka,")).toEqual([{ url: "http://a:1", key: "ka" }, { url: "http://b:2" }]);
    expect(parseUpstreams(undefined, undefined)).toBeUndefined();
  });

  it("refuses what is not an http(s) URL, and a key count that matches nothing", () => {
    expect(() => parseUpstreams("ftp://a", undefined)).toThrow(ConfigError);
    expect(() => parseUpstreams("localhost:8080x", undefined)).toThrow(/http/);
    expect(() => parseUpstreams("http://a,http://b,http://c", "k1,k2")).toThrow(/one per upstream/);
  });

  it("refuses a user name and password in the URL (the key has its own flag) and a ?query or #fragment", () => {
    expect(() => parseUpstreams("http://user:pw@a:1", undefined)).toThrow(/--upstream-key/);
    expect(() => parseUpstreams("http://a:1/?x=1", undefined)).toThrow(/\?query/);
    expect(() => parseUpstreams("http://a:1#top", undefined)).toThrow(/#fragment/);
  });
});

describe("an upstream that refuses the key", () => {
  it("is a 503 upstream_unauthorized naming the key's setting, in words the window can show (no flag)", async () => {
    const server = createServer((_req, res) => {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "Invalid API Key" } }));
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const client = new UpstreamClient({ url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, key: "wrong" });
    const err = (await client.tokenize("hello").catch((e: unknown) => e)) as AppError;
    expect(err).toBeInstanceOf(AppError);
    expect(err.code).toBe("upstream_unauthorized");
    expect(err.message).toContain("refused this server's key (HTTP 401)");
    expect(err.message).toContain("upstream engines' settings");
    expect(err.message).not.toMatch(CLI_WORDS);
  });
});
