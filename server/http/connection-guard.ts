// Connections, shared out per client: a client that opens more than its share cannot lock anyone else out.
// A cap on connections alone was the lock-out: 1,100 idle connections from one keyless client took the
// 1,024 places, and /health and key holders got ECONNRESET with nothing in the log.
//
// - Each client (an address; every loopback address is one client, this machine) has a share of the
//   connections. Connections it opens beyond its share are accepted, but serve only /health and requests
//   that show a key (or a console session); anything else on them is a 429 that closes the connection.
// - When the server holds as many connections as it may, a new one takes the place of an idle one: first
//   the oldest idle connection beyond some client's share, then the oldest idle one of the client holding
//   the most (connections younger than a second that have not sent a request yet are left alone: their
//   request may be on its way). Only when none is idle is the new connection turned away (503).
// - Each client keeps at most `idlePerClient` idle keep-alive connections; beyond, its oldest idle ones close.
// - A client turned away, or whose connections were closed, is logged (once per client and reason per 10 s,
//   with a count of what was left out).
// Idle here: no request in flight (never sent one, or waiting between requests).
import type { Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { encodeOpenAIError } from "./openai-errors.js";
import { AppError } from "../core/errors.js";
import { isLoopbackAddress } from "./lan.js";

export interface ConnectionShares {
  /** Connections at once, all clients together. */
  maxConnections: number;
  /** Connections one client may hold that serve every request. */
  perClient: number;
  /** Idle keep-alive connections one client may keep. */
  idlePerClient: number;
}

export type GuardLog = (level: "warn", message: string) => void;

/** A connection that has not sent its first request yet is left alone this long (its request may be on its way). */
const FRESH_MS = 1000;
/** One log line per client and reason per this long. */
const LOG_EVERY_MS = 10_000;

interface Tracked {
  socket: Socket;
  client: string;
  /** When it last finished a request (or connected). */
  lastUsed: number;
  connectedAt: number;
  inFlight: number;
  served: number;
  /** Opened while its client held its share: serves only /health and key holders until one shows a key. */
  overShare: boolean;
}

/** The client a connection belongs to: its address, or "this machine" for every loopback address. */
export function clientOf(address: string | undefined): string {
  if (!address) return "unknown";
  if (isLoopbackAddress(address)) return "this machine";
  return address.replace(/^::ffff:/i, "");
}

export class ConnectionGuard {
  private readonly all = new Map<Socket, Tracked>();
  private readonly byClient = new Map<string, Set<Tracked>>();
  private readonly logged = new Map<string, { at: number; skipped: number; timer: NodeJS.Timeout | null }>();

  constructor(
    readonly shares: ConnectionShares,
    private readonly log?: GuardLog,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Watches `server`'s connections and requests (before node's own handling of each new connection). */
  attach(server: Server): void {
    server.prependListener("connection", (socket: Socket) => this.admit(socket));
    server.on("request", (request: { socket: Socket }, response: ServerResponse) => this.started(request.socket, response));
    server.once("close", () => this.stopLogging());
  }

  /** Whether requests on this connection are limited to /health and key holders. */
  isOverShare(socket: Socket | undefined): boolean {
    return socket !== undefined && this.all.get(socket)?.overShare === true;
  }

  /** A request on the connection showed a key (or a console session): it serves everything from now on. */
  trust(socket: Socket | undefined): void {
    const tracked = socket && this.all.get(socket);
    if (tracked) tracked.overShare = false;
  }

  /** The 429 for a request on a connection beyond its client's share (the caller answers it and closes). */
  turnAway(socket: Socket | undefined): AppError {
    const client = clientOf(socket?.remoteAddress);
    const held = this.byClient.get(client)?.size ?? 0;
    this.note(client, "request", `Turned away a request from ${client}: it holds ${held} connections, more than its share of ${this.shares.perClient}; on the rest only /health and requests with a key are served.`);
    return new AppError(
      "rate_limit",
      `This client holds ${held} connections, more than its share of ${this.shares.perClient}: on the others only /health and requests with a valid key are served. Close connections you do not use, then retry.`,
      { code: "too_many_connections", retryAfter: 1 },
    );
  }

  /** Connections held now: all of them, and per client. */
  stats(): { total: number; clients: Record<string, number> } {
    return { total: this.all.size, clients: Object.fromEntries([...this.byClient].map(([client, set]) => [client, set.size])) };
  }

  private admit(socket: Socket): void {
    const client = clientOf(socket.remoteAddress);
    const now = this.now();
    const tracked: Tracked = { socket, client, lastUsed: now, connectedAt: now, inFlight: 0, served: 0, overShare: false };
    let mine = this.byClient.get(client);
    if (!mine) this.byClient.set(client, (mine = new Set()));
    tracked.overShare = mine.size >= this.shares.perClient;
    mine.add(tracked);
    this.all.set(socket, tracked);
    socket.once("close", () => this.forget(tracked));
    if (this.all.size <= this.shares.maxConnections) return;
    const victim = this.victim(tracked);
    if (victim) {
      this.note(
        victim.client,
        "evicted",
        `Closed an idle connection of ${victim.client} to make room: the server holds ${this.shares.maxConnections} connections, its limit, and ${victim.client} holds ${this.byClient.get(victim.client)?.size ?? 0}${victim.overShare ? `, more than its share of ${this.shares.perClient}` : ""}.`,
      );
      victim.socket.destroy();
      return;
    }
    this.note(client, "refused", `Turned away a connection from ${client}: the server holds ${this.shares.maxConnections} connections, its limit, none of them idle.`);
    refuse(socket);
  }

  /** The connection a newcomer takes the place of, or null when none may go. */
  private victim(newcomer: Tracked): Tracked | null {
    const now = this.now();
    let best: Tracked | null = null;
    // Beyond some client's share: the one idle longest.
    for (const t of this.all.values())
      if (t !== newcomer && t.overShare && t.inFlight === 0 && (!best || t.lastUsed < best.lastUsed)) best = t;
    if (best) return best;
    // Else: the client holding the most, its connection idle longest (not one whose first request may be on its way).
    const clients = [...this.byClient.entries()].sort((a, b) => b[1].size - a[1].size);
    for (const [, set] of clients) {
      for (const t of set)
        if (t !== newcomer && t.inFlight === 0 && (t.served > 0 || now - t.connectedAt >= FRESH_MS) && (!best || t.lastUsed < best.lastUsed)) best = t;
      if (best) return best;
    }
    return null;
  }

  private started(socket: Socket, response: ServerResponse): void {
    const tracked = this.all.get(socket);
    if (!tracked) return;
    tracked.inFlight++;
    response.once("close", () => {
      tracked.inFlight--;
      tracked.served++;
      tracked.lastUsed = this.now();
      this.trimIdle(tracked.client);
    });
  }

  /** Closes a client's oldest idle keep-alive connections beyond its bound. */
  private trimIdle(client: string): void {
    const set = this.byClient.get(client);
    if (!set || set.size <= this.shares.idlePerClient) return;
    const idle = [...set].filter((t) => t.inFlight === 0 && t.served > 0);
    const extra = idle.length - this.shares.idlePerClient;
    if (extra <= 0) return;
    idle.sort((a, b) => a.lastUsed - b.lastUsed);
    for (const t of idle.slice(0, extra)) t.socket.destroy();
    this.note(client, "idle", `Closed ${extra} idle keep-alive connection(s) of ${client}: it may keep ${this.shares.idlePerClient}.`);
  }

  private forget(tracked: Tracked): void {
    this.all.delete(tracked.socket);
    const set = this.byClient.get(tracked.client);
    set?.delete(tracked);
    if (set?.size === 0) this.byClient.delete(tracked.client);
  }

  /** Logs `message` now, or counts it toward the next line for this client and reason. */
  private note(client: string, reason: string, message: string): void {
    if (!this.log) return;
    const key = `${client}\u0000${reason}`;
    const now = this.now();
    const entry = this.logged.get(key);
    if (entry && now - entry.at < LOG_EVERY_MS) {
      entry.skipped++;
      entry.timer ??= setTimeout(() => this.flush(key, message), Math.max(0, LOG_EVERY_MS - (now - entry.at))).unref();
      return;
    }
    if (entry?.timer) clearTimeout(entry.timer);
    this.logged.set(key, { at: now, skipped: 0, timer: null });
    this.log("warn", message);
  }

  private flush(key: string, last: string): void {
    const entry = this.logged.get(key);
    if (!entry) return;
    entry.timer = null;
    if (entry.skipped === 0) return;
    this.log?.("warn", `${last} (${entry.skipped} more like it in the last ${LOG_EVERY_MS / 1000} s)`);
    this.logged.set(key, { at: this.now(), skipped: 0, timer: null });
  }

  private stopLogging(): void {
    for (const entry of this.logged.values()) if (entry.timer) clearTimeout(entry.timer);
    this.logged.clear();
  }
}

/** A connection there is no room for: a 503 that says why (OpenAI's shape: no path is known yet), then closed. */
function refuse(socket: Socket): void {
  const body = JSON.stringify(
    encodeOpenAIError(
      new AppError("unavailable", "The server holds as many connections as it may, none of them idle. Retry in a moment.", {
        code: "too_many_connections",
        retryAfter: 1,
      }),
    ),
  );
  if (socket.writable)
    socket.write(
      `HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Retry-After: 1\r\nConnection: close\r\n\r\n${body}`,
    );
  socket.destroy();
}
