// Issue 38, item 1: a keyless client could lock everyone out. 1,100 idle connections from one client: 1,024
// were accepted, and then /health and a keyed chat got ECONNRESET, with nothing in the log; the cap itself
// was the lock-out, from loopback and from any LAN peer. Each client now has a share of the connections and
// a bound on idle keep-alive ones, room is kept for /health and key holders, and a client turned away is
// logged. The servers here run with the production limits (1024 connections, 256 per client, 64 idle).
import { EventEmitter } from "node:events";
import type { Server } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { ConnectionGuard } from "../../server/http/connection-guard.js";
import { createKey, runSvc, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let key: string;
let dataDir: string;
const port = () => Number(new URL(server.url).port);

beforeAll(async () => {
  dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

const held: Socket[] = [];
afterEach(async () => {
  for (const socket of held.splice(0)) socket.destroy();
  // The server forgets them as they close.
  await new Promise((r) => setTimeout(r, 300));
});

/** `count` connections that send nothing, opened a few at a time; resolves once each is connected (or closed). */
async function idleConnections(count: number): Promise<Socket[]> {
  const sockets: Socket[] = [];
  for (let i = 0; i < count; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, count - i) }, () => {
        const socket = connect({ host: "127.0.0.1", port: port() });
        socket.on("error", () => undefined);
        sockets.push(socket);
        held.push(socket);
        return new Promise<void>((resolve) => {
          socket.once("connect", () => resolve());
          socket.once("close", () => resolve());
        });
      }),
    );
  }
  return sockets;
}

/** A request on a connection of its own (no keep-alive pool in the way); the status line and body. */
function request(head: string, body = ""): Promise<{ status: number; text: string; error?: string }> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port: port() });
    let text = "";
    let error: string | undefined;
    socket.on("data", (d: Buffer) => (text += d.toString()));
    socket.on("error", (err: NodeJS.ErrnoException) => (error = err.code ?? err.message));
    socket.on("close", () => resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1] ?? 0), text, error }));
    socket.write(`${head}Host: 127.0.0.1:${port()}\r\nConnection: close\r\n${body ? `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` : ""}\r\n${body}`);
  });
}

const health = () => request("GET /health HTTP/1.1\r\n");
const keyedChat = () =>
  request(
    `POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer ${key}\r\n`,
    JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 4, reasoning_effort: "none" }),
  );

describe("one client's connections cannot lock others out (issue 38, item 1)", () => {
  it("1,100 idle connections from one keyless client: /health and a keyed chat are still served, and the log says so", async () => {
    const before = server.output().length;
    const sockets = await idleConnections(1100);
    await new Promise((r) => setTimeout(r, 200));
    for (const res of [await health(), await keyedChat(), await health()]) {
      expect(res.error, res.text).toBeUndefined();
      expect(res.status, res.text).toBe(200);
    }
    // The server made room by closing the hog's oldest idle connections beyond its share; the rest are open.
    expect(sockets.filter((s) => !s.destroyed && s.readyState === "open").length).toBeGreaterThan(900);
    const log = server.output().slice(before);
    expect(log).toMatch(/\[svc\] warn: Closed an idle connection of this machine to make room: the server holds 1024 connections, its limit, and this machine holds \d+, more than its share of 256\./);
  });

  it("beyond its share a client gets a 429 that closes the connection for a keyless request, and the log says it was turned away", async () => {
    // An account holder logged in to the console (a session, no key).
    const account = JSON.parse(runSvc(["accounts", "create", "holder", "--data-dir", dataDir, "--json"]).stdout) as { temporary_password: string };
    const login = await fetch(`${server.url}/v1/console/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ account: "holder", password: account.temporary_password }),
    });
    expect(login.status).toBe(200);
    const session = login.headers.get("set-cookie")!.split(";")[0]!;
    const before = server.output().length;
    await idleConnections(300);
    const refused = await request("GET /v1/models HTTP/1.1\r\n");
    expect(refused.status).toBe(429);
    expect(refused.text).toMatch(/retry-after: 1\r\n/i);
    expect(refused.text).toMatch(/connection: close\r\n/i);
    const body = JSON.parse(refused.text.slice(refused.text.indexOf("\r\n\r\n") + 4)) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("too_many_connections");
    expect(body.error.message).toContain("more than its share of 256");
    // Anthropic's format on its paths.
    const messages = await request("POST /v1/messages/count_tokens HTTP/1.1\r\n", "{}");
    expect(messages.status).toBe(429);
    expect(messages.text).toContain('"type":"rate_limit_error"');
    // /health, key holders and console sessions are served on connections beyond the share.
    expect((await health()).status).toBe(200);
    expect((await keyedChat()).status).toBe(200);
    const consoleAnswer = await request(`GET /v1/console/keys HTTP/1.1\r\nAccept: application/json\r\nCookie: ${session}\r\n`);
    expect(consoleAnswer.status, consoleAnswer.text).toBe(403);
    expect(consoleAnswer.text).toContain("password_change_required");
    expect((await request("GET /v1/console/keys HTTP/1.1\r\nAccept: application/json\r\n")).status).toBe(429);
    expect(server.output().slice(before)).toMatch(
      /\[svc\] warn: Turned away a request from this machine: it holds 30\d connections, more than its share of 256; on the rest only \/health and requests with a key are served\./,
    );
  });

  it("a client keeps at most 64 idle keep-alive connections: the oldest beyond are closed", async () => {
    const sockets = await idleConnections(100);
    // Each sends one request and keeps its connection (keep-alive).
    await Promise.all(
      sockets.map(
        (socket) =>
          new Promise<void>((resolve) => {
            socket.once("data", () => resolve());
            socket.once("close", () => resolve());
            socket.write(`GET /health HTTP/1.1\r\nHost: 127.0.0.1:${port()}\r\n\r\n`);
          }),
      ),
    );
    await new Promise((r) => setTimeout(r, 300));
    const open = sockets.filter((s) => !s.destroyed && s.readyState === "open" && !s.readableEnded).length;
    expect(open).toBe(64);
  });
});

describe("the shares, by client address (LAN peers are driven through the guard itself)", () => {
  /** A fake connection from `address` (what the guard reads of a socket). */
  type FakeSocket = Socket & { destroyedByGuard: boolean; written: string };
  function fakeSocket(address: string): FakeSocket {
    const socket = new EventEmitter() as FakeSocket;
    Object.assign(socket, { remoteAddress: address, writable: true, destroyed: false, destroyedByGuard: false, written: "" });
    socket.write = ((data: string) => ((socket.written += data), true)) as Socket["write"];
    socket.destroy = (() => {
      if (!socket.destroyed) {
        Object.assign(socket, { destroyed: true, destroyedByGuard: true });
        socket.emit("close");
      }
      return socket;
    }) as FakeSocket["destroy"];
    return socket;
  }

  it("each LAN peer has its own share, every loopback address counts as this machine, and a full server makes room from the client holding most", () => {
    const lines: string[] = [];
    let now = 0;
    const guard = new ConnectionGuard({ maxConnections: 8, perClient: 2, idlePerClient: 1 }, (_level, message) => lines.push(message), () => now);
    const server = new EventEmitter() as unknown as Server;
    guard.attach(server);
    const open = (address: string) => {
      const socket = fakeSocket(address);
      server.emit("connection", socket);
      return socket;
    };
    const lan = [open("192.168.1.20"), open("192.168.1.20"), open("192.168.1.20")];
    const other = [open("::ffff:192.168.1.30"), open("192.168.1.30")];
    const local = [open("127.0.0.1"), open("::1"), open("127.0.0.2")];
    expect(guard.stats()).toEqual({ total: 8, clients: { "192.168.1.20": 3, "192.168.1.30": 2, "this machine": 3 } });
    expect(lan.map((s) => guard.isOverShare(s))).toEqual([false, false, true]);
    expect(other.map((s) => guard.isOverShare(s))).toEqual([false, false]);
    expect(local.map((s) => guard.isOverShare(s))).toEqual([false, false, true]);
    // Full: a newcomer takes the place of the oldest idle connection beyond some client's share.
    now = 10;
    const newcomer = open("192.168.1.40");
    expect(lan[2]!.destroyedByGuard).toBe(true);
    expect(newcomer.destroyedByGuard).toBe(false);
    expect(lines.at(-1)).toBe(
      "Closed an idle connection of 192.168.1.20 to make room: the server holds 8 connections, its limit, and 192.168.1.20 holds 3, more than its share of 2.",
    );
    now = 20;
    open("192.168.1.41");
    expect(local[2]!.destroyedByGuard).toBe(true);
    // None beyond a share now, and every connection younger than a second with no request yet: turned away.
    now = 500;
    expect(open("192.168.1.42").destroyedByGuard).toBe(true);
    expect(lines.at(-1)).toBe("Turned away a connection from 192.168.1.42: the server holds 8 connections, its limit, none of them idle.");
    // Once they are older, the oldest idle connection of a client holding the most goes.
    now = 2000;
    expect(open("192.168.1.43").destroyedByGuard).toBe(false);
    expect(lan[0]!.destroyedByGuard).toBe(true);
    expect([...lan, ...other, ...local].filter((s) => s.destroyedByGuard)).toHaveLength(3);
  });

  it("a key shown on a connection beyond its client's share makes it the client's own", () => {
    const guard = new ConnectionGuard({ maxConnections: 8, perClient: 1, idlePerClient: 8 });
    const server = new EventEmitter() as unknown as Server;
    guard.attach(server);
    const [first, second] = [fakeSocket("192.168.1.30"), fakeSocket("192.168.1.30")];
    server.emit("connection", first);
    server.emit("connection", second);
    expect([guard.isOverShare(first), guard.isOverShare(second)]).toEqual([false, true]);
    guard.trust(second);
    expect(guard.isOverShare(second)).toBe(false);
  });

  it("when no connection is idle the newcomer is turned away with a 503 that says why, and the log line is kept to one per 10 s", () => {
    const lines: string[] = [];
    let now = 0;
    const guard = new ConnectionGuard({ maxConnections: 2, perClient: 2, idlePerClient: 2 }, (_level, message) => lines.push(message), () => now);
    const server = new EventEmitter() as unknown as Server;
    guard.attach(server);
    const busy = [fakeSocket("10.0.0.1"), fakeSocket("10.0.0.2")];
    for (const socket of busy) {
      server.emit("connection", socket);
      server.emit("request", { socket }, new EventEmitter());
    }
    const turnedAway = [fakeSocket("10.0.0.3"), fakeSocket("10.0.0.3"), fakeSocket("10.0.0.3")];
    for (const socket of turnedAway) server.emit("connection", socket);
    expect(turnedAway.every((s) => s.destroyedByGuard)).toBe(true);
    expect(turnedAway[0]!.written).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n[\s\S]*"code":"too_many_connections"/);
    expect(busy.some((s) => s.destroyedByGuard)).toBe(false);
    expect(lines).toEqual(["Turned away a connection from 10.0.0.3: the server holds 2 connections, its limit, none of them idle."]);
  });
});
