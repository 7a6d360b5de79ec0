// After a model loads, objects that start empty and gain keys one by one (Node's request headers,
// Fastify's reply headers, JSON.parse's results) share V8's hidden classes again: building node-llama-cpp's
// chat wrappers had used up the transitions of the empty object's map, and until a full collection every
// such object got a map of its own (server/core/gc.ts; GET /v1/models cost 226k instructions instead of
// 158k). The engine collects once after loading; the check runs in a child process with
// --allow-natives-syntax (test/support/object-maps.mjs).
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

describe("V8's object maps after a model load", () => {
  it("are shared again by objects built key by key", () => {
    const run = spawnSync(process.execPath, ["--allow-natives-syntax", join(ROOT, "test", "support", "object-maps.mjs"), inject("tinyModelPath")], {
      encoding: "utf8",
      cwd: ROOT,
      timeout: 120_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout.trim().split("\n").at(-1)!) as { before: boolean; after: boolean };
    expect(result).toEqual({ before: true, after: true });
  });
});
