// Giving back the memory of a large request. Parsing a body costs a few times its size (the received
// chunks, one buffer, one string, the parsed object: about 4x, measured), and once the request is over all
// of it is garbage; but V8 frees it only at a full collection, which an idle server may not run for a long
// time (a 49 MB body left RSS 200 MB higher a minute later). So after requests with large bodies, once
// they have stopped for a moment, the server asks V8 for two full collections (the second frees the
// buffers the first released). One costs tens of milliseconds on this server's small heap.
import { fullCollection } from "../core/gc.js";

/** Bodies at least this large schedule a collection. */
export const LARGE_BODY_BYTES = 8 * 1024 * 1024;
const SETTLE_MS = 2000;

let timer: NodeJS.Timeout | null = null;

/** Notes that a request with a body of `bytes` has finished; frees its memory once large ones stop coming. */
export function releaseAfterLargeBody(bytes: number): void {
  if (!(bytes >= LARGE_BODY_BYTES)) return;
  if (timer) clearTimeout(timer);
  timer = setTimeout(() => {
    timer = null;
    if (fullCollection()) setImmediate(fullCollection);
  }, SETTLE_MS);
  timer.unref();
}
