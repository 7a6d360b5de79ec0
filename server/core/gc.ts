// A full garbage collection on demand, without starting node with --expose-gc.
//
// Two callers: the memory of a large request body (http/memory.ts), and a model load (engine/llama-engine.ts).
// The second is about speed, not memory: building node-llama-cpp's chat wrappers for a Jinja template
// (resolveChatWrapper) renders the template with objects keyed by random ids, each adding a transition to
// the map every empty object literal `{}` starts from. V8 keeps at most 1536 of them; past that, an object
// that starts empty and gains a key without a transition yet gets a map of its own, every time, so the code
// that touches it misses its inline caches: after a model load, until the next full collection (which an
// idle or lightly loaded server may not run for a long time), Node's header objects, Fastify's replies and
// JSON.parse's results were built that way (docs/performance.md, section 19: GET /v1/models 226k instructions
// a request with a model loaded against 163k without one; 158k after one collection). A full
// collection drops the transitions whose maps died with the wrappers' trial renders.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

let collect: (() => void) | null | undefined;

function collector(): (() => void) | null {
  if (collect !== undefined) return collect;
  try {
    // The documented way to reach gc() without starting node with --expose-gc.
    setFlagsFromString("--expose-gc");
    collect = runInNewContext("gc") as () => void;
  } catch {
    collect = null;
  }
  return collect;
}

/** Runs a full collection now (tens of milliseconds on the server's heap); false where gc() is out of reach. */
export function fullCollection(): boolean {
  const gc = collector();
  if (!gc) return false;
  gc();
  return true;
}
