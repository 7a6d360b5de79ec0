// The UI tests' stand-in for the Electron shell: the real server with the tiny model, the window's built
// files on a loopback static server, and Debian's Chromium through Playwright. The console bridge the
// preload would provide (window.svc.call) is answered by dispatchConsoleCall over a ConsoleService, the same
// code the main process runs. Chat traffic goes through a loopback proxy that can slow a stream down, so a
// test can press Stop while it is still running.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { extname, join, normalize, sep } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { ConsoleService, dispatchConsoleCall } from "../../server/features/console/console-service.js";
import type { ServeConfig } from "../../server/config.js";
import { LogBuffer } from "../../server/features/console/log-buffer.js";
import { startServer, type RunningServer } from "../../server/index.js";
import { Store } from "../../server/store/store.js";
import { packageVersion } from "../../server/core/version.js";
import { ROOT } from "../support/svc-process.js";

export const CHROMIUM = process.env.SVC_TEST_CHROMIUM ?? "/usr/bin/chromium";
export const RENDERER_DIR = join(ROOT, "dist", "renderer");
export const SCREENSHOTS = join(ROOT, "test", ".artifacts", "screenshots");

/**
 * Why the UI tests cannot run here, or null; says so once per file. On CI a missing browser or an unbuilt
 * window is a failure, not a skip.
 */
export function uiSkipReason(): string | null {
  let reason: string | null = null;
  if (!existsSync(CHROMIUM)) reason = `Chromium not found at ${CHROMIUM} (apt-get install chromium; .ci/run does)`;
  else if (!existsSync(join(RENDERER_DIR, "index.html"))) reason = `the window is not built (${RENDERER_DIR}/index.html missing: npm run build)`;
  if (reason && process.env.CI) throw new Error(`UI tests cannot run on CI: ${reason}`);
  if (reason) console.warn(`Skipping the UI tests: ${reason}.`);
  return reason;
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
};

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

function serveStatic(dir: string): Server {
  return createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
    const file = normalize(join(dir, path === "/" ? "index.html" : path));
    if (!file.startsWith(dir + sep) || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
    res.end(readFileSync(file));
  });
}

export interface ProxiedRequest {
  method: string;
  path: string;
  body: string;
  /** The client went away before the response ended. */
  clientAborted: boolean;
  ended: boolean;
}

/** Forwards to the API; while `delayMs` is set, each chunk of a streamed answer is held back that long. */
class SlowProxy {
  delayMs = 0;
  readonly requests: ProxiedRequest[] = [];
  readonly server: Server;

  constructor(private readonly target: URL) {
    // A client that goes away mid-request must not become an unhandled rejection in the test run.
    this.server = createServer((req, res) => void this.forward(req, res).catch(() => res.destroy()));
  }

  /** When set, the next streamed chat completion is answered with this text instead of the model's. */
  cannedAnswer: string | null = null;
  /** When set, the next chat completion is answered with this HTTP error (status and OpenAI-shaped body). */
  cannedError: { status: number; body: unknown } | null = null;

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const record: ProxiedRequest = { method: req.method ?? "GET", path: req.url ?? "/", body: body.toString("utf8"), clientAborted: false, ended: false };
    this.requests.push(record);
    if (this.cannedError !== null && req.method === "POST" && req.url === "/v1/chat/completions") {
      const { status, body: errorBody } = this.cannedError;
      this.cannedError = null;
      res.writeHead(status, { "content-type": "application/json", "access-control-allow-origin": String(req.headers.origin ?? "*") });
      res.end(JSON.stringify(errorBody));
      record.ended = true;
      return;
    }
    if (this.cannedAnswer !== null && req.method === "POST" && req.url === "/v1/chat/completions") {
      const text = this.cannedAnswer;
      this.cannedAnswer = null;
      const frame = (delta: Record<string, unknown>, finish: string | null) =>
        `data: ${JSON.stringify({ id: "chatcmpl-canned", object: "chat.completion.chunk", created: 0, model: "svc-fast", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.writeHead(200, { "content-type": "text/event-stream", "access-control-allow-origin": String(req.headers.origin ?? "*") });
      res.end(frame({ role: "assistant", content: "" }, null) + frame({ content: text }, null) + frame({}, "stop") + "data: [DONE]\n\n");
      record.ended = true;
      return;
    }
    const headers = { ...req.headers, host: this.target.host };
    const upstream = httpRequest({ hostname: this.target.hostname, port: this.target.port, method: req.method, path: req.url, headers }, (answer) =>
      // Reading the answer fails ("aborted") when the client went away and the upstream request was destroyed
      // meanwhile: that must not become an unhandled rejection either.
      void this.relay(answer, res, record).catch(() => res.destroy()),
    );
    res.on("close", () => {
      if (!res.writableFinished) {
        record.clientAborted = true;
        upstream.destroy();
      }
    });
    upstream.on("error", () => res.destroy());
    upstream.end(body);
  }

  private async relay(answer: IncomingMessage, res: ServerResponse, record: ProxiedRequest): Promise<void> {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    const delay = this.delayMs;
    let pending = "";
    for await (const chunk of answer) {
      if (res.destroyed) break;
      if (delay === 0) {
        res.write(chunk);
        continue;
      }
      // One SSE event at a time, each held back: the server sends a short answer in a burst.
      pending += (chunk as Buffer).toString("utf8");
      let end: number;
      while ((end = pending.indexOf("\n\n")) !== -1 && !res.destroyed) {
        await new Promise((r) => setTimeout(r, delay));
        res.write(pending.slice(0, end + 2));
        pending = pending.slice(end + 2);
      }
    }
    if (res.destroyed) return;
    if (pending) res.write(pending);
    record.ended = true;
    res.end();
  }
}

export interface UiHarness {
  server: RunningServer;
  service: ConsoleService;
  logs: LogBuffer;
  proxy: SlowProxy;
  /** The API as the window reaches it (through the proxy). */
  apiUrl: string;
  pageUrl: string;
  browser: Browser;
  context: BrowserContext;
  page: Page;
  dataDir: string;
  /** Opens a page of the window (chat, keys, models, server, ...). */
  open(page: string): Promise<void>;
  /** Holds the window's event stream (its `watch` calls) until release: the window as it opens, before it has heard anything. */
  holdFeed(): () => void;
  screenshot(name: string): Promise<void>;
  /** Runs axe-core on the page as it is: the serious and critical violations, described. */
  axe(): Promise<string[]>;
  /** Errors thrown in the page so far. */
  pageErrors: string[];
  screenshotsDir: string;
  close(): Promise<void>;
}

const AXE_SOURCE = readFileSync(join(ROOT, "node_modules", "axe-core", "axe.min.js"), "utf8");

/**
 * Without a model path the server starts as on a first run: no model, following the active-model setting.
 * `config` adds start-up options (as flags or the environment would give them); `settings`, the settings
 * store's values as the window would have saved them before this start.
 */
export async function startUiHarness(modelPath?: string, config: Partial<ServeConfig> = {}, options: { settings?: Record<string, string> } = {}): Promise<UiHarness> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-ui-"));
  if (options.settings) {
    const store = Store.open(dataDir);
    try {
      for (const [key, value] of Object.entries(options.settings)) store.settings.set(key, value);
    } finally {
      store.close();
    }
  }
  const logs = new LogBuffer();
  const server = await startServer(
    { host: "127.0.0.1", port: 0, dataDir, modelPath, threads: 1, sequences: 2, contextSize: 4096, gpu: "cpu", logLevel: "silent", ...config },
    logs.log,
  );
  const proxy = new SlowProxy(new URL(server.url));
  const apiUrl = await listen(proxy.server);
  const service = new ConsoleService({
    server: { ...server, url: apiUrl, port: Number(new URL(apiUrl).port) },
    host: "127.0.0.1",
    dataDir,
    version: packageVersion(),
    logs,
    portNote: null,
  });
  const files = serveStatic(RENDERER_DIR);
  const pageUrl = await listen(files);

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, colorScheme: "light" });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: pageUrl });
  let feedHeld: Promise<void> | null = null;
  await context.exposeFunction("__svcConsoleCall", async (method: unknown, args: unknown) => {
    if (method === "watch" && feedHeld) await feedHeld;
    return dispatchConsoleCall(service, method, args);
  });
  await context.addInitScript(() => {
    const call = (window as unknown as { __svcConsoleCall: (m: string, a: unknown[]) => Promise<unknown> }).__svcConsoleCall;
    Object.defineProperty(window, "svc", { value: Object.freeze({ call: (method: string, args: unknown[]) => call(method, args) }) });
  });
  const page = await context.newPage();
  const pageErrors: string[] = [];
  page.on("pageerror", (err) => pageErrors.push(err.message));
  mkdirSync(SCREENSHOTS, { recursive: true });

  return {
    server,
    service,
    logs,
    proxy,
    apiUrl,
    pageUrl,
    browser,
    context,
    page,
    dataDir,
    async open(name) {
      if (page.url().startsWith(pageUrl)) await page.getByTestId(`nav-${name}`).click();
      else await page.goto(`${pageUrl}/index.html#/${name}`);
      await page.getByTestId(`${name}-page`).waitFor();
      if (pageErrors.length) throw new Error(`errors in the page: ${pageErrors.join("; ")}`);
    },
    holdFeed() {
      let release!: () => void;
      feedHeld = new Promise<void>((resolve) => (release = resolve)).then(() => {
        feedHeld = null;
      });
      return release;
    },
    pageErrors,
    screenshotsDir: SCREENSHOTS,
    async screenshot(name) {
      await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
    },
    async axe() {
      // Evaluated over the DevTools protocol, which the page's CSP (script-src 'self') does not govern.
      if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(AXE_SOURCE);
      const result = (await page.evaluate(() =>
        (window as unknown as { axe: { run: (ctx: Document, opts: unknown) => Promise<unknown> } }).axe.run(document, { resultTypes: ["violations"] }),
      )) as { violations: Array<{ id: string; impact: string | null; help: string; nodes: Array<{ target: unknown[]; failureSummary?: string }> }> };
      return result.violations
        .filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.nodes.map((n) => JSON.stringify(n.target)).join(", ")} (${v.nodes[0]?.failureSummary ?? ""})`);
    },
    async close() {
      await browser.close().catch(() => undefined);
      await closeServer(files);
      await closeServer(proxy.server);
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
