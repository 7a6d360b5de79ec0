// Server-sent events over a hijacked Fastify reply: headers written once, frames written with
// backpressure, comment keep-alives while the model is quiet (or the request waits for a sequence or for
// its prompt to be read), the client's disconnect reported, and a write deadline for clients that stop
// reading (they would otherwise hold their sequence for as long as they keep the connection open).
//
// Frames are written at once when the stream has been quiet for FLUSH_MS; a burst (a fast model can make
// a token every millisecond) is gathered and written every FLUSH_MS instead. Typical models (10-100
// tokens/s) see every token sent the moment it exists; very fast ones cost the client fewer wake-ups.
import type { FastifyReply } from "fastify";

/** Clients with idle timeouts (30 s and more is common) see a comment at least this often. */
export const KEEPALIVE_MS = 10_000;
/**
 * A client that reads nothing for this long while frames wait (the socket's buffers full) loses its stream:
 * the connection is closed, which stops its generation and frees its sequence for others.
 */
export const WRITE_TIMEOUT_MS = 30_000;

export interface WriteDeadline {
  ms: number;
  /** Called once when the deadline closes the stream (for the log). */
  onTimeout?: () => void;
}
const FLUSH_MS = 8;

export class SseResponse {
  private keepalive: NodeJS.Timeout | null = null;
  private flushTimer: NodeJS.Timeout | null = null;
  private flushQueued = false;
  private pending: string[] = [];
  private lastFlush = 0;
  private lastWrite = Date.now();
  private drained: Promise<void> | null = null;
  private ended = false;
  private opened = false;

  constructor(
    private readonly reply: FastifyReply,
    /** The headers to send besides SSE's own, read when the stream opens. */
    private readonly headers: () => Record<string, string>,
    private readonly keepAliveMs = KEEPALIVE_MS,
    private readonly writeDeadline: WriteDeadline = { ms: WRITE_TIMEOUT_MS },
  ) {}

  get isOpen(): boolean {
    return this.opened;
  }

  /** Commits to a 200 event stream: sends the headers. Idempotent. */
  open(): void {
    if (this.opened) return;
    this.opened = true;
    this.reply.hijack();
    const raw = this.reply.raw;
    raw.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-accel-buffering": "no",
      ...this.headers(),
    });
    raw.flushHeaders();
    this.keepalive = setInterval(() => {
      if (Date.now() - this.lastWrite >= this.keepAliveMs) void this.write(": keepalive\n\n");
    }, this.keepAliveMs / 3);
    this.keepalive.unref();
    raw.on("close", () => this.stopTimers());
  }

  /** True once the client has gone (or we ended). */
  get closed(): boolean {
    return this.ended || this.reply.raw.destroyed || this.reply.raw.writableEnded;
  }

  async write(frame: string): Promise<void> {
    this.open();
    if (this.closed) return;
    this.lastWrite = Date.now();
    this.pending.push(frame);
    if (this.drained) await this.drained;
    const now = performance.now();
    if (now - this.lastFlush >= FLUSH_MS) this.flushSoon();
    else this.flushTimer ??= setTimeout(() => this.flush(), FLUSH_MS - (now - this.lastFlush));
  }

  /**
   * Flushes once the frames being written now are all in: after the current run of promise jobs (the
   * tokens the engine hands over together are encoded in one), so they go out in one write.
   */
  private flushSoon(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    process.nextTick(() => {
      this.flushQueued = false;
      this.flush();
    });
  }

  end(): void {
    if (!this.opened) return;
    this.flush();
    this.stopTimers();
    if (this.ended) return;
    this.ended = true;
    if (!this.reply.raw.writableEnded) this.reply.raw.end();
  }

  private flush(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    this.lastFlush = performance.now();
    if (this.pending.length === 0 || this.reply.raw.destroyed || this.reply.raw.writableEnded) return;
    const raw = this.reply.raw;
    const data = this.pending.length === 1 ? this.pending[0]! : this.pending.join("");
    this.pending = [];
    if (!raw.write(data) && !this.drained) {
      this.drained = new Promise<void>((resolve) => {
        const stalled = setTimeout(() => {
          this.writeDeadline.onTimeout?.();
          raw.destroy();
        }, this.writeDeadline.ms);
        const done = () => {
          clearTimeout(stalled);
          raw.off("drain", done);
          raw.off("close", done);
          this.drained = null;
          resolve();
        };
        raw.on("drain", done);
        raw.on("close", done);
      });
    }
  }

  private stopTimers(): void {
    if (this.keepalive) clearInterval(this.keepalive);
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.keepalive = null;
    this.flushTimer = null;
  }
}
