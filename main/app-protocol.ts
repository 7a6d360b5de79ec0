// The window's page comes from app://svc/, served from the built renderer folder only. These pieces are
// pure (no electron import) so the unit tests can pin them.
import * as nodePath from "node:path";

export const APP_SCHEME = "app";
export const APP_HOST = "svc";
export const APP_ORIGIN = `${APP_SCHEME}://${APP_HOST}`;
export const APP_INDEX_URL = `${APP_ORIGIN}/index.html`;

/** Sent with every app:// response, besides the renderer's own meta tag. */
export const RENDERER_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "connect-src 'self' http://127.0.0.1:* http://localhost:*",
].join("; ");

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".ico": "image/x-icon",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
  ".ttf": "font/ttf",
  ".wasm": "application/wasm",
};

export function contentTypeFor(file: string): string {
  return CONTENT_TYPES[nodePath.extname(file).toLowerCase()] ?? "application/octet-stream";
}

type PathApi = Pick<typeof nodePath, "join" | "resolve" | "relative" | "isAbsolute" | "extname" | "sep">;

/**
 * The file under `root` that an app://svc/ URL names, or null for any other origin and for anything that would
 * leave `root` (dot segments, encoded slashes or backslashes, NUL). "/" is index.html; a path without an
 * extension is index.html too, so a reload on a client-side route still finds the page.
 */
export function resolveRendererFile(url: string, root: string, path: PathApi = nodePath): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  if (parsed.protocol !== `${APP_SCHEME}:` || parsed.host !== APP_HOST) return null;
  let relative: string;
  try {
    relative = decodeURIComponent(parsed.pathname);
  } catch {
    return null;
  }
  if (relative.includes("\0")) return null;
  const segments = relative.split(/[\\/]+/).filter((s) => s !== "");
  if (segments.some((s) => s === "." || s === ".." || /^[A-Za-z]:$/.test(s))) return null;
  if (segments.length === 0 || path.extname(segments[segments.length - 1]!) === "") segments.splice(0, segments.length, "index.html");
  const base = path.resolve(root);
  const file = path.resolve(base, ...segments);
  const inside = path.relative(base, file);
  if (inside === "" || inside.startsWith("..") || path.isAbsolute(inside)) return null;
  return file;
}

/** Whether a frame's URL is our own page (the only one allowed to call the console over IPC). */
export function isAppPageUrl(url: string | undefined | null): boolean {
  if (!url) return false;
  try {
    const parsed = new URL(url);
    return parsed.protocol === `${APP_SCHEME}:` && parsed.host === APP_HOST;
  } catch {
    return false;
  }
}

export type NavigationVerdict = "allow" | "external" | "deny";

/**
 * What to do when the page navigates or opens a window: our own page may move within app://svc/; web links
 * open in the system browser; nothing else loads, in the window or in a new one.
 */
export function navigationVerdict(url: string, kind: "navigate" | "open"): NavigationVerdict {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "deny";
  }
  if (parsed.protocol === "http:" || parsed.protocol === "https:") return "external";
  if (kind === "navigate" && isAppPageUrl(url)) return "allow";
  return "deny";
}
