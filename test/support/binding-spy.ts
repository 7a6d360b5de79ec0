// Watches the calls a node-llama-cpp context makes on its native binding (`_ctx`: initBatch, addToBatch,
// decodeBatch, sampleToken, ...), for tests about what reaches llama.cpp. The spy sees the arguments before
// the call and may replace one (a callback, to watch what comes back). Returns the undo.
export function spyOnBinding(context: object, spy: (method: string, args: unknown[]) => void): () => void {
  const holder = context as { _ctx: object };
  const binding = holder._ctx;
  holder._ctx = new Proxy(binding, {
    get(target, key) {
      const value = Reflect.get(target, key) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        spy(String(key), args);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return () => {
    holder._ctx = binding;
  };
}

/**
 * Keeps lone generations on the token-by-token path (`SVC_SOLO_LOOP=0`, read as each run would start), for
 * tests that watch that path at the binding on a machine that has `svc engine build`'s binaries. Returns the undo.
 */
export function soloLoopOff(): () => void {
  const before = process.env.SVC_SOLO_LOOP;
  process.env.SVC_SOLO_LOOP = "0";
  return () => {
    if (before === undefined) delete process.env.SVC_SOLO_LOOP;
    else process.env.SVC_SOLO_LOOP = before;
  };
}
