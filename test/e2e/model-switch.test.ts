// Switching models under load with the real engine: two tiny models of different seeds, so their answers
// tell them apart. Streams in flight finish on the old model; new requests get 503 + Retry-After while the
// new model loads, then succeed on it; a model that fails to load leaves the old one serving.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeGguf } from "../../resources/test-model/gguf-writer.js";
import { buildTinyModel, greedyTexts } from "../../resources/test-model/tiny-model.js";
import { ModelsService } from "../../server/features/models/models-service.js";
import { loadLlamaRuntime } from "../../server/engine/llama-runtime.js";
import { startServer, type RunningServer } from "../../server/index.js";
import { Store } from "../../server/store/store.js";
import { tempDataDir } from "../support/svc-process.js";

const SEED_A = 31;
const SEED_B = 32;
let server: RunningServer;
let key: string;
let dataDir: string;

beforeAll(async () => {
  dataDir = tempDataDir();
  mkdirSync(join(dataDir, "models"), { recursive: true });
  writeFileSync(join(dataDir, "models", "a.gguf"), buildTinyModel({ seed: SEED_A }));
  writeFileSync(join(dataDir, "models", "b.gguf"), buildTinyModel({ seed: SEED_B }));
  // A well-formed GGUF header for an architecture llama.cpp does not have: it passes the header check and
  // fails only when llama.cpp loads it, after the old model was unloaded.
  writeFileSync(
    join(dataDir, "models", "alien.gguf"),
    encodeGguf([["general.architecture", { type: "string", value: "alien" }]], [{ name: "w", dims: [4], data: new Float32Array(4) }]),
  );
  const store = Store.open(dataDir);
  await new ModelsService({ store, dataDir }).use("a.gguf");
  store.close();
  server = await startServer(
    { host: "127.0.0.1", port: 0, dataDir, threads: 1, sequences: 2, contextSize: 4096, gpu: "cpu", logLevel: "silent" },
    () => undefined,
  );
  key = server.keys.create().key;
});

afterAll(async () => {
  await server?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

function post(body: Record<string, unknown>): Promise<Response> {
  return fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], reasoning_effort: "none", temperature: 0, ...body }),
  });
}

async function greedyAnswer(): Promise<string> {
  const res = await post({});
  expect(res.status).toBe(200);
  return ((await res.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content;
}

async function health(): Promise<{ model: { state: string; file: string | null; loading_file: string | null; error: string | null } }> {
  return (await (await fetch(`${server.url}/health`)).json()) as { model: { state: string; file: string | null; loading_file: string | null; error: string | null } };
}

/** A streamed request long enough to be in flight during the switch: a JSON array the grammar keeps going. */
async function startLongStream() {
  const res = await post({
    stream: true,
    max_tokens: 600,
    response_format: {
      type: "json_schema",
      json_schema: { name: "xs", schema: { type: "object", properties: { xs: { type: "array", items: { type: "integer" }, minItems: 1000 } }, required: ["xs"] } },
    },
  });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes('"content"')) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`stream ended early: ${text}`);
    text += decoder.decode(value, { stream: true });
  }
  return {
    /** Reads to the end; returns the whole SSE body. */
    async finish(): Promise<string> {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return text;
        text += decoder.decode(value, { stream: true });
      }
    },
  };
}

describe("switching models under load (real engine)", () => {
  it("finishes streams in flight on the old model, answers 503 + Retry-After meanwhile, then serves the new model", async () => {
    expect(await greedyAnswer()).toBe(greedyTexts(SEED_A).answer.trim());
    expect(greedyTexts(SEED_A).answer).not.toBe(greedyTexts(SEED_B).answer);

    const streams = await Promise.all([startLongStream(), startLongStream()]);
    const switching = server.models.use("b.gguf");
    const loading = await (async () => {
      for (let i = 0; i < 200; i++) {
        const h = await health();
        if (h.model.state === "loading") return h;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error("the switch never showed as loading");
    })();
    expect(loading.model).toMatchObject({ file: "a.gguf", loading_file: "b.gguf" });

    const refused = await post({});
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("5");
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("model_loading");

    for (const body of await Promise.all(streams.map((s) => s.finish()))) {
      expect(body.trimEnd().endsWith("data: [DONE]")).toBe(true);
      expect(body).toContain('"finish_reason":"length"');
      expect(body).not.toContain('"error"');
    }
    await switching;
    expect((await health()).model).toMatchObject({ state: "ready", file: "b.gguf", loading_file: null, error: null });
    expect(await greedyAnswer()).toBe(greedyTexts(SEED_B).answer.trim());
  });

  it("reports the hardware the desktop app shows: the backend in use, cores, memory", async () => {
    const hardware = await server.models.hardware();
    expect(hardware.gpu?.backend).toBe("cpu"); // this server was started with --gpu cpu
    expect(hardware.cpuCores).toBeGreaterThan(0);
    expect(hardware.defaultThreads).toBeGreaterThanOrEqual(1);
    expect(hardware.ramTotalBytes).toBeGreaterThan(hardware.ramFreeBytes);
    const body = (await (await fetch(`${server.url}/health`)).json()) as { gpu: { backend: string; skipped: unknown[] }; memory: { ram_free_bytes: number } };
    // Which binaries run: node-llama-cpp's prebuilt ones unless a local build was made on this machine.
    const runtime = await loadLlamaRuntime("cpu");
    expect(body.gpu).toMatchObject({ backend: "cpu", skipped: [], build: runtime.buildType === "localBuild" ? "local" : "prebuilt" });
    expect(body.memory.ram_free_bytes).toBeGreaterThan(0);
  });

  it("a model llama.cpp cannot load leaves the old one serving, and the active setting unchanged", async () => {
    const error = await server.models.use("alien.gguf").then(
      () => null,
      (err: unknown) => err as Error,
    );
    if (error === null) throw new Error("the switch to alien.gguf succeeded");
    expect(error.message).toMatch(/Could not switch to .*alien\.gguf: .* Still serving .*b\.gguf/);
    const state = await health();
    expect(state.model).toMatchObject({ state: "ready", file: "b.gguf" });
    expect(state.model.error).toContain("alien.gguf");
    expect(await greedyAnswer()).toBe(greedyTexts(SEED_B).answer.trim());
    expect(server.models.active()?.file).toBe("b.gguf");
    // The models list still says b is the active one.
    expect((await server.models.list()).active).toBe("b.gguf");
  });
});
