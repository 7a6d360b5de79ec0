// A file server on loopback for download tests: byte ranges as real CDNs serve them, a request log, a
// connection that can be cut at a given offset, and the two Hugging Face endpoints node-llama-cpp uses for
// hf: URIs (point HF_ENDPOINT at it).
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface LoggedRequest {
  path: string;
  /** The Range header, or null for a whole-file request. */
  range: string | null;
  /** First byte asked for (0 without a Range header). */
  start: number;
  status: number;
  /** Body bytes written for this request. */
  bytesSent: number;
  cut: boolean;
}

export interface ModelServer {
  url: string;
  port: number;
  /** URL path (e.g. "/models/a.gguf") → content. */
  files: Map<string, Buffer>;
  /** "user/repo:tag" → the file the manifest names (served at /user/repo/resolve/main/FILE). */
  manifests: Map<string, string>;
  /** "user/repo:tag" → the vision projector the manifest names beside the model (its `mmprojFile`). */
  projectors: Map<string, string>;
  requests: LoggedRequest[];
  /** While set, no byte at or beyond this offset is sent: a response reaching it loses its connection. */
  cutAt: number | null;
  /** Content-Length to announce instead of the real one (a server that lies about the size). */
  announceLength: Map<string, number>;
  /** Sends at about this rate when set, so a download lasts long enough to measure. */
  bytesPerSecond: number | null;
  close(): Promise<void>;
}

const CHUNK = 64 * 1024;

function parseRange(header: string | undefined, size: number): { start: number; end: number } | null {
  const m = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!m) return null;
  const start = m[1] === "" ? Math.max(0, size - Number(m[2])) : Number(m[1]);
  const end = m[1] !== "" && m[2] !== "" ? Math.min(size - 1, Number(m[2])) : size - 1;
  return start <= end ? { start, end } : null;
}

async function send(server: ModelServer, req: IncomingMessage, res: ServerResponse, body: Buffer, log: LoggedRequest): Promise<void> {
  const path = log.path;
  const size = server.announceLength.get(path) ?? body.length;
  const range = parseRange(req.headers.range, size);
  const start = range?.start ?? 0;
  const end = range?.end ?? size - 1;
  log.start = start;
  if (server.cutAt !== null && start >= server.cutAt) {
    log.cut = true;
    req.socket.destroy();
    return;
  }
  log.status = range ? 206 : 200;
  res.writeHead(log.status, {
    "content-type": "application/octet-stream",
    "accept-ranges": "bytes",
    "content-length": String(end - start + 1),
    ...(range ? { "content-range": `bytes ${start}-${end}/${size}` } : {}),
  });
  if (req.method === "HEAD") return void res.end();
  let offset = start;
  while (offset <= end) {
    if (res.destroyed) return;
    const stop = Math.min(end + 1, offset + CHUNK, server.cutAt ?? Number.POSITIVE_INFINITY);
    if (stop <= offset) {
      log.cut = true;
      req.socket.destroy();
      return;
    }
    const slice = body.subarray(Math.min(offset, body.length), Math.min(stop, body.length));
    log.bytesSent += slice.length;
    offset = stop;
    if (server.bytesPerSecond) await new Promise((resolve) => setTimeout(resolve, (slice.length / server.bytesPerSecond!) * 1000));
    if (!res.write(slice))
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off("drain", done).off("close", done);
          resolve();
        };
        res.on("drain", done).on("close", done);
      });
  }
  res.end();
}

export async function startModelServer(): Promise<ModelServer> {
  const server: ModelServer = {
    url: "",
    port: 0,
    files: new Map(),
    manifests: new Map(),
    projectors: new Map(),
    requests: [],
    cutAt: null,
    announceLength: new Map(),
    bytesPerSecond: null,
    close: async () => undefined,
  };
  const http = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const log: LoggedRequest = { path: url.pathname, range: req.headers.range ?? null, start: 0, status: 0, bytesSent: 0, cut: false };
    server.requests.push(log);
    const manifest = /^\/v2\/([^/]+)\/([^/]+)\/manifests\/([^/]+)$/.exec(url.pathname);
    if (manifest) {
      const key = `${decodeURIComponent(manifest[1]!)}/${decodeURIComponent(manifest[2]!)}:${decodeURIComponent(manifest[3]!)}`;
      const file = server.manifests.get(key);
      const projector = server.projectors.get(key);
      log.status = file ? 200 : 404;
      res.writeHead(log.status, { "content-type": "application/json" });
      return void res.end(JSON.stringify(file ? { ggufFile: { rfilename: file }, ...(projector ? { mmprojFile: { rfilename: projector } } : {}) } : { error: "not found" }));
    }
    const body = server.files.get(url.pathname);
    if (!body) {
      log.status = 404;
      res.writeHead(404, { "content-type": "text/plain" });
      return void res.end("not found");
    }
    void send(server, req, res, body, log);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  server.port = (http.address() as AddressInfo).port;
  server.url = `http://127.0.0.1:${server.port}`;
  server.close = () =>
    new Promise<void>((resolve) => {
      http.closeAllConnections();
      http.close(() => resolve());
    });
  return server;
}
