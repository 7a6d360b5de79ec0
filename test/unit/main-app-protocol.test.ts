// The app:// protocol's file resolution and the window's navigation rules (main/app-protocol.ts).
import { posix, win32 } from "node:path";
import { describe, expect, it } from "vitest";
import { APP_INDEX_URL, contentTypeFor, isAppPageUrl, navigationVerdict, RENDERER_CSP, resolveRendererFile } from "../../main/app-protocol.js";

const ROOT = "/opt/svc/dist/renderer";

describe("resolveRendererFile", () => {
  it("maps app://svc/ paths to files under the renderer folder", () => {
    expect(resolveRendererFile(APP_INDEX_URL, ROOT, posix)).toBe(`${ROOT}/index.html`);
    expect(resolveRendererFile("app://svc/assets/index-abc123.js", ROOT, posix)).toBe(`${ROOT}/assets/index-abc123.js`);
    expect(resolveRendererFile("app://svc/assets/font%20file.woff2?v=1#x", ROOT, posix)).toBe(`${ROOT}/assets/font file.woff2`);
  });

  it("serves index.html for the root and for extension-less routes", () => {
    expect(resolveRendererFile("app://svc/", ROOT, posix)).toBe(`${ROOT}/index.html`);
    expect(resolveRendererFile("app://svc", ROOT, posix)).toBe(`${ROOT}/index.html`);
    expect(resolveRendererFile("app://svc/settings/keys", ROOT, posix)).toBe(`${ROOT}/index.html`);
  });

  it("refuses other origins and schemes", () => {
    expect(resolveRendererFile("app://other/index.html", ROOT, posix)).toBeNull();
    expect(resolveRendererFile("file:///etc/passwd", ROOT, posix)).toBeNull();
    expect(resolveRendererFile("https://svc/index.html", ROOT, posix)).toBeNull();
    expect(resolveRendererFile("not a url", ROOT, posix)).toBeNull();
  });

  it("never leaves the renderer folder", () => {
    const attempts = [
      "app://svc/..%2f..%2fetc/passwd",
      "app://svc/assets/..%2F..%2F..%2Fsecret.txt",
      "app://svc/..%5c..%5csecret.txt",
      "app://svc/assets/%00.js",
      "app://svc/%E0%A4%A", // malformed escape
    ];
    for (const url of attempts) expect(resolveRendererFile(url, ROOT, posix), url).toBeNull();
    // Dot segments, plain or percent-encoded, are removed by the URL parser: what is left is inside the folder.
    expect(resolveRendererFile("app://svc/../../etc/hosts.txt", ROOT, posix)).toBe(`${ROOT}/etc/hosts.txt`);
    expect(resolveRendererFile("app://svc/%2e%2e/%2e%2e/secret.txt", ROOT, posix)).toBe(`${ROOT}/secret.txt`);
  });

  it("holds on Windows paths too (backslashes, drive letters)", () => {
    const root = "C:\\Program Files\\svc\\resources\\app.asar\\dist\\renderer";
    expect(resolveRendererFile("app://svc/assets/a.js", root, win32)).toBe(`${root}\\assets\\a.js`);
    expect(resolveRendererFile("app://svc/..%5C..%5Csecret.txt", root, win32)).toBeNull();
    expect(resolveRendererFile("app://svc/C:%5CWindows%5Cwin.ini", root, win32)).toBeNull();
    expect(resolveRendererFile("app://svc/%5C%5Cserver%5Cshare%5Cx.js", root, win32)).toBe(`${root}\\server\\share\\x.js`);
  });
});

describe("contentTypeFor", () => {
  it("knows what a Vite build emits", () => {
    expect(contentTypeFor("/x/index.html")).toBe("text/html; charset=utf-8");
    expect(contentTypeFor("/x/assets/a.JS")).toBe("text/javascript; charset=utf-8");
    expect(contentTypeFor("/x/assets/a.css")).toBe("text/css; charset=utf-8");
    expect(contentTypeFor("/x/assets/a.svg")).toBe("image/svg+xml");
    expect(contentTypeFor("/x/assets/a.woff2")).toBe("font/woff2");
    expect(contentTypeFor("/x/assets/blob")).toBe("application/octet-stream");
  });
});

describe("the CSP header", () => {
  it("allows only our own scripts and the local API", () => {
    expect(RENDERER_CSP).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self' http://127.0.0.1:* http://localhost:*",
    );
  });
});

describe("isAppPageUrl", () => {
  it("accepts only app://svc pages", () => {
    expect(isAppPageUrl("app://svc/index.html")).toBe(true);
    expect(isAppPageUrl("app://svc/")).toBe(true);
    expect(isAppPageUrl("app://evil/index.html")).toBe(false);
    expect(isAppPageUrl("http://127.0.0.1:8787/")).toBe(false);
    expect(isAppPageUrl("file:///index.html")).toBe(false);
    expect(isAppPageUrl("")).toBe(false);
    expect(isAppPageUrl(undefined)).toBe(false);
    expect(isAppPageUrl(null)).toBe(false);
  });
});

describe("navigationVerdict", () => {
  it("keeps the window on app://svc and sends web links to the system browser", () => {
    expect(navigationVerdict("app://svc/index.html#/chat", "navigate")).toBe("allow");
    expect(navigationVerdict("https://example.com/docs", "navigate")).toBe("external");
    expect(navigationVerdict("http://127.0.0.1:8787/v1/models", "open")).toBe("external");
  });

  it("never opens new in-app windows, nor other schemes", () => {
    expect(navigationVerdict("app://svc/index.html", "open")).toBe("deny");
    expect(navigationVerdict("file:///etc/passwd", "navigate")).toBe("deny");
    expect(navigationVerdict("javascript:alert(1)", "open")).toBe("deny");
    expect(navigationVerdict("app://other/", "navigate")).toBe("deny");
    expect(navigationVerdict("::", "navigate")).toBe("deny");
  });
});
