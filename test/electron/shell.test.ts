// The desktop app as users start it: Electron with dist/main/main.js, through Playwright's Electron launcher.
// The window's page, the one-method bridge (and nothing else of Node), the in-process server, and a quit that
// closes the port. Skipped where no Electron binary is installed.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { _electron, type ElectronApplication, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { devNativeBindingPath } from "../../main/dev-native.js";
import { portAnswers } from "../support/port.js";

const root = join(import.meta.dirname, "..", "..");
const electronDir = join(root, "node_modules", "electron");
const MAIN = join(root, "dist", "main", "main.js");

/** The installed Electron executable, found as the electron package finds it, but never downloading it. */
function electronBinary(): string | null {
  const pathFile = join(electronDir, "path.txt");
  if (!existsSync(pathFile)) return null;
  const binary = join(electronDir, "dist", readFileSync(pathFile, "utf8").trim());
  return existsSync(binary) ? binary : null;
}

const binary = electronBinary();
if (!binary)
  console.warn(
    "Electron binary not installed (ELECTRON_SKIP_BINARY_DOWNLOAD or offline): skipping the Electron shell tests; npm start downloads it on a user's machine",
  );

describe.skipIf(!binary)("the Electron shell", () => {
  let app: ElectronApplication | null = null;
  let page: Page;
  let dataDir: string;
  let baseUrl: string;

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` first.`);
    const electronVersion = (JSON.parse(readFileSync(join(electronDir, "package.json"), "utf8")) as { version: string }).version;
    if (!existsSync(devNativeBindingPath(root, electronVersion)))
      throw new Error(`better-sqlite3 is not built for Electron ${electronVersion}: run \`npm run electron:native\` first.`);
    dataDir = mkdtempSync(join(tmpdir(), "svc-electron-"));
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries(process.env)) if (value !== undefined && name !== "ELECTRON_RUN_AS_NODE") env[name] = value;
    app = await _electron.launch({
      executablePath: binary!,
      args: [MAIN],
      env: { ...env, SVC_DATA_DIR: dataDir, SVC_PORT: "0", SVC_MODEL: inject("tinyModelPath"), SVC_LOG_LEVEL: "warn" },
      timeout: 60_000,
    });
    page = await app.firstWindow();
    await page.waitForLoadState("domcontentloaded");
  });

  afterAll(async () => {
    await app?.close().catch(() => undefined);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("loads the window's page from app://svc", () => {
    expect(page.url()).toBe("app://svc/index.html");
  });

  it("answers the console over window.svc.call", async () => {
    const result = (await page.evaluate("window.svc.call('serverInfo', [])")) as { ok: boolean; value: { baseUrl: string; dataDir: string; port: number } };
    expect(result.ok).toBe(true);
    expect(result.value.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(result.value.dataDir).toBe(dataDir);
    baseUrl = result.value.baseUrl;
    const unknown = (await page.evaluate("window.svc.call('constructor', [])")) as { ok: boolean; error: { code: string } };
    expect(unknown).toMatchObject({ ok: false, error: { code: "unknown_method" } });
  });

  it("gives the page no Node and no raw IPC", async () => {
    expect(await page.evaluate("typeof window.require")).toBe("undefined");
    expect(await page.evaluate("typeof window.process")).toBe("undefined");
    expect(await page.evaluate("'ipcRenderer' in window")).toBe(false);
    expect(await page.evaluate("Object.keys(window.svc)")).toEqual(["call"]);
  });

  it("runs the server in-process", async () => {
    const health = await fetch(`${baseUrl}/health`);
    expect(health.status).toBe(200);
  });

  it("closes the port when the app quits", async () => {
    const port = Number(new URL(baseUrl).port);
    expect(await portAnswers(port)).toBe(true);
    await app!.close();
    app = null;
    expect(await portAnswers(port)).toBe(false);
  });
});
