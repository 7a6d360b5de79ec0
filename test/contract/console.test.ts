// The desktop console's service, as the window's IPC calls reach it (dispatchConsoleCall), over a real server
// without a model; and the CORS policy the window's requests depend on.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { buildTinyWhisperModel } from "../../resources/test-model/tiny-whisper.js";
import { ConsoleService, dispatchConsoleCall, WINDOW_KEY_NAME } from "../../server/features/console/console-service.js";
import type {
  AccountView,
  ConsoleResult,
  CreatedAccountView,
  CreatedKeyView,
  DownloadView,
  KeyView,
  ModelsView,
  PasswordResetView,
  ServerInfo,
  StatusView,
  WarmStartView,
  WindowUpdate,
} from "../../server/features/console/contract.js";
import { LogBuffer } from "../../server/features/console/log-buffer.js";
import { ENGINE_BUILD_HINT_IN_WINDOW } from "../../server/engine/engine-build.js";
import { startServer, type RunningServer } from "../../server/index.js";
import { startModelServer, type ModelServer } from "../support/model-server.js";

let dataDir: string;
let server: RunningServer;
let service: ConsoleService;
let files: ModelServer;
const logs = new LogBuffer();

async function call<T>(method: string, ...args: unknown[]): Promise<T> {
  const result = await dispatchConsoleCall(service, method, args);
  if (!result.ok) throw new Error(`${method}: ${result.error.message}`);
  return result.value as T;
}

/** Polls the downloads until this one has ended (within 30 s); `seen` collects every view on the way. */
async function downloadEnded(started: DownloadView, seen: DownloadView[] = []): Promise<DownloadView> {
  const until = Date.now() + 30_000;
  let view = started;
  while (!["done", "failed", "cancelled"].includes(view.phase)) {
    if (Date.now() > until) throw new Error(`download did not end: ${JSON.stringify(view)}`);
    await new Promise((r) => setTimeout(r, 50));
    view = (await call<DownloadView[]>("downloads")).find((d) => d.id === started.id)!;
    seen.push(view);
  }
  return view;
}

async function chat(key: string): Promise<number> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "svc", messages: [{ role: "user", content: "hi" }] }),
  });
  return res.status;
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "svc-console-"));
  server = await startServer(
    { host: "127.0.0.1", port: 0, dataDir, threads: 1, sequences: 1, contextSize: 1024, gpu: "cpu", logLevel: "silent" },
    logs.log,
  );
  service = new ConsoleService({ server, host: "127.0.0.1", dataDir, version: "test", logs, portNote: null });
  files = await startModelServer();
});

afterAll(async () => {
  await files?.close();
  await server?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("console calls", () => {
  it("refuses a method outside the contract, as data", async () => {
    const result: ConsoleResult = await dispatchConsoleCall(service, "constructor", []);
    expect(result).toEqual({ ok: false, error: { message: "Unknown console method 'constructor'.", code: "unknown_method" } });
    expect((await dispatchConsoleCall(service, "revokeKey", ["key_nope"])).ok).toBe(false);
  });

  it("creates a key shown once, which works until it is revoked", async () => {
    const created = await call<CreatedKeyView>("createKey", { name: "ide", account: "team", reasoningTrace: true });
    expect(created.key).toMatch(/^sk-svc-[0-9a-f]{32}$/);
    expect(created).toMatchObject({ name: "ide", account: "team", reasoningTrace: true, revokedAt: null });
    expect(created.hint).toBe(`sk-svc-…${created.key.slice(-4)}`);
    const listed = (await call<KeyView[]>("listKeys")).find((k) => k.id === created.id)!;
    expect(listed).not.toHaveProperty("key");
    expect(JSON.stringify(await call("listKeys"))).not.toContain(created.key);
    // No model is loaded: a valid key gets past authentication to the 503.
    expect(await chat(created.key)).toBe(503);
    const off = await call<KeyView>("setKeyTrace", created.id, false);
    expect(off.reasoningTrace).toBe(false);
    const revoked = await call<KeyView>("revokeKey", created.id);
    expect(revoked.revokedAt).toEqual(expect.any(Number));
    expect(await chat(created.key)).toBe(401);
    const accounts = await call<Array<{ name: string; activeKeys: number }>>("listAccounts");
    expect(accounts.map((a) => a.name)).toEqual(expect.arrayContaining(["local", "team"]));
    expect(accounts.find((a) => a.name === "team")!.activeKeys).toBe(0);
  });

  it("creates an account with a temporary password and first key, disables, enables and resets it", async () => {
    const created = await call<CreatedAccountView>("createAccount", { name: "ops" });
    expect(created.temporaryPassword).toMatch(/^[a-z2-9]{4}(-[a-z2-9]{4}){4}$/);
    expect(created.key).toMatchObject({ account: "ops", name: "first key", key: expect.stringMatching(/^sk-svc-[0-9a-f]{32}$/) });
    expect(created.account).toMatchObject({ name: "ops", status: "active", canLogIn: true, mustChangePassword: true, activeKeys: 1 });
    expect(await chat(created.key.key)).toBe(503);
    const listed = (await call<AccountView[]>("listAccounts")).find((a) => a.name === "ops")!;
    expect(JSON.stringify(listed)).not.toContain(created.temporaryPassword);
    expect((await call<AccountView>("disableAccount", "ops")).status).toBe("disabled");
    expect(await chat(created.key.key)).toBe(401);
    expect((await call<AccountView>("enableAccount", "ops")).status).toBe("active");
    expect(await chat(created.key.key)).toBe(503);
    const reset = await call<PasswordResetView>("resetAccountPassword", "ops");
    expect(reset.temporaryPassword).not.toBe(created.temporaryPassword);
    expect(reset.account.mustChangePassword).toBe(true);
    // The window's own account stays enabled; a duplicate name is refused.
    expect(await dispatchConsoleCall(service, "disableAccount", ["local"])).toMatchObject({ ok: false, error: { code: "window_account" } });
    expect(await dispatchConsoleCall(service, "createAccount", [{ name: "ops" }])).toMatchObject({ ok: false, error: { code: "account_exists" } });
  });

  it("refuses a bad account name", async () => {
    const result = await dispatchConsoleCall(service, "createKey", [{ account: "has space" }]);
    expect(result).toMatchObject({ ok: false, error: { code: "invalid_account" } });
  });

  it("gives the window one key per session and retires the previous session's", async () => {
    const first = await call<string>("windowKey");
    expect(await call<string>("windowKey")).toBe(first);
    const nextSession = new ConsoleService({ server, host: "127.0.0.1", dataDir, version: "test", logs });
    const second = await nextSession.windowKey();
    expect(second).not.toBe(first);
    expect(await chat(first)).toBe(401);
    expect(await chat(second)).toBe(503);
    const windowKeys = (await call<KeyView[]>("listKeys")).filter((k) => k.name === WINDOW_KEY_NAME && k.revokedAt === null);
    expect(windowKeys).toHaveLength(1);
  });

  it("protects the window's key: marked, not revocable through the console, replaced when revoked elsewhere", async () => {
    const key = await call<string>("windowKey");
    const own = (await call<KeyView[]>("listKeys")).filter((k) => k.windowKey);
    expect(own).toHaveLength(1);
    expect(own[0]!.name).toBe(WINDOW_KEY_NAME);
    expect(await dispatchConsoleCall(service, "revokeKey", [own[0]!.id])).toMatchObject({ ok: false, error: { code: "window_key" } });
    expect(await chat(key)).toBe(503); // still valid (no model here, hence 503 rather than 401)
    server.keys.revoke(own[0]!.id); // as `svc keys revoke` does
    const renewed = await call<string>("windowKey");
    expect(renewed).not.toBe(key);
    expect(await chat(renewed)).toBe(503);
    expect(logs.since().some((l) => l.message.includes("revoked outside the window"))).toBe(true);
  });

  it("keeps the port setting for the next start, within 1024 to 65535", async () => {
    expect(await call<ServerInfo>("serverInfo")).toMatchObject({ portSetting: null, portFromEnv: false });
    expect(await dispatchConsoleCall(service, "setPort", [80])).toMatchObject({ ok: false, error: { code: "invalid_port" } });
    expect(await dispatchConsoleCall(service, "setPort", ["8080"])).toMatchObject({ ok: false, error: { code: "invalid_port" } });
    expect(await call<ServerInfo>("setPort", 9090)).toMatchObject({ portSetting: 9090 });
    expect(server.store.settings.get("desktop_port")?.value).toBe("9090");
    expect(await call<ServerInfo>("setPort", null)).toMatchObject({ portSetting: null });
  });

  it("keeps the upstream engines for the next start: addresses checked, the key never shown back", async () => {
    const info = await call<ServerInfo>("serverInfo");
    expect(info.upstreams).toEqual({
      urls: [],
      keys: "none",
      keyHint: null,
      affinity: true,
      fromStartup: false,
      affinityFromStartup: false,
      running: null,
      runningAffinity: true,
    });
    const refused = async (input: unknown) => {
      const result = await dispatchConsoleCall(service, "setUpstreams", [input]);
      expect(result, JSON.stringify(input)).toMatchObject({ ok: false, error: { code: "invalid_upstream" } });
      return (result as { error: { message: string } }).error.message;
    };
    expect(await refused({ urls: ["localhost:8080"], affinity: true })).toBe("localhost:8080: An upstream's address starts with http:// or https://, like http://192.168.1.20:8080.");
    expect(await refused({ urls: ["http://u:p@10.0.0.5:8080"], affinity: true })).toMatch(/user name and password/);
    expect(await refused({ urls: ["http://10.0.0.5:8080", "http://10.0.0.5:8080/"], affinity: true })).toMatch(/twice/);
    expect(await refused({ urls: ["http://10.0.0.5:8080"], key: "two words", affinity: true })).toMatch(/without spaces/);
    expect(await refused({ urls: "http://10.0.0.5:8080", affinity: true })).toMatch(/list/);
    expect(server.store.settings.get("engine.upstreams")).toBeUndefined();

    const key = "sk-upstream-0123456789abcdef";
    const saved = await call<ServerInfo>("setUpstreams", { urls: [" http://10.0.0.5:8080/ ", "http://10.0.0.6:8080"], key, affinity: false });
    expect(saved.upstreams).toMatchObject({ urls: ["http://10.0.0.5:8080", "http://10.0.0.6:8080"], keys: "one", keyHint: "cdef", affinity: false, running: null });
    expect(JSON.stringify(saved)).not.toContain(key);
    expect(JSON.parse(server.store.settings.get("engine.upstreams")!.value)).toEqual([
      { url: "http://10.0.0.5:8080", key },
      { url: "http://10.0.0.6:8080", key },
    ]);
    expect(server.store.settings.get("engine.upstream_affinity")?.value).toBe("off");
    expect(logs.since().some((l) => l.message.includes(key))).toBe(false);
    expect(logs.since().at(-1)?.message).toBe(
      "Upstream engines for the next start: http://10.0.0.5:8080, http://10.0.0.6:8080 (round-robin); it applies when the app restarts.",
    );

    // No key given: the addresses kept keep theirs, a new one gets the key they share; null removes it.
    await call("setUpstreams", { urls: ["http://10.0.0.6:8080", "http://10.0.0.7:8080"], affinity: true });
    expect(JSON.parse(server.store.settings.get("engine.upstreams")!.value)).toEqual([
      { url: "http://10.0.0.6:8080", key },
      { url: "http://10.0.0.7:8080", key },
    ]);
    // A short key: no hint (four characters would be too much of it).
    expect((await call<ServerInfo>("setUpstreams", { urls: ["http://10.0.0.6:8080"], key: "short", affinity: true })).upstreams).toMatchObject({ keys: "one", keyHint: null });
    expect((await call<ServerInfo>("setUpstreams", { urls: ["http://10.0.0.6:8080"], key: null, affinity: true })).upstreams).toMatchObject({ keys: "none", keyHint: null });
    expect(JSON.parse(server.store.settings.get("engine.upstreams")!.value)).toEqual([{ url: "http://10.0.0.6:8080" }]);
    // Keys of their own (written outside the window) are said to be so, and kept.
    server.store.settings.set("engine.upstreams", JSON.stringify([{ url: "http://a:1", key: "ka" }, { url: "http://b:2", key: "kb" }]));
    expect((await call<ServerInfo>("serverInfo")).upstreams).toMatchObject({ urls: ["http://a:1", "http://b:2"], keys: "each", keyHint: null });
    await call("setUpstreams", { urls: ["http://b:2", "http://a:1", "http://c:3"], affinity: true });
    expect(JSON.parse(server.store.settings.get("engine.upstreams")!.value)).toEqual([{ url: "http://b:2", key: "kb" }, { url: "http://a:1", key: "ka" }, { url: "http://c:3" }]);

    // None: the built-in engine.
    expect((await call<ServerInfo>("setUpstreams", { urls: [], affinity: true })).upstreams).toMatchObject({ urls: [], keys: "none", affinity: true });
    expect(server.store.settings.get("engine.upstreams")).toBeUndefined();
  });

  it("says what the engine reports of speculative decoding, with the acceptance rate", async () => {
    // The scripted engine's model names no speculation mode (as an upstream one): null.
    expect((await call<StatusView>("status")).speculation).toBeNull();
    // A model of the built-in engine's, and the host's usage totals as generations leave them.
    const host = server.engineHost;
    const real = host.status.bind(host);
    const spy = vi.spyOn(host, "status").mockImplementation(() => {
      const status = real();
      return { ...status, model: { ...(status.model ?? ({} as NonNullable<typeof status.model>)), speculation: "prompt-lookup" } };
    });
    const before = { ...host.usage };
    try {
      host.usage.draftedTokens = 0;
      host.usage.acceptedDraftTokens = 0;
      expect((await call<StatusView>("status")).speculation).toEqual({ mode: "prompt-lookup", draftModel: null, draftedTokens: 0, acceptedTokens: 0, acceptanceRate: null });
      host.usage.draftedTokens = 1234;
      host.usage.acceptedDraftTokens = 901;
      expect((await call<StatusView>("status")).speculation).toEqual({ mode: "prompt-lookup", draftModel: null, draftedTokens: 1234, acceptedTokens: 901, acceptanceRate: 901 / 1234 });
    } finally {
      spy.mockRestore();
      Object.assign(host.usage, before);
    }
    expect((await call<StatusView>("status")).speculation).toBeNull();
  });

  it("the engine-build hint reaches the window in its words, naming no command", async () => {
    const models = server.models;
    const real = models.hardware.bind(models);
    const spy = vi.spyOn(models, "hardware").mockImplementation(async () => ({
      ...(await real()),
      gpu: { backend: "cpu", devices: [], vramTotalBytes: 0, vramFreeBytes: 0, skipped: [], build: "prebuilt" },
    }));
    try {
      const hint = (await call<StatusView>("status")).gpu?.buildHint ?? null;
      if (process.platform === "linux") {
        expect(hint).toBe(ENGINE_BUILD_HINT_IN_WINDOW);
        expect(hint).not.toMatch(/svc engine|--help/);
      } else expect(hint).toBeNull();
    } finally {
      spy.mockRestore();
    }
  });

  it("says which build of ours runs: llama.cpp built here, or our addon alone on the prebuilt libraries", async () => {
    const models = server.models;
    const real = models.hardware.bind(models);
    const cases = [
      [{ build: "local", localBuild: "addon" }, { build: "local", localBuild: "addon" }],
      [{ build: "local", localBuild: "full" }, { build: "local", localBuild: "full" }],
      [{ build: "local" }, { build: "local", localBuild: null }],
      [{ build: "prebuilt" }, { build: "prebuilt", localBuild: null }],
    ] as const;
    for (const [gpu, view] of cases) {
      const spy = vi.spyOn(models, "hardware").mockImplementation(async () => ({
        ...(await real()),
        gpu: { backend: "cpu", devices: [], vramTotalBytes: 0, vramFreeBytes: 0, skipped: [], ...gpu },
      }));
      try {
        expect((await call<StatusView>("status")).gpu).toMatchObject(view);
      } finally {
        spy.mockRestore();
      }
    }
  });

  it("counts API requests and errors for the Server page", async () => {
    const before = (await call<StatusView>("status")).usage;
    await chat("sk-svc-wrong");
    const after = (await call<StatusView>("status")).usage;
    expect(after.requests).toBe(before.requests + 1);
    expect(after.errors).toBe(before.errors + 1);
  });

  it("suggests models sized to this machine", async () => {
    const { suggested } = await call<ModelsView>("listModels");
    expect(suggested.map((m) => m.source)).toEqual([
      "hf:Qwen/Qwen3-0.6B-GGUF:Q8_0",
      "hf:Qwen/Qwen3-1.7B-GGUF:Q8_0",
      "hf:Qwen/Qwen3-4B-GGUF:Q4_K_M",
      "hf:ggml-org/gemma-3-4b-it-GGUF:Q4_K_M",
      "hf:Qwen/Qwen3-8B-GGUF:Q4_K_M",
      "hf:Qwen/Qwen3-14B-GGUF:Q4_K_M",
    ]);
    expect(suggested.filter((m) => m.recommended)).toHaveLength(1);
    // One sees images (its projector comes with it).
    expect(suggested.filter((m) => m.vision).map((m) => m.title)).toEqual(["Gemma 3 4B (Q4_K_M)"]);
    expect(suggested[0]!.fit).not.toBe("too_big");
  });

  it("reports the server's URLs and keeps the LAN-exposure setting for the next start", async () => {
    const info = await call<ServerInfo>("serverInfo");
    expect(info).toMatchObject({ baseUrl: server.url, openaiBaseUrl: `${server.url}/v1`, anthropicBaseUrl: server.url, lanExposure: false, lanExposed: false });
    const on = await call<ServerInfo>("setLanExposure", true);
    expect(on).toMatchObject({ lanExposure: true, lanExposed: false });
    expect(server.store.settings.get("lan_exposure")?.value).toBe("on");
    await call("setLanExposure", false);
  });

  it("reports status and remembers the GPU choice", async () => {
    const status = await call<StatusView>("status");
    expect(status.model.state).toBe("no_model");
    expect(await call("firstRun")).toMatchObject({ needsModel: true, recommended: { source: "hf:Qwen/Qwen3-4B-GGUF:Q4_K_M" }, vision: { source: "hf:ggml-org/gemma-3-4b-it-GGUF:Q4_K_M" } });
    expect(status.cpuCores).toBeGreaterThan(0);
    expect((await dispatchConsoleCall(service, "setGpuPreference", ["quantum"])).ok).toBe(false);
    const cpu = await call<StatusView>("setGpuPreference", "cpu");
    expect(cpu.gpuPreference).toBe("cpu");
    expect(server.store.settings.get("gpu_preference")?.value).toBe("cpu");
  });

  it("downloads a model with progress and lists it", async () => {
    const model = buildTinyModel({ seed: 7 });
    files.files.set("/models/console.gguf", model);
    files.bytesPerSecond = model.length * 2; // about half a second
    const started = await call<DownloadView>("startDownload", { source: `${files.url}/models/console.gguf` });
    expect(started.phase).toBe("resolving");
    const seen: DownloadView[] = [];
    const view = await downloadEnded(started, seen);
    expect(view).toMatchObject({ phase: "done", file: "console.gguf", downloadedBytes: model.length });
    expect(seen.some((v) => v.phase === "downloading" && v.downloadedBytes > 0 && v.downloadedBytes < model.length)).toBe(true);
    const models = await call<ModelsView>("listModels");
    expect(models.models.map((m) => m.file)).toContain("console.gguf");
    expect(models.active).toBe("console.gguf");
    expect(await call("firstRun")).toMatchObject({ needsModel: false });
    expect(logs.since().some((l) => l.message.includes("Downloaded console.gguf"))).toBe(true);
    // An ended download can be dismissed; a running one cannot.
    expect(await call<DownloadView[]>("dismissDownload", started.id)).toEqual([]);
    expect((await dispatchConsoleCall(service, "dismissDownload", [started.id])).ok).toBe(false);
  });

  it("speech models: kind speech downloads, lists, uses and removes them; bad input is refused as data", async () => {
    const speech = buildTinyWhisperModel();
    files.files.set("/whisper/ggml-console.bin", speech);
    files.bytesPerSecond = null;
    const empty = await call<ModelsView>("listModels");
    expect(empty.speech).toMatchObject({ active: null, models: [], recommended: { file: "ggml-base.bin", title: "Whisper base (multilingual)", approxBytes: 148_000_000, downloaded: false } });
    expect(empty.speech.directory).toBe(join(dataDir, "models", "speech"));
    const started = await call<DownloadView>("startDownload", { source: `${files.url}/whisper/ggml-console.bin`, kind: "speech" });
    expect(started).toMatchObject({ kind: "speech", phase: "resolving" });
    const view = await downloadEnded(started);
    expect(view).toMatchObject({ phase: "done", kind: "speech", file: "ggml-console.bin", downloadedBytes: speech.length });
    expect(logs.since().some((l) => l.message === "Downloaded ggml-console.bin (now the speech model).")).toBe(true);
    const listed = await call<ModelsView>("listModels");
    expect(listed.speech.active).toBe("ggml-console.bin");
    expect(listed.speech.models).toEqual([
      { file: "ggml-console.bin", sizeBytes: speech.length, active: true, sizeLabel: null, weights: "F32", source: `${files.url}/whisper/ggml-console.bin`, error: null },
    ]);
    // Kept apart: not a language model.
    expect(listed.models.map((m) => m.file)).not.toContain("ggml-console.bin");
    expect(server.store.settings.get("speech_model")?.value).toBe("ggml-console.bin");

    // Bad input: the console's error format, naming what is wrong.
    expect(await dispatchConsoleCall(service, "startDownload", [{ source: "x", kind: "whisper" }])).toEqual({
      ok: false,
      error: { message: 'A model kind is "llm" or "speech", not "whisper".', code: "invalid_model_kind" },
    });
    expect(await dispatchConsoleCall(service, "startDownload", [{ source: "hf:a/b/model.gguf", kind: "speech" }])).toMatchObject({
      ok: false,
      error: { message: expect.stringContaining("a .gguf file is a language model"), code: "invalid_model_source" },
    });
    expect(await dispatchConsoleCall(service, "useModel", ["nope.bin", { kind: "speech" }])).toMatchObject({ ok: false, error: { code: "model_not_found" } });
    expect(await dispatchConsoleCall(service, "useModel", ["ggml-console.bin", { kind: 7 }])).toMatchObject({ ok: false, error: { code: "invalid_model_kind" } });
    expect(await dispatchConsoleCall(service, "removeModel", ["../x.bin", { kind: "speech" }])).toMatchObject({ ok: false, error: { code: "invalid_model_name" } });
    expect(await dispatchConsoleCall(service, "removeModel", ["ggml-console.bin", { kind: "speech" }])).toMatchObject({
      ok: false,
      error: { message: expect.stringContaining("is the speech model in use"), code: "model_active" },
    });
    // A language model of that name is not there: the kinds do not mix.
    expect(await dispatchConsoleCall(service, "removeModel", ["ggml-console.bin"])).toMatchObject({ ok: false, error: { code: "model_not_found" } });

    const removed = await call<ModelsView>("removeModel", "ggml-console.bin", { kind: "speech", force: true });
    expect(removed.speech).toMatchObject({ active: null, models: [] });
    expect(server.store.settings.get("speech_model")).toBeUndefined();
    expect(existsSync(join(dataDir, "models", "speech", "ggml-console.bin"))).toBe(false);
    await call("dismissDownload", started.id);
  });

  it("keeps recent log lines for the window", async () => {
    logs.log("warn", "a line for the window");
    const lines = await call<Array<{ seq: number; message: string }>>("logs");
    const last = lines.at(-1)!;
    expect(last.message).toBe("a line for the window");
    expect(await call("logs", last.seq)).toEqual([]);
  });
});

describe("the window's event stream, its account, and a model's own settings", () => {
  it("watch: everything at first, then what changed, pushed when it changes (an upload by any client)", async () => {
    const first = await call<WindowUpdate>("watch", 0);
    expect(Object.keys(first.changed).sort()).toEqual(["batches", "downloads", "files", "firstRun", "info", "logSeq", "models", "status", "warmStart"]);
    expect(first.version).toBeGreaterThan(0);
    // Nothing changed since: the call waits; an upload with the window's key wakes it with the new file.
    const next = call<WindowUpdate>("watch", first.version);
    const form = new FormData();
    form.append("purpose", "user_data");
    form.append("file", new Blob(["pushed, not polled"], { type: "text/plain" }), "pushed.txt");
    const upload = await fetch(`${server.url}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${await call<string>("windowKey")}` }, body: form });
    expect(upload.status).toBe(200);
    // The window follows the stream as it does: each update from the version it has (the status may come first).
    let update = await next;
    expect(update.version).toBeGreaterThan(first.version);
    for (let i = 0; i < 5 && !update.changed.files; i++) update = await call<WindowUpdate>("watch", update.version);
    expect(update.changed.files?.map((f) => f.filename)).toContain("pushed.txt");
  });

  it("a disabled window account: windowKey says what fixes it (the Keys page), in the window's words", async () => {
    server.accounts.disable("local");
    try {
      const refused = await dispatchConsoleCall(service, "windowKey", []);
      expect(refused).toMatchObject({ ok: false, error: { code: "window_account_disabled" } });
      const message = (refused as { error: { message: string } }).error.message;
      expect(message).toContain("Keys page");
      expect(message).not.toMatch(/svc |--|`/);
      // The window does not offer to disable its own account, and the console refuses it in its words too.
      server.accounts.enable("local");
      const disable = await dispatchConsoleCall(service, "disableAccount", ["local"]);
      expect(disable).toMatchObject({ ok: false, error: { code: "window_account" } });
      expect((disable as { error: { message: string } }).error.message).not.toMatch(/svc |--|`/);
    } finally {
      server.accounts.enable("local");
    }
  });

  it("setModelSettings: saved per model, the loaded model reloads with them, and automatic again", async () => {
    await call("useModel", "console.gguf");
    const before = await call<StatusView>("status");
    expect(before.model).toMatchObject({ state: "ready", contextSize: 1024, settings: { contextSize: null, sequences: null, gpuLayers: null, threads: null } });
    expect(before.model.trainContextSize).toBeGreaterThan(2048);
    const after = await call<StatusView>("setModelSettings", null, { contextSize: 2048, sequences: null, gpuLayers: null, threads: 1 });
    expect(after.model).toMatchObject({ state: "ready", contextSize: 2048, threads: 1, settings: { contextSize: 2048, threads: 1 } });
    expect((await call<ModelsView>("listModels")).models.find((m) => m.file === "console.gguf")?.settings).toEqual({ contextSize: 2048, sequences: null, gpuLayers: null, threads: 1, draftModel: null });
    expect(server.models.loadOptions(server.engineHost.files().current!)).toMatchObject({ contextSize: 2048, threads: 1 });
    // Out of range: refused as data, nothing changes.
    expect(await dispatchConsoleCall(service, "setModelSettings", [null, { contextSize: 12 }])).toMatchObject({ ok: false, error: { code: "invalid_model_settings" } });
    const automatic = await call<StatusView>("setModelSettings", "console.gguf", { contextSize: null, sequences: null, gpuLayers: null, threads: null });
    expect(automatic.model).toMatchObject({ contextSize: 1024, settings: { contextSize: null } });
  });

  it("setModelSettings' draft model: a file of the models folder loads with the model; a missing one, the model itself or another vocabulary is refused and nothing changes", async () => {
    await call("useModel", "console.gguf");
    const none = { contextSize: null, sequences: null, gpuLayers: null, threads: null };
    copyFileSync(join(dataDir, "models", "console.gguf"), join(dataDir, "models", "draft.gguf"));
    const drafted = await call<StatusView>("setModelSettings", null, { ...none, draftModel: "draft.gguf" });
    expect(drafted.model).toMatchObject({ state: "ready", settings: { draftModel: "draft.gguf" } });
    expect(drafted.speculation).toMatchObject({ mode: "draft-model", draftModel: "svc tiny test model" });
    expect(server.models.loadOptions(server.engineHost.files().current!).draftModelPath).toBe(join(dataDir, "models", "draft.gguf"));
    expect(logs.since().some((l) => l.message.startsWith("Draft model svc tiny test model loaded for speculation"))).toBe(true);

    expect(await dispatchConsoleCall(service, "setModelSettings", [null, { ...none, draftModel: "nowhere.gguf" }])).toMatchObject({
      ok: false,
      error: { code: "draft_model_not_found", message: "That draft model file is not in the models folder. Pick one of the files the Model page lists." },
    });
    expect(await dispatchConsoleCall(service, "setModelSettings", [null, { ...none, draftModel: "console.gguf" }])).toMatchObject({ ok: false, error: { code: "invalid_model_settings" } });
    expect(await dispatchConsoleCall(service, "setModelSettings", [null, { ...none, draftModel: 42 }])).toMatchObject({ ok: false, error: { code: "invalid_model_settings", message: "A draft model is the name of a model file (got 42)." } });
    // The tiny model of another seed: as many tokens, other words (llama.cpp's own check finds them).
    writeFileSync(join(dataDir, "models", "other-vocabulary.gguf"), buildTinyModel());
    const refused = await dispatchConsoleCall(service, "setModelSettings", [null, { ...none, draftModel: "other-vocabulary.gguf" }]);
    expect(refused).toMatchObject({
      ok: false,
      error: { code: "model_load_failed", message: expect.stringMatching(/^The model did not load with these settings, so it is back on its previous ones\. .*cannot guess for this model: .*vocabulary/) },
    });
    // The model is back on its previous settings, with its draft model.
    const after = await call<StatusView>("status");
    expect(after.model).toMatchObject({ state: "ready", settings: { draftModel: "draft.gguf" } });
    expect(after.speculation).toMatchObject({ mode: "draft-model" });

    const off = await call<StatusView>("setModelSettings", null, { ...none, draftModel: null });
    expect(off.model?.settings.draftModel).toBeNull();
    expect(off.speculation).toMatchObject({ mode: "prompt-lookup", draftModel: null });
  });
});

describe("warm start (issue 43): the window's switch and the saved prefixes", () => {
  const health = async () => ((await (await fetch(`${server.url}/health`)).json()) as { warm_start: { enabled: boolean; prefixes?: unknown[] } }).warm_start;
  const warmDir = () => join(dataDir, "warm-start");

  it("off by default; on keeps the setting and reloads the model with it, and later loads keep it; off reloads without", async () => {
    await call("useModel", "console.gguf");
    expect(await call<WarmStartView>("warmStart")).toEqual({ enabled: false, forced: false, active: false, minTokens: 1024, maxBytes: 8 * 2 ** 30, prefixes: [] });
    expect(await health()).toEqual({ enabled: false });

    const on = await call<WarmStartView>("setWarmStart", true);
    expect(on).toMatchObject({ enabled: true, forced: false, active: true, minTokens: 1024 });
    expect(server.store.settings.get("warm_start")?.value).toBe("on");
    expect(await health()).toEqual({ enabled: true, min_tokens: 1024, prefixes: [] });
    expect(logs.since().some((l) => l.message === "Warm start on: loading the model again.")).toBe(true);
    // A model's own settings load it again: warm start stays on (it is part of every load's options).
    await call("setModelSettings", null, { contextSize: 2048, sequences: null, gpuLayers: null, threads: null });
    expect(await call<WarmStartView>("warmStart")).toMatchObject({ enabled: true, active: true });
    expect(server.models.loadOptions(server.engineHost.files().current!).warmStart).toEqual({ dir: warmDir(), maxBytes: 8 * 2 ** 30 });
    await call("setModelSettings", null, { contextSize: null, sequences: null, gpuLayers: null, threads: null });

    const off = await call<WarmStartView>("setWarmStart", false);
    expect(off).toMatchObject({ enabled: false, active: false });
    expect(server.store.settings.get("warm_start")?.value).toBe("off");
    expect(await health()).toEqual({ enabled: false });
    expect(server.models.loadOptions(server.engineHost.files().current!).warmStart).toBeUndefined();
    // Not a boolean: refused as data, nothing changes.
    expect(await dispatchConsoleCall(service, "setWarmStart", ["on"])).toMatchObject({ ok: false, error: { code: "invalid_warm_start" } });
    expect(server.store.settings.get("warm_start")?.value).toBe("off");
  });

  it("lists the saved prefixes (kept while off), pushes them through watch, and clears them from disk", async () => {
    const before = await call<WindowUpdate>("watch", 0);
    expect(before.changed.warmStart?.prefixes).toEqual([]);
    // Two states as the engine names them (<key>-<tokens>.state), as a request's prompt would have saved them.
    mkdirSync(warmDir(), { recursive: true });
    writeFileSync(join(warmDir(), `${"a".repeat(64)}-2048.state`), Buffer.alloc(3000));
    writeFileSync(join(warmDir(), `${"b".repeat(64)}-1500.state`), Buffer.alloc(2000));
    writeFileSync(join(warmDir(), "notes.txt"), "not a state");
    const listed = await call<WarmStartView>("warmStart");
    expect(listed.prefixes.map((p) => ({ ...p, lastUsed: typeof p.lastUsed }))).toEqual(
      expect.arrayContaining([
        { id: "aaaaaaaaaaaa", tokens: 2048, bytes: 3000, lastUsed: "number" },
        { id: "bbbbbbbbbbbb", tokens: 1500, bytes: 2000, lastUsed: "number" },
      ]),
    );
    expect(listed.prefixes).toHaveLength(2);

    // A request to the API that ends makes the feed read them again (what a long prompt's first request saves).
    const pending = call<WindowUpdate>("watch", before.version);
    expect((await fetch(`${server.url}/v1/models`)).ok).toBe(true);
    let update = await pending;
    for (let i = 0; i < 5 && !update.changed.warmStart; i++) update = await call<WindowUpdate>("watch", update.version);
    expect(update.changed.warmStart?.prefixes).toHaveLength(2);
    const next = call<WindowUpdate>("watch", update.version);
    const cleared = await call<WarmStartView>("clearWarmPrefixes");
    expect(cleared.prefixes).toEqual([]);
    update = await next;
    for (let i = 0; i < 5 && !update.changed.warmStart; i++) update = await call<WindowUpdate>("watch", update.version);
    expect(update.changed.warmStart?.prefixes).toEqual([]);
    expect(existsSync(warmDir()) ? readdirSync(warmDir()).filter((n) => n.endsWith(".state")) : []).toEqual([]);
    expect(logs.since().some((l) => l.message === "Warm start: deleted 2 saved prompt prefixes.")).toBe(true);
  });

  it("upstreams set by the start-up options: the setting is kept but said to wait", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-console-upstream-"));
    const startLogs = new LogBuffer();
    // No model: nothing is loaded, so the address need not answer.
    const started = await startServer(
      { host: "127.0.0.1", port: 0, dataDir: dir, threads: 1, sequences: 1, contextSize: 1024, gpu: "cpu", logLevel: "silent", upstreams: [{ url: "http://127.0.0.1:9" }], upstreamAffinity: false },
      startLogs.log,
    );
    const startedService = new ConsoleService({ server: started, host: "127.0.0.1", dataDir: dir, version: "test", logs: startLogs, portNote: null });
    try {
      expect((await startedService.serverInfo()).upstreams).toEqual({
        urls: [],
        keys: "none",
        keyHint: null,
        affinity: true,
        fromStartup: true,
        affinityFromStartup: true,
        running: ["http://127.0.0.1:9"],
        runningAffinity: false,
      });
    } finally {
      startedService.close();
      await started.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("set by the start-up options: shown as forced, and the switch is refused in the window's words", async () => {
    const forcedDir = mkdtempSync(join(tmpdir(), "svc-console-warm-"));
    const forcedLogs = new LogBuffer();
    const forced = await startServer(
      { host: "127.0.0.1", port: 0, dataDir: forcedDir, threads: 1, sequences: 1, contextSize: 1024, gpu: "cpu", logLevel: "silent", warmStart: true },
      forcedLogs.log,
    );
    const forcedService = new ConsoleService({ server: forced, host: "127.0.0.1", dataDir: forcedDir, version: "test", logs: forcedLogs, portNote: null });
    try {
      expect(await forcedService.warmStart()).toMatchObject({ enabled: true, forced: true, active: false, prefixes: [] });
      const refused = await dispatchConsoleCall(forcedService, "setWarmStart", [false]);
      expect(refused).toMatchObject({ ok: false, error: { code: "warm_start_forced" } });
      expect((refused as { error: { message: string } }).error.message).not.toMatch(/svc |--|`|SVC_/);
      expect(forced.store.settings.get("warm_start")).toBeUndefined();
      expect(forced.models.warmStart()).toMatchObject({ enabled: true, forced: true });
    } finally {
      forcedService.close();
      await forced.close();
      rmSync(forcedDir, { recursive: true, force: true });
    }
  });
});

describe("CORS", () => {
  async function preflight(origin: string) {
    return fetch(`${server.url}/v1/chat/completions`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type" },
    });
  }

  it("lets pages on this machine and the desktop window call the API", async () => {
    for (const origin of ["http://127.0.0.1:5173", "http://localhost:3000", "app://svc"]) {
      const res = await preflight(origin);
      expect(res.status, origin).toBe(204);
      expect(res.headers.get("access-control-allow-origin"), origin).toBe(origin);
      expect(res.headers.get("access-control-allow-headers")).toContain("authorization");
    }
    const res = await fetch(`${server.url}/v1/models`, { headers: { origin: "http://localhost:3000" } });
    expect(res.headers.get("access-control-allow-origin")).toBe("http://localhost:3000");
    expect(res.headers.get("access-control-expose-headers")).toContain("x-request-id");
  });

  it("gives other origins no CORS headers", async () => {
    for (const origin of ["https://evil.example", "http://localhost.evil.example", "null"]) {
      const res = await preflight(origin);
      expect(res.headers.get("access-control-allow-origin"), origin).toBeNull();
    }
  });
});
