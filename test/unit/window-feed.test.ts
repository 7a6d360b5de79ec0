// The window's event stream (console/window-feed.ts): everything at first, then only what changed, pushed when
// a touch finds a real change (a read that finds the same value wakes nobody), and background work read once
// a second only while someone watches.
import { describe, expect, it } from "vitest";
import type { WindowState, WindowTopic } from "../../server/features/console/contract.js";
import { WindowFeed, type TopicReaders } from "../../server/features/console/window-feed.js";

function readers(values: Partial<Record<WindowTopic, unknown>>, reads: WindowTopic[] = []): TopicReaders {
  const topics: WindowTopic[] = ["info", "status", "downloads", "firstRun", "models", "files", "batches", "logSeq"];
  return Object.fromEntries(
    topics.map((topic) => [
      topic,
      async () => {
        reads.push(topic);
        return values[topic] ?? null;
      },
    ]),
  ) as unknown as TopicReaders;
}

const within = <T>(promise: Promise<T>, ms: number) => Promise.race([promise, new Promise<"pending">((r) => setTimeout(() => r("pending"), ms))]);

describe("WindowFeed", () => {
  it("gives everything first, waits while nothing changed, and wakes with only the changed topic", async () => {
    const values: Partial<Record<WindowTopic, unknown>> = { logSeq: 1, files: [] };
    const feed = new WindowFeed(readers(values), { settleMs: 5 });
    const first = await feed.watch(0);
    expect(Object.keys(first.changed)).toHaveLength(8);
    const waiting = feed.watch(first.version);
    // A touch that reads the same value wakes nobody.
    feed.touch("files");
    expect(await within(waiting, 60)).toBe("pending");
    values.logSeq = 2;
    feed.touch("logSeq");
    const update = await waiting;
    expect(update.changed).toEqual({ logSeq: 2 });
    expect(update.version).toBeGreaterThan(first.version);
    feed.close();
  });

  it("returns empty-handed after the longest wait, and reads background work only while watched", async () => {
    const reads: WindowTopic[] = [];
    const feed = new WindowFeed(readers({}, reads), { settleMs: 1, maxWaitMs: 80, backgroundMs: 20, backgroundWork: () => ["batches"] });
    const first = await feed.watch(0);
    reads.length = 0;
    expect(await feed.watch(first.version)).toEqual({ version: first.version, changed: {} });
    expect(reads.filter((t) => t === "batches").length).toBeGreaterThan(1);
    reads.length = 0;
    await new Promise((r) => setTimeout(r, 100));
    expect(reads).toEqual([]);
    feed.close();
  });

  it("goes on without a topic whose read does not settle, and reads it again once that read ends", async () => {
    const values: Partial<Record<WindowTopic, unknown>> = { files: ["a"], models: { n: 1 } };
    const base = readers(values);
    let release!: () => void;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    let modelReads = 0;
    const errors: WindowTopic[] = [];
    const feed = new WindowFeed(
      {
        ...base,
        // The first read of the models hangs (a reader waiting on something that does not answer).
        models: async () => (++modelReads === 1 ? stuck.then(() => values.models) : values.models) as WindowState["models"],
      },
      { settleMs: 1, readTimeoutMs: 30, onError: (topic) => errors.push(topic) },
    );
    const first = await within(feed.watch(0), 1000);
    expect(first).not.toBe("pending");
    if (first === "pending") return;
    expect(Object.keys(first.changed)).toHaveLength(7);
    expect(errors).toEqual(["models"]);
    // The files change while the models' read still hangs: the window is told.
    values.files = ["a", "b"];
    feed.touch("files", "models");
    const update = await within(feed.watch(first.version), 1000);
    expect(update).not.toBe("pending");
    if (update === "pending") return;
    expect(update.changed).toEqual({ files: ["a", "b"] });
    // The hung read is not started again while it is under way; once it ends, the models are read anew.
    expect(modelReads).toBe(1);
    values.models = { n: 2 };
    release();
    const models = await within(feed.watch(update.version), 1000);
    expect(models).not.toBe("pending");
    if (models === "pending") return;
    expect(models.changed).toEqual({ models: { n: 2 } });
    feed.close();
  });

  it("a version it never gave (the window from before a restart) gets everything again", async () => {
    const feed = new WindowFeed(readers({ status: { model: null } as unknown as WindowState["status"] }), { settleMs: 1 });
    const first = await feed.watch(0);
    expect(Object.keys((await feed.watch(first.version + 100)).changed)).toHaveLength(8);
    feed.close();
  });
});
