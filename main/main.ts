// The Electron main process: one instance; the same server as `svc serve`, in-process, with its engine in a
// utility process; the console window (app://svc/, sandboxed, one typed IPC channel); a tray with the status;
// a graceful quit.
import { app, BrowserWindow, clipboard, dialog, ipcMain, Menu, nativeImage, Notification, protocol, session, shell, Tray, utilityProcess, type IpcMainInvokeEvent } from "electron";
import { existsSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { APP_NAME, resolveServeConfig, type ServeConfig } from "../server/config.js";
import { isLoopbackHost } from "../server/core/loopback.js";
import { ConsoleService, dispatchConsoleCall, LAN_EXPOSURE_SETTING, localBaseUrl, parsePortSetting, PORT_SETTING } from "../server/features/console/console-service.js";
import { CONSOLE_CHANNEL, type ConsoleResult } from "../server/features/console/contract.js";
import { LogBuffer } from "../server/features/console/log-buffer.js";
import { consoleLog, startServer, type RunningServer } from "../server/index.js";
import { Store } from "../server/store/store.js";
import { packageVersion } from "../server/core/version.js";
import { APP_INDEX_URL, APP_SCHEME, contentTypeFor, isAppPageUrl, navigationVerdict, RENDERER_CSP, resolveRendererFile } from "./app-protocol.js";
import { chooseNativeBinding } from "./dev-native.js";
import { utilityEngineSpawner } from "./engine-process.js";
import { hostForStart, isAddressInUse, planPort, portForStart, portNoteFor, windowProfileDir } from "./server-plan.js";
import { trayText, type TrayState } from "./tray-status.js";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root in development, app.asar when packaged (dist/main is two levels down in both). */
const APP_ROOT = join(here, "..", "..");
const RENDERER_DIR = join(APP_ROOT, "dist", "renderer");
const PRELOAD = join(here, "preload.cjs");
const TRAY_ICON = join(APP_ROOT, "resources", "icons", "tray.png");
const SHUTDOWN_LIMIT_MS = 15_000;

interface Hosted {
  server: RunningServer;
  console: ConsoleService;
  host: string;
  portNote: string | null;
}

let window: BrowserWindow | null = null;
let tray: Tray | null = null;
let trayTimer: NodeJS.Timeout | null = null;
let hosted: Hosted | null = null;
let starting: Promise<Hosted> | null = null;
let quitState: "running" | "closing" | "closed" = "running";

function fail(title: string, err: unknown): void {
  let message = err instanceof Error ? err.message : String(err);
  if (/NODE_MODULE_VERSION|was compiled against a different Node\.js version/.test(message))
    message += "\n\nbetter-sqlite3 is built for Node, not Electron: run `npm run electron:native` (npm start does), then start again.";
  console.error(`[svc] error: ${title}: ${message}`);
  dialog.showErrorBox(title, message);
  app.exit(1);
}

/** Reads the window's LAN-exposure and port settings before the server opens the database itself. */
function readStartSettings(dataDir: string, nativeBinding: string | undefined): { lan: string | undefined; port: number | null } {
  const store = Store.open(dataDir, { nativeBinding });
  try {
    return { lan: store.settings.get(LAN_EXPOSURE_SETTING)?.value, port: parsePortSetting(store.settings.get(PORT_SETTING)?.value) };
  } finally {
    store.close();
  }
}

async function startHosted(config: ServeConfig): Promise<Hosted> {
  const nativeBinding = chooseNativeBinding({ appRoot: APP_ROOT, electronVersion: process.versions.electron ?? "", isPackaged: app.isPackaged, exists: existsSync });
  const settings = readStartSettings(config.dataDir, nativeBinding);
  const host = hostForStart(settings.lan, process.env.SVC_HOST);
  // The window's LAN switch is the explicit opt-in that `svc serve --lan` asks for.
  const lan = config.lan === true || settings.lan === "on";
  const logs = new LogBuffer(consoleLog(config.logLevel));
  const portFromEnv = (process.env.SVC_PORT ?? "").trim() !== "";
  let plan = await planPort(host, portForStart(settings.port, process.env.SVC_PORT, config.port));
  // The model runs in a utility process: a native crash there leaves the window and the server up.
  const spawnEngine = utilityEngineSpawner(utilityProcess);
  let server: RunningServer;
  try {
    server = await startServer({ ...config, host, lan, port: plan.port, nativeBinding }, logs.log, { spawnEngine });
  } catch (err) {
    // The probe said free, but another program took the port meanwhile: fall back once more.
    if (plan.port === 0 || !isAddressInUse(err)) throw err;
    plan = { port: 0, taken: plan.port };
    server = await startServer({ ...config, host, lan, port: 0, nativeBinding }, logs.log, { spawnEngine });
  }
  const portNote = portNoteFor(plan, server.port);
  if (portNote) logs.log("warn", portNote);
  logs.log("info", `svc-desktop: server on ${server.url} (data dir ${config.dataDir}).`);
  const service = new ConsoleService({ server, host, dataDir: config.dataDir, version: packageVersion(), logs, portNote, portFromEnv });
  return { server, console: service, host, portNote };
}

async function serveAppFile(request: Request): Promise<Response> {
  const headers = { "Content-Security-Policy": RENDERER_CSP, "X-Content-Type-Options": "nosniff" };
  const file = resolveRendererFile(request.url, RENDERER_DIR);
  if (file) {
    try {
      const body = await readFile(file);
      return new Response(body, { status: 200, headers: { ...headers, "Content-Type": contentTypeFor(file) } });
    } catch {
      // Missing file: a 404 below.
    }
  }
  return new Response(`Not found. The window's page is built into ${RENDERER_DIR} by \`npm run build\`.`, {
    status: 404,
    headers: { ...headers, "Content-Type": "text/plain; charset=utf-8" },
  });
}

function isOwnPage(event: IpcMainInvokeEvent): boolean {
  return window !== null && !window.isDestroyed() && event.sender === window.webContents && isAppPageUrl(event.senderFrame?.url);
}

async function answerConsoleCall(event: IpcMainInvokeEvent, method: unknown, args: unknown): Promise<ConsoleResult> {
  if (!isOwnPage(event)) return { ok: false, error: { message: "Only the svc-desktop window may call the console.", code: "forbidden" } };
  if (!starting) return { ok: false, error: { message: "The server is not running.", code: "not_running" } };
  const { console: service } = await starting;
  return dispatchConsoleCall(service, method, args);
}

function openWindow(): void {
  if (window && !window.isDestroyed()) {
    if (window.isMinimized()) window.restore();
    window.show();
    window.focus();
    return;
  }
  window = new BrowserWindow({
    width: 1200,
    height: 820,
    minWidth: 720,
    minHeight: 480,
    title: "svc-desktop",
    show: false,
    autoHideMenuBar: true,
    webPreferences: {
      preload: PRELOAD,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      webviewTag: false,
      spellcheck: false,
    },
  });
  window.once("ready-to-show", () => window?.show());
  window.on("closed", () => {
    window = null;
  });
  void window.loadURL(APP_INDEX_URL);
}

/** No remote content in the app: our page stays on app://svc, web links go to the system browser. */
function guardWebContents(contents: Electron.WebContents): void {
  contents.on("will-navigate", (event, url) => {
    const verdict = navigationVerdict(url, "navigate");
    if (verdict === "allow") return;
    event.preventDefault();
    if (verdict === "external") void shell.openExternal(url);
  });
  contents.on("will-redirect", (event, url) => {
    if (navigationVerdict(url, "navigate") !== "allow") event.preventDefault();
  });
  contents.setWindowOpenHandler(({ url }) => {
    if (navigationVerdict(url, "open") === "external") void shell.openExternal(url);
    return { action: "deny" };
  });
  contents.on("will-attach-webview", (event) => event.preventDefault());
}

function currentTrayState(): TrayState {
  if (!hosted) return { model: null, baseUrl: null, portNote: null, lanExposed: false };
  const status = hosted.server.engineHost.status();
  const baseUrl = localBaseUrl(hosted.server.url);
  return {
    model: { state: status.state, name: status.model?.name ?? null, error: status.error },
    baseUrl,
    portNote: hosted.portNote,
    lanExposed: !isLoopbackHost(hosted.host),
  };
}

let lastTray = "";
function refreshTray(): void {
  if (!tray || tray.isDestroyed()) return;
  const state = currentTrayState();
  const text = trayText(state);
  const key = JSON.stringify(text);
  if (key === lastTray) return;
  lastTray = key;
  tray.setToolTip(text.tooltip);
  tray.setContextMenu(
    Menu.buildFromTemplate([
      ...text.lines.map((label) => ({ label, enabled: false })),
      { type: "separator" },
      { label: "Open window", click: openWindow },
      { label: "Copy base URL", enabled: state.baseUrl !== null, click: () => state.baseUrl && clipboard.writeText(state.baseUrl) },
      { type: "separator" },
      { label: "Quit", click: () => app.quit() },
    ]),
  );
}

function createTray(): void {
  try {
    let icon = existsSync(TRAY_ICON) ? nativeImage.createFromBuffer(readFileSync(TRAY_ICON)) : nativeImage.createEmpty();
    if (process.platform === "darwin" && !icon.isEmpty()) icon = icon.resize({ width: 18, height: 18 });
    tray = new Tray(icon);
    tray.on("click", openWindow);
    refreshTray();
    trayTimer = setInterval(refreshTray, 2000);
  } catch (err) {
    // Some Linux desktops have no tray: the app then quits when its window closes (see window-all-closed).
    console.error(`[svc] warn: no tray: ${(err as Error).message}`);
    tray = null;
  }
}

function notify(title: string, body: string): void {
  if (Notification.isSupported()) new Notification({ title, body }).show();
}

async function shutdown(): Promise<void> {
  if (trayTimer) clearInterval(trayTimer);
  tray?.destroy();
  tray = null;
  if (!starting) return;
  const limit = new Promise<void>((resolve) => setTimeout(resolve, SHUTDOWN_LIMIT_MS).unref());
  // The server may still be starting (a model loading): wait for it, then let it finish the requests in
  // flight and close the database; never hang the quit past the limit.
  const close = starting.then(
    (h) => h.server.close(),
    () => undefined,
  );
  await Promise.race([close, limit]);
}

function main(): void {
  // Before ready: the scheme's privileges, the profile folder and the instance lock.
  protocol.registerSchemesAsPrivileged([{ scheme: APP_SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: true } }]);
  let config: ServeConfig;
  try {
    config = resolveServeConfig({}, process.env);
  } catch (err) {
    fail("svc-desktop cannot start", err);
    return;
  }
  app.setName(APP_NAME);
  // Chromium's profile (with the saved chats) lives beside the server's data dir, never in it; one per data
  // dir, so SVC_DATA_DIR gives a wholly separate instance.
  app.setPath("userData", windowProfileDir(config.dataDir));
  if (!app.requestSingleInstanceLock()) {
    app.quit();
    return;
  }
  app.on("second-instance", openWindow);
  app.on("web-contents-created", (_event, contents) => guardWebContents(contents));
  app.on("window-all-closed", () => {
    // With a tray the server keeps serving; Quit is in the tray menu. Without one, closing the window quits.
    if (!tray) app.quit();
  });
  app.on("activate", openWindow);
  app.on("before-quit", (event) => {
    if (quitState === "closed") return;
    event.preventDefault();
    if (quitState === "closing") return;
    quitState = "closing";
    void shutdown().finally(() => {
      quitState = "closed";
      app.exit(0);
    });
  });
  ipcMain.handle(CONSOLE_CHANNEL, answerConsoleCall);

  void app.whenReady().then(() => {
    protocol.handle(APP_SCHEME, serveAppFile);
    // The page needs no permissions, except writing to the clipboard (copy buttons).
    session.defaultSession.setPermissionRequestHandler((contents, permission, callback) => {
      callback(permission === "clipboard-sanitized-write" && isAppPageUrl(contents.getURL()));
    });
    starting = startHosted(config);
    starting.then(
      (h) => {
        hosted = h;
        refreshTray();
        if (h.portNote) notify("svc-desktop: port in use", h.portNote);
      },
      (err: unknown) => {
        if (quitState === "running") fail("svc-desktop could not start its server", err);
      },
    );
    createTray();
    openWindow();
  });
}

main();
