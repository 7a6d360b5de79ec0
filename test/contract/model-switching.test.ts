// Switching the model at run time, through the HTTP app with scripted engines: requests in flight finish on
// the old model, new ones get 503 with Retry-After until the new model is in, a failed switch keeps (or
// restores) the old model, and /health says what is going on throughout.
import { afterEach, describe, expect, it } from "vitest";
import { EngineHost, type EngineLoader } from "../../server/engine/engine-host.js";
import type { LlamaEngineOptions } from "../../server/engine/llama-engine.js";
import type { Engine, EngineEvent, EngineRequest, EngineStatus } from "../../server/engine/types.js";
import { answer } from "../support/fake-engine.js";
import { buildTestApp, type TestApp } from "../support/test-app.js";

/** Answers with its own name; while `gate` is set, every generation waits on it after starting. */
class NamedEngine implements Engine {
  closed = false;
  running = 0;
  gate: Promise<void> | null = null;

  constructor(readonly file: string) {}

  status(): EngineStatus {
    return {
      state: "ready",
      model: { path: this.file, name: this.file, sizeBytes: 1, trainContextSize: 4096, contextSize: 4096, sequences: 2, threads: 1 },
      gpu: { backend: "cpu", devices: [], vramTotalBytes: 0, vramFreeBytes: 0 },
      error: null,
    };
  }

  async countPromptTokens(): Promise<number> {
    return 1;
  }

  async *generate(_request: EngineRequest, _signal: AbortSignal): AsyncGenerator<EngineEvent, void, void> {
    if (this.closed) throw new Error(`${this.file} was used after it was closed`);
    this.running++;
    try {
      const events = answer(`from ${this.file}`);
      yield events[0]!;
      if (this.gate) await this.gate;
      if (this.closed) throw new Error(`${this.file} was closed during a request`);
      yield* events.slice(1);
    } finally {
      this.running--;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

interface Fixture {
  test: TestApp;
  host: EngineHost;
  engines: NamedEngine[];
  loads: string[];
  /** Files whose load fails (once each time they are listed). */
  failing: Set<string>;
}

async function setup(): Promise<Fixture> {
  const engines: NamedEngine[] = [];
  const loads: string[] = [];
  const failing = new Set<string>();
  const loader: EngineLoader = async (options: LlamaEngineOptions) => {
    loads.push(options.modelPath);
    await new Promise((r) => setTimeout(r, 5));
    if (failing.has(options.modelPath)) throw new Error(`llama.cpp cannot load ${options.modelPath}`);
    const engine = new NamedEngine(options.modelPath);
    engines.push(engine);
    return engine;
  };
  const precheck = async (path: string) => {
    if (path.endsWith(".txt")) throw new Error(`${path} is not a GGUF model file.`);
  };
  const host = new EngineHost({ loader, precheck });
  const test = await buildTestApp(host);
  return { test, host, engines, loads, failing };
}

let fixture: Fixture | null = null;
afterEach(async () => {
  await fixture?.test.close();
  fixture = null;
});

function chat(test: TestApp) {
  return test.app.inject({
    method: "POST",
    url: "/v1/chat/completions",
    headers: { authorization: `Bearer ${test.key}`, "content-type": "application/json" },
    payload: { messages: [{ role: "user", content: "hi" }] },
  });
}

async function health(test: TestApp) {
  return (await test.app.inject({ method: "GET", url: "/health" })).json() as {
    model: { state: string; file: string | null; loading_file: string | null; error: string | null; name: string | null };
  };
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (condition()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("switching the model at run time", () => {
  it("lets requests in flight finish on the old model, answers new ones 503 + Retry-After, then serves the new model", async () => {
    fixture = await setup();
    const { test, host, engines } = fixture;
    await host.load({ modelPath: "/m/a.gguf" });
    expect((await chat(test)).json().choices[0].message.content).toBe("from /m/a.gguf");

    const a = engines[0]!;
    let open!: () => void;
    a.gate = new Promise((r) => (open = r));
    const inFlight = [chat(test), chat(test)];
    await until(() => a.running === 2, "two requests in flight");

    const switching = host.load({ modelPath: "/m/b.gguf" });
    await until(() => host.status().state === "loading", "the switch to start");
    const during = await chat(test);
    expect(during.statusCode).toBe(503);
    expect(during.headers["retry-after"]).toBe("5");
    expect(during.json().error.code).toBe("model_loading");
    expect(await health(test)).toMatchObject({ model: { state: "loading", file: "a.gguf", loading_file: "b.gguf" } });
    // The old model is still there, serving its two requests; the new one has not been loaded over it.
    expect(a.closed).toBe(false);
    expect(fixture.loads).toEqual(["/m/a.gguf"]);

    open();
    for (const response of await Promise.all(inFlight)) {
      expect(response.statusCode).toBe(200);
      expect(response.json().choices[0].message.content).toBe("from /m/a.gguf");
    }
    await switching;
    expect(a.closed).toBe(true);
    const after = await chat(test);
    expect(after.statusCode).toBe(200);
    expect(after.json().choices[0].message.content).toBe("from /m/b.gguf");
    expect(await health(test)).toMatchObject({ model: { state: "ready", file: "b.gguf", loading_file: null, error: null } });
  });

  it("a file that is not a model is refused before anything is unloaded", async () => {
    fixture = await setup();
    const { test, host, engines } = fixture;
    await host.load({ modelPath: "/m/a.gguf" });
    await expect(host.load({ modelPath: "/m/notes.txt" })).rejects.toMatchObject({ kind: "invalid_request", code: "invalid_model_file" });
    expect(engines[0]!.closed).toBe(false);
    expect(fixture.loads).toEqual(["/m/a.gguf"]);
    expect((await chat(test)).json().choices[0].message.content).toBe("from /m/a.gguf");
    const state = await health(test);
    expect(state.model).toMatchObject({ state: "ready", file: "a.gguf" });
    expect(state.model.error).toMatch(/notes\.txt.*not a GGUF.*Still serving \/m\/a\.gguf/);
  });

  it("a model that fails to load puts the old one back, and says so", async () => {
    fixture = await setup();
    const { test, host } = fixture;
    await host.load({ modelPath: "/m/a.gguf" });
    fixture.failing.add("/m/broken.gguf");
    const failed = await host.load({ modelPath: "/m/broken.gguf" }).catch((err: unknown) => err);
    expect(failed).toMatchObject({ kind: "unavailable", code: "model_load_failed" });
    expect((failed as Error).message).toMatch(/Could not switch to \/m\/broken\.gguf: llama\.cpp cannot load .* Still serving \/m\/a\.gguf/);
    expect(fixture.loads).toEqual(["/m/a.gguf", "/m/broken.gguf", "/m/a.gguf"]);
    const response = await chat(test);
    expect(response.statusCode).toBe(200);
    expect(response.json().choices[0].message.content).toBe("from /m/a.gguf");
    const state = await health(test);
    expect(state.model).toMatchObject({ state: "ready", file: "a.gguf" });
    expect(state.model.error).toContain("Still serving");
    // The next good switch clears the error.
    await host.load({ modelPath: "/m/b.gguf" });
    expect((await health(test)).model).toMatchObject({ state: "ready", file: "b.gguf", error: null });
  });

  it("when the old model cannot come back either, there is no model and /health says why; nothing crashes", async () => {
    fixture = await setup();
    const { test, host } = fixture;
    await host.load({ modelPath: "/m/a.gguf" });
    fixture.failing.add("/m/broken.gguf");
    fixture.failing.add("/m/a.gguf");
    await expect(host.load({ modelPath: "/m/broken.gguf" })).rejects.toMatchObject({ code: "model_load_failed" });
    const state = await health(test);
    expect(state.model.state).toBe("error");
    expect(state.model.file).toBeNull();
    expect(state.model.error).toMatch(/Could not switch to \/m\/broken\.gguf.*Loading \/m\/a\.gguf again failed too/);
    const response = await chat(test);
    expect(response.statusCode).toBe(503);
    expect(Number(response.headers["retry-after"])).toBeGreaterThan(0);
    expect(response.json().error.code).toBe("model_not_loaded");
    expect(response.json().error.message).toContain("The last load failed");
    // And a later switch recovers.
    fixture.failing.clear();
    await host.load({ modelPath: "/m/b.gguf" });
    expect((await chat(test)).json().choices[0].message.content).toBe("from /m/b.gguf");
  });

  it("switches one at a time, in the order asked, and unload waits for running requests", async () => {
    fixture = await setup();
    const { test, host, engines } = fixture;
    await host.load({ modelPath: "/m/a.gguf" });
    const order = await Promise.all([host.load({ modelPath: "/m/b.gguf" }), host.load({ modelPath: "/m/c.gguf" })]);
    expect(order.map((e) => e.status().model?.path)).toEqual(["/m/b.gguf", "/m/c.gguf"]);
    expect(engines.map((e) => e.closed)).toEqual([true, true, false]);

    const c = engines[2]!;
    let open!: () => void;
    c.gate = new Promise((r) => (open = r));
    const running = chat(test);
    await until(() => c.running === 1, "a request in flight");
    const unloading = host.unload();
    await new Promise((r) => setTimeout(r, 20));
    expect(c.closed).toBe(false);
    open();
    expect((await running).statusCode).toBe(200);
    await unloading;
    expect(c.closed).toBe(true);
    expect((await health(test)).model).toMatchObject({ state: "no_model", file: null });
    expect((await chat(test)).json().error.code).toBe("model_not_loaded");
  });
});
