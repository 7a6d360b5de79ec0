// The active-model controller with scripted engines: a server following the setting is told of another
// process's change (a watched marker file), not by polling it, and a failed switch puts the setting and the
// engine back together.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { EngineHost, type EngineLoader } from "../../server/engine/engine-host.js";
import { ModelsService } from "../../server/features/models/models-service.js";
import { Store } from "../../server/store/store.js";
import { FakeEngine } from "../support/fake-engine.js";

interface Fixture {
  dataDir: string;
  host: EngineHost;
  loads: string[];
  failing: Set<string>;
  /** The running server's service (it follows the setting) and its own store connection. */
  server: ModelsService;
  /** Another process's view of the same data dir (the CLI): its own store connection, no engine. */
  cli: () => ModelsService;
  close(): Promise<void>;
}

function setup(): Fixture {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-follow-"));
  mkdirSync(join(dataDir, "models"), { recursive: true });
  writeFileSync(join(dataDir, "models", "a.gguf"), buildTinyModel({ seed: 101 }));
  writeFileSync(join(dataDir, "models", "b.gguf"), buildTinyModel({ seed: 202 }));
  const loads: string[] = [];
  const failing = new Set<string>();
  const loader: EngineLoader = async (options) => {
    loads.push(options.modelPath);
    if (failing.has(options.modelPath)) throw new Error(`llama.cpp cannot load ${options.modelPath}`);
    return new FakeEngine();
  };
  const host = new EngineHost({ loader });
  const stores = [Store.open(dataDir)];
  const server = new ModelsService({ store: stores[0]!, dataDir, host });
  const cli = () => {
    const store = Store.open(dataDir);
    stores.push(store);
    return new ModelsService({ store, dataDir });
  };
  return {
    dataDir,
    host,
    loads,
    failing,
    server,
    cli,
    async close() {
      await server.close();
      await host.close();
      for (const store of stores) store.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function until(condition: () => boolean, what: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

let fixture: Fixture | null = null;
afterEach(async () => {
  vi.restoreAllMocks();
  await fixture?.close();
  fixture = null;
});

describe("following the active model", () => {
  it("switches as soon as another process sets it, with no timer polling the setting", async () => {
    fixture = setup();
    const { server, loads, dataDir, host } = fixture;
    await server.use("a.gguf");
    const intervals = vi.spyOn(globalThis, "setInterval");
    server.follow();
    // Structurally: following starts no interval timer (the 2-second poll is gone); a watch tells it.
    expect(intervals).not.toHaveBeenCalled();

    const told = Date.now();
    await fixture.cli().use("b");
    // The old poll took up to 2 s; a push is seen well within that (generous, for a loaded machine).
    await until(() => host.files().current === join(dataDir, "models", "b.gguf"), "the switch to b.gguf", 1_500);
    expect(Date.now() - told).toBeLessThan(1_500);
    expect(loads).toEqual([join(dataDir, "models", "a.gguf"), join(dataDir, "models", "b.gguf")]);

    // A removal by another process clears the setting: the server unloads.
    await fixture.cli().remove("b.gguf", { force: true });
    await until(() => host.files().current === null, "the unload", 1_500);
    expect(server.active()).toBeNull();
    expect(intervals).not.toHaveBeenCalled();
  });

  it("a change written while a switch runs is switched to after it", async () => {
    fixture = setup();
    const { server, host, dataDir } = fixture;
    server.follow();
    const cli = fixture.cli();
    await cli.use("a.gguf");
    await cli.use("b.gguf");
    await until(() => host.files().current === join(dataDir, "models", "b.gguf"), "the switch to b.gguf", 5_000);
    expect(server.active()?.file).toBe("b.gguf");
  });
});

describe("a failed switch puts back the engine and the setting together", () => {
  it("through use: the old model serves again and stays the active one; the error says so", async () => {
    fixture = setup();
    const { server, host, loads, dataDir, failing } = fixture;
    const a = join(dataDir, "models", "a.gguf");
    const b = join(dataDir, "models", "b.gguf");
    await server.use("a.gguf");
    failing.add(b);
    const error = await server.use("b.gguf").then(
      () => null,
      (err: unknown) => err as Error & { code?: string },
    );
    expect(error).toMatchObject({ kind: "unavailable", code: "model_load_failed" });
    expect(error?.message).toMatch(/Could not switch to .*b\.gguf: llama\.cpp cannot load .* Still serving .*a\.gguf/);
    expect(loads).toEqual([a, b, a]);
    expect(host.files()).toEqual({ current: a, pending: null });
    expect(server.active()?.file).toBe("a.gguf");
    expect(host.status().error).toContain("Still serving");
  });

  it("when the old model cannot come back either, no model is loaded and none is active", async () => {
    fixture = setup();
    const { server, host, dataDir, failing } = fixture;
    await server.use("a.gguf");
    failing.add(join(dataDir, "models", "b.gguf"));
    failing.add(join(dataDir, "models", "a.gguf"));
    await expect(server.use("b.gguf")).rejects.toMatchObject({ code: "model_load_failed" });
    expect(host.files().current).toBeNull();
    expect(host.status().error).toMatch(/Could not switch to .*b\.gguf.*Loading .*a\.gguf again failed too/);
    expect(server.active()).toBeNull();
  });

  it("through follow: another process's choice that fails to load leaves the old model serving and active", async () => {
    fixture = setup();
    const { server, host, loads, dataDir, failing } = fixture;
    const a = join(dataDir, "models", "a.gguf");
    const b = join(dataDir, "models", "b.gguf");
    await server.use("a.gguf");
    server.follow();
    failing.add(b);
    const cli = fixture.cli();
    await cli.use("b.gguf");
    await until(() => loads.length === 3, "the switch and the restore", 5_000);
    await until(() => host.files().pending === null && cli.active()?.file === "a.gguf", "the setting to be put back", 5_000);
    expect(loads).toEqual([a, b, a]);
    expect(host.files().current).toBe(a);
    expect(server.active()?.file).toBe("a.gguf");
  });
});
