import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LlamaContext } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { applyThreadSplit, libuvPoolThreads, splitThreads, usesOpenMp } from "../../server/engine/thread-policy.js";

describe("splitThreads", () => {
  it("leaves a core to the JavaScript thread while a lone sequence generates, when the threads take every core", () => {
    expect(splitThreads(2, 2)).toEqual({ batch: 2, single: 1 });
    expect(splitThreads(8, 8)).toEqual({ batch: 8, single: 7 });
    expect(splitThreads(4, 2)).toEqual({ batch: 4, single: 1 });
  });

  it("keeps every thread for a build with OpenMP, whose threads sleep instead of spinning", () => {
    expect(splitThreads(2, 2, true)).toEqual({ batch: 2, single: 2 });
    expect(usesOpenMp("CPU : AVX2 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |")).toBe(true);
    expect(usesOpenMp("CPU : AVX2 = 1 | LLAMAFILE = 1 | REPACK = 1 |")).toBe(false);
  });

  it("keeps every thread when the decodes all run on one libuv pool thread", () => {
    expect(splitThreads(2, 2, false, 1)).toEqual({ batch: 2, single: 2 });
    expect(splitThreads(8, 8, false, 1)).toEqual({ batch: 8, single: 8 });
    expect(splitThreads(2, 2, false, 2)).toEqual({ batch: 2, single: 1 });
  });

  it("changes nothing when a core is free anyway", () => {
    expect(splitThreads(1, 2)).toEqual({ batch: 1, single: 1 });
    expect(splitThreads(4, 8)).toEqual({ batch: 4, single: 4 });
    expect(splitThreads(1, 1)).toEqual({ batch: 1, single: 1 });
  });
});

describe("the libuv pool size", () => {
  it("reads as libuv does: 4 when unset, C's atoi otherwise, 0 meaning 1 and at most 1024", () => {
    expect(libuvPoolThreads({})).toBe(4);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "1" })).toBe(1);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: " 2" })).toBe(2);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "3x" })).toBe(3);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "0" })).toBe(1);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "" })).toBe(1);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "lots" })).toBe(1);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "5000" })).toBe(1024);
    expect(libuvPoolThreads({ UV_THREADPOOL_SIZE: "-3" })).toBe(1024);
  });

  it("agrees with the pool this Node starts (Linux: its threads counted in /proc)", async () => {
    if (process.platform !== "linux") return;
    const probe = [
      'const fs = require("fs");',
      "fs.readFile(__filename, () => console.log(fs.readdirSync('/proc/self/task').length));",
    ].join("\n");
    const dir = mkdtempSync(join(tmpdir(), "svc-test-pool-"));
    try {
      const file = join(dir, "probe.cjs");
      writeFileSync(file, probe);
      const threads = (value: string | undefined) => {
        const env = { ...process.env };
        if (value === undefined) delete env.UV_THREADPOOL_SIZE;
        else env.UV_THREADPOOL_SIZE = value;
        return Number(execFileSync(process.execPath, [file], { env, encoding: "utf8" }).trim());
      };
      // Node's own threads are the same in every run; the pool's are the difference.
      const base = threads("1") - 1;
      for (const value of [undefined, "0", "lots", "3x", " 2"]) expect(threads(value) - base, String(value)).toBe(libuvPoolThreads(value === undefined ? {} : { UV_THREADPOOL_SIZE: value }));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the svc command's pool (bin/libuv-pool.js)", () => {
  const { useOnePoolThread } = createRequire(import.meta.url)("../../bin/libuv-pool.js") as {
    useOnePoolThread(env: NodeJS.ProcessEnv, platform: NodeJS.Platform): boolean;
  };

  it("asks for one pool thread unless the user set a size", () => {
    const env: NodeJS.ProcessEnv = {};
    expect(useOnePoolThread(env, "linux")).toBe(true);
    expect(env.UV_THREADPOOL_SIZE).toBe("1");
    const mine: NodeJS.ProcessEnv = { UV_THREADPOOL_SIZE: "4" };
    expect(useOnePoolThread(mine, "darwin")).toBe(false);
    expect(mine.UV_THREADPOOL_SIZE).toBe("4");
  });

  it("leaves Windows alone, where a size set from inside the process does not reach libuv", () => {
    const env: NodeJS.ProcessEnv = {};
    expect(useOnePoolThread(env, "win32")).toBe(false);
    expect(env.UV_THREADPOOL_SIZE).toBeUndefined();
    expect(libuvPoolThreads(env)).toBe(4);
  });
});

/** Stands in for node-llama-cpp's context binding: records the thread count each decode ran with. */
function fakeContext() {
  const decodedWith: number[] = [];
  let threads = 0;
  const binding = {
    initBatch: (_size: number) => undefined,
    addToBatch: (_seq: number, _first: number, tokens: Uint32Array, _logits: Uint32Array) => new Uint32Array(tokens.length > 0 ? 1 : 0),
    setThreads: (n: number) => void (threads = n),
    getThreads: () => threads,
    decodeBatch: async () => void decodedWith.push(threads),
  };
  const context = { _ctx: binding as unknown };
  /** Drives the binding the way node-llama-cpp's decode loop does. */
  const decode = async (chunks: number[], contextThreads: number) => {
    const ctx = context._ctx as typeof binding;
    ctx.initBatch(chunks.reduce((a, b) => a + b, 0));
    chunks.forEach((n, seq) => ctx.addToBatch(seq, 0, new Uint32Array(n), new Uint32Array([n - 1])));
    ctx.setThreads(contextThreads);
    await ctx.decodeBatch();
  };
  return { context: context as unknown as LlamaContext, decode, decodedWith, binding: () => context._ctx as typeof binding };
}

describe("applyThreadSplit", () => {
  it("decodes a lone sequence's steps with the single count, prompts and batched steps with all threads", async () => {
    const fake = fakeContext();
    expect(applyThreadSplit(fake.context, { batch: 2, single: 1 })).toBe(true);
    await fake.decode([40], 2); // a prompt
    await fake.decode([1], 2); // one sequence generating
    await fake.decode([1, 1, 1, 1], 2); // four generating together
    await fake.decode([1, 1, 300], 2); // two generating while a third reads its prompt
    await fake.decode([1], 2); // alone again
    expect(fake.decodedWith).toEqual([2, 1, 2, 2, 1]);
    expect(fake.binding().getThreads()).toBe(1);
  });

  it("leaves the context alone when there is nothing to split", () => {
    const fake = fakeContext();
    const before = fake.binding();
    expect(applyThreadSplit(fake.context, { batch: 1, single: 1 })).toBe(true);
    expect(fake.binding()).toBe(before);
  });

  it("reports false and changes nothing when the binding is not the one it knows", () => {
    const context = { _ctx: { decodeBatch: async () => undefined } };
    expect(applyThreadSplit(context as unknown as LlamaContext, { batch: 2, single: 1 })).toBe(false);
    expect(Object.keys(context._ctx)).toEqual(["decodeBatch"]);
  });
});
