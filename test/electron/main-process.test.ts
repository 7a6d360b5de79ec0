// The built main process (dist/main/main.js) against a stand-in for the electron module, so its wiring runs on
// every machine, Electron binary or not: config and data dir, the LAN setting read before start, the
// in-process server, the IPC handler and its sender check, the app:// handler, the tray, and the quit.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { CONSOLE_CHANNEL, type ConsoleResult, type ServerInfo } from "../../server/features/console/contract.js";
import { LAN_EXPOSURE_SETTING } from "../../server/features/console/console-service.js";
import { Store } from "../../server/store/store.js";
import { portAnswers } from "../support/port.js";

type Listener = (...args: unknown[]) => unknown;

const fake = vi.hoisted(() => {
  const listeners = new Map<string, Listener[]>();
  let ready!: () => void;
  const readyPromise = new Promise<void>((resolve) => (ready = resolve));
  const state = {
    listeners,
    ready,
    paths: {} as Record<string, string>,
    schemes: [] as unknown[],
    protocolHandler: null as null | ((request: Request) => Promise<Response>),
    ipcHandlers: new Map<string, Listener>(),
    windows: [] as Array<{ url: string | null; options: unknown; webContents: object }>,
    trays: [] as Array<{ menu: Array<{ label?: string; enabled?: boolean }>; tooltip: string }>,
    exitCode: null as number | null,
    errors: [] as string[],
    exited: null as null | ((code: number) => void),
    utilityForks: [] as string[],
  };
  const exitedPromise = new Promise<number>((resolve) => (state.exited = resolve));
  const on = (event: string, fn: Listener) => {
    listeners.set(event, [...(listeners.get(event) ?? []), fn]);
  };
  const emit = (event: string, ...args: unknown[]) => {
    for (const fn of listeners.get(event) ?? []) fn(...args);
  };
  class BrowserWindow {
    url: string | null = null;
    webContents = { id: 1 };
    constructor(readonly options: unknown) {
      state.windows.push(this);
    }
    once() {}
    on() {}
    isDestroyed() {
      return false;
    }
    isMinimized() {
      return false;
    }
    show() {}
    focus() {}
    async loadURL(url: string) {
      this.url = url;
    }
  }
  class Tray {
    menu: Array<{ label?: string; enabled?: boolean }> = [];
    tooltip = "";
    constructor() {
      state.trays.push(this);
    }
    on() {}
    setToolTip(text: string) {
      this.tooltip = text;
    }
    setContextMenu(menu: Array<{ label?: string; enabled?: boolean }>) {
      this.menu = menu;
    }
    isDestroyed() {
      return false;
    }
    destroy() {}
  }
  const electron = {
    app: {
      isPackaged: false,
      on,
      setName() {},
      setPath(name: string, path: string) {
        state.paths[name] = path;
      },
      requestSingleInstanceLock: () => true,
      whenReady: () => readyPromise,
      quit() {
        const event = { defaultPrevented: false, preventDefault() {
          this.defaultPrevented = true;
        } };
        emit("before-quit", event);
        if (!event.defaultPrevented) electron.app.exit(0);
      },
      exit(code: number) {
        state.exitCode = code;
        state.exited?.(code);
      },
    },
    BrowserWindow,
    Tray,
    Menu: { buildFromTemplate: (template: unknown) => template },
    nativeImage: {
      createFromBuffer: () => ({ isEmpty: () => false, resize: () => ({}) }),
      createEmpty: () => ({ isEmpty: () => true }),
    },
    Notification: { isSupported: () => false },
    clipboard: { writeText() {} },
    dialog: {
      showErrorBox(title: string, message: string) {
        state.errors.push(`${title}: ${message}`);
      },
    },
    ipcMain: {
      handle(channel: string, fn: Listener) {
        state.ipcHandlers.set(channel, fn);
      },
    },
    protocol: {
      registerSchemesAsPrivileged(schemes: unknown[]) {
        state.schemes.push(...schemes);
      },
      handle(_scheme: string, fn: (request: Request) => Promise<Response>) {
        state.protocolHandler = fn;
      },
    },
    session: { defaultSession: { setPermissionRequestHandler() {} } },
    shell: { openExternal: async () => undefined },
    // The engine process: a forked Node process carrying the same messages as Electron's utility process.
    utilityProcess: {
      fork(modulePath: string, args: string[], options?: { env?: NodeJS.ProcessEnv }) {
        state.utilityForks.push(modulePath);
        const { fork } = process.getBuiltinModule("node:child_process");
        const child = fork(modulePath, args, { env: options?.env, stdio: ["ignore", "pipe", "pipe", "ipc"] });
        const utility = {
          stdout: child.stdout,
          stderr: child.stderr,
          postMessage: (message: unknown) => void child.send(message as never),
          kill: () => child.kill(),
          on(event: string, fn: Listener) {
            if (event === "message") child.on("message", fn);
            else if (event === "exit") child.on("exit", (code) => fn(code ?? 1));
            return utility;
          },
        };
        return utility;
      },
    },
  };
  return { electron, state, exitedPromise };
});

vi.mock("electron", () => ({ ...fake.electron, default: fake.electron }));

const dataDir = mkdtempSync(join(tmpdir(), "svc-main-"));
const { state } = fake;

async function call(method: string, args: unknown[] = [], frameUrl = "app://svc/index.html", sender: object = state.windows[0]!.webContents): Promise<ConsoleResult> {
  const handler = state.ipcHandlers.get(CONSOLE_CHANNEL)!;
  return (await handler({ sender, senderFrame: { url: frameUrl } }, method, args)) as ConsoleResult;
}

describe("the main process (electron stood in for)", () => {
  let info: ServerInfo;

  beforeAll(async () => {
    // LAN exposure stored as on: the server must listen on every interface.
    const store = Store.open(dataDir);
    store.settings.set(LAN_EXPOSURE_SETTING, "on");
    store.close();
    vi.stubEnv("SVC_DATA_DIR", dataDir);
    vi.stubEnv("SVC_PORT", "0");
    vi.stubEnv("SVC_HOST", "");
    // The model loads in the engine process, which the main process starts through utilityProcess.
    vi.stubEnv("SVC_MODEL", inject("tinyModelPath"));
    vi.stubEnv("SVC_LOG_LEVEL", "warn");
    const entry = join(import.meta.dirname, "..", "..", "dist", "main", "main.js");
    if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`npm run build\` first.`);
    await import(pathToFileURL(entry).href);
    state.ready();
  });

  afterAll(() => {
    vi.unstubAllEnvs();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("sets up before ready: the app:// scheme, the profile beside the data dir, the IPC channel", () => {
    expect(state.schemes).toEqual([{ scheme: "app", privileges: { standard: true, secure: true, supportFetchAPI: true } }]);
    // The profile holds the saved chats: beside the server's data dir, never inside it.
    expect(state.paths.userData).toBe(`${dataDir}-window`);
    expect(state.ipcHandlers.has(CONSOLE_CHANNEL)).toBe(true);
  });

  it("opens a sandboxed, context-isolated window on app://svc/index.html", async () => {
    await vi.waitFor(() => expect(state.windows).toHaveLength(1));
    const [win] = state.windows as Array<{ url: string; options: { webPreferences: Record<string, unknown> } }>;
    expect(win!.url).toBe("app://svc/index.html");
    expect(win!.options.webPreferences).toMatchObject({ contextIsolation: true, sandbox: true, nodeIntegration: false });
    expect(String(win!.options.webPreferences.preload)).toMatch(/dist[\\/]main[\\/]preload\.cjs$/);
  });

  it("answers the window's console calls from the in-process server", async () => {
    const result = await call("serverInfo");
    expect(result.ok, JSON.stringify(result)).toBe(true);
    info = (result as { ok: true; value: ServerInfo }).value;
    expect(info).toMatchObject({ host: "0.0.0.0", lanExposure: true, lanExposed: true, dataDir, portNote: null });
    expect(info.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${info.baseUrl}/health`)).status).toBe(200);
  });

  it("runs the model in an engine process started through utilityProcess", async () => {
    expect(state.utilityForks).toHaveLength(1);
    expect(state.utilityForks[0]).toMatch(/dist[\\/]server[\\/]engine[\\/]engine-child\.js$/);
    const health = (await (await fetch(`${info.baseUrl}/health`)).json()) as { model: { state: string } };
    expect(health.model.state).toBe("ready");
  });

  it("refuses calls from any other page or window", async () => {
    expect(await call("serverInfo", [], "https://example.com/")).toMatchObject({ ok: false, error: { code: "forbidden" } });
    expect(await call("serverInfo", [], "app://svc/index.html", { id: 2 })).toMatchObject({ ok: false, error: { code: "forbidden" } });
  });

  it("serves app:// with the CSP header and refuses paths out of the renderer folder", async () => {
    const handler = state.protocolHandler!;
    const index = await handler(new Request("app://svc/index.html"));
    expect(index.headers.get("content-security-policy")).toContain("script-src 'self'");
    const outside = await handler(new Request("app://svc/..%2f..%2fpackage.json"));
    expect(outside.status).toBe(404);
  });

  it("shows the status in the tray", async () => {
    await vi.waitFor(() => expect(state.trays[0]?.menu.map((item) => item.label)).toContain(`Base URL: ${info.baseUrl} (also on the LAN)`));
    const labels = state.trays[0]!.menu.map((item) => item.label);
    expect(labels).toEqual(expect.arrayContaining(["Open window", "Copy base URL", "Quit"]));
  });

  it("quits gracefully: the server closes, then the app exits", async () => {
    const port = Number(new URL(info.baseUrl).port);
    expect(await portAnswers(port)).toBe(true);
    fake.electron.app.quit();
    expect(await fake.exitedPromise).toBe(0);
    expect(await portAnswers(port)).toBe(false);
    expect(state.errors).toEqual([]);
  });
});
