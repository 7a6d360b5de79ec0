// Clients that stop reading a stream (defect: two of them pinned both sequences for as long as they kept the
// connection, and every other inference request timed out). The server on a real loopback port with an
// engine that talks without end in 8 KB pieces, so the socket buffers fill within milliseconds: each
// never-reading client loses its stream at the write deadline (logged, its generation stopped, its sequence
// freed), and a third client that arrived meanwhile is served in full.
import { connect, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Engine, EngineEvent, EngineRequest, EngineStatus } from "../../server/engine/types.js";
import { answer } from "../support/fake-engine.js";
import { buildTestApp, type TestApp } from "../support/test-app.js";

const SEQUENCES = 2;
const WRITE_TIMEOUT_MS = 1000;

/** Streams 8 KB deltas until aborted when the prompt says "talk"; answers "done" otherwise. */
class TalkativeEngine implements Engine {
  running = 0;
  stopped = 0;
  status(): EngineStatus {
    return {
      state: "ready",
      model: { path: "/m/t.gguf", name: "t", sizeBytes: 1, trainContextSize: 4096, contextSize: 4096, sequences: SEQUENCES, threads: 1 },
      gpu: null,
      error: null,
    };
  }
  async countPromptTokens(): Promise<number> {
    return 1;
  }
  async *generate(request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent, void, void> {
    const part = request.messages.at(-1)?.content[0];
    const text = part?.type === "text" ? part.text : "";
    if (text !== "talk") return yield* answer("done");
    this.running++;
    try {
      yield { type: "start", mode: "fast", promptTokens: 1, cachedTokens: 0 };
      const piece = "y".repeat(8 * 1024);
      while (!signal.aborted) {
        yield { type: "text.delta", text: piece };
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      // Stopped by the abort or by the pipeline's return(): either way the sequence is free again.
      this.stopped++;
      this.running--;
    }
  }
  async close(): Promise<void> {}
}

let t: TestApp;
let port: number;
const engine = new TalkativeEngine();
const logs: string[] = [];

beforeAll(async () => {
  t = await buildTestApp(engine, { streamWriteTimeoutMs: WRITE_TIMEOUT_MS, log: (level, message) => logs.push(`${level}: ${message}`) });
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  port = (t.app.server.address() as AddressInfo).port;
});
afterAll(async () => {
  await t.close();
});

/** Sends a streaming request and never reads a byte of the answer. */
function neverReads(): Socket {
  const body = JSON.stringify({ messages: [{ role: "user", content: "talk" }], stream: true });
  const socket = connect({ host: "127.0.0.1", port });
  socket.pause();
  socket.on("error", () => undefined);
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${t.key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  return socket;
}

async function until(condition: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("clients that stop reading", () => {
  it("lose their streams at the write deadline, freeing both sequences for a third client", async () => {
    const a = neverReads();
    const b = neverReads();
    await until(() => engine.running === SEQUENCES, "both sequences to be taken");
    const started = Date.now();
    // A third client arrives while both sequences are held; it waits for one.
    const third = fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hello" }] }),
    });
    const res = await third;
    const waited = Date.now() - started;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).toBe("done");
    // Served once the deadline cut the others, not before and not much after.
    expect(waited).toBeGreaterThanOrEqual(WRITE_TIMEOUT_MS - 100);
    expect(waited).toBeLessThan(WRITE_TIMEOUT_MS + 5000);
    await until(() => engine.stopped === 2 && engine.running === 0, "both generations to stop");
    const cut = logs.filter((l) => l.startsWith("warn:") && l.includes("the client read nothing for 1 s; its stream was closed and its sequence freed"));
    expect(cut).toHaveLength(2);
    expect(cut[0]).toMatch(/^warn: req_\w+ POST \/v1\/chat\/completions: /);
    // The server closed both connections: a read now finds them ended.
    for (const socket of [a, b]) {
      const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
      socket.resume();
      await closed;
    }
  });
});
