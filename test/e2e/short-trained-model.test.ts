// `svc serve` at its default settings on a model like issue 36's: trained on a 4096-token context, with
// 16-wide attention heads (the test model with other metadata; its answers are the same). A healthy start
// and a healthy request log no error (a q8_0 KV cache's 32-value blocks do not divide such heads, so it is
// never tried).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let key: string;
let modelDir: string;

/** The server's log lines at level error ([svc] error: …), llama.cpp's included. */
const errorLines = () => server.output().split("\n").filter((line) => line.startsWith("[svc] error:"));

beforeAll(async () => {
  modelDir = mkdtempSync(join(tmpdir(), "svc-short-model-"));
  const model = join(modelDir, "short.gguf");
  writeFileSync(model, buildTinyModel({ contextLength: 4096, headSize: 16 }));
  const dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model, dataDir });
});
afterAll(async () => {
  if (server) expect(await server.stop()).toBe(0);
  rmSync(modelDir, { recursive: true, force: true });
});

describe("a model with 16-wide heads", () => {
  it("starts without an error line, with an f16 KV cache", async () => {
    expect(errorLines()).toEqual([]);
    const health = (await (await fetch(`${server.url}/health`)).json()) as { model: { state: string; kv_cache: string } };
    expect(health.model).toMatchObject({ state: "ready", kv_cache: "f16" });
  });

  it("answers a request without an error line", async () => {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "svc", messages: [{ role: "user", content: "Hello" }], max_tokens: 8 }),
    });
    expect(res.status).toBe(200);
    expect(errorLines()).toEqual([]);
  });
});
