import { EventEmitter } from "node:events";
import type { FastifyReply } from "fastify";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SseResponse } from "../../server/http/sse.js";

/** A hijackable reply whose socket side records each write (a fake: what is under test is when SseResponse writes). */
function fakeReply() {
  const writes: string[] = [];
  const raw = Object.assign(new EventEmitter(), {
    destroyed: false,
    writableEnded: false,
    writeHead: () => undefined,
    flushHeaders: () => undefined,
    write: (data: string) => {
      writes.push(data);
      return true;
    },
    end: () => {
      raw.writableEnded = true;
    },
  });
  const reply = { hijack: () => undefined, raw } as unknown as FastifyReply;
  return { reply, writes };
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
/** After the ticks queued so far (process.nextTick is not faked). */
const ticks = () => new Promise<void>((resolve) => process.nextTick(resolve));
const fakeClock = () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance"] });
  // As in a server that has run a while: the last write was long ago.
  vi.advanceTimersByTime(1000);
};

afterEach(() => {
  vi.useRealTimers();
});

describe("SseResponse", () => {
  it("writes the frames of one turn together, once that turn's promise jobs are done", async () => {
    const { reply, writes } = fakeReply();
    const sse = new SseResponse(reply, () => ({}));
    // Several tokens handed over together by the engine: each frame written as the codec makes it.
    const written = ["a", "b", "c"].map((f) => sse.write(`data: ${f}\n\n`));
    expect(writes).toEqual([]);
    await Promise.all(written);
    await turn();
    expect(writes).toEqual(["data: a\n\ndata: b\n\ndata: c\n\n"]);
    sse.end();
  });

  it("holds a frame that comes within 8 ms of the last write until 8 ms have passed, then sends it with those after it", async () => {
    fakeClock();
    const { reply, writes } = fakeReply();
    const sse = new SseResponse(reply, () => ({}));
    await sse.write("data: 1\n\n");
    await ticks();
    expect(writes).toEqual(["data: 1\n\n"]);
    await vi.advanceTimersByTimeAsync(3);
    await sse.write("data: 2\n\n");
    await vi.advanceTimersByTimeAsync(2);
    await sse.write("data: 3\n\n");
    await ticks();
    expect(writes).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(2);
    expect(writes).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(writes).toEqual(["data: 1\n\n", "data: 2\n\ndata: 3\n\n"]);
    // A frame 8 ms or more after the last write goes out in its own turn.
    await vi.advanceTimersByTimeAsync(20);
    await sse.write("data: 4\n\n");
    expect(writes).toHaveLength(2);
    await ticks();
    expect(writes.at(-1)).toBe("data: 4\n\n");
    sse.end();
  });

  it("sends what is held at once when the stream ends", async () => {
    fakeClock();
    const { reply, writes } = fakeReply();
    const sse = new SseResponse(reply, () => ({}));
    await sse.write("data: 1\n\n");
    await ticks();
    await sse.write("data: 2\n\n");
    sse.end();
    expect(writes).toEqual(["data: 1\n\n", "data: 2\n\n"]);
    expect(reply.raw.writableEnded).toBe(true);
  });
});
