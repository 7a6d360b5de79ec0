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
 * Keeps every step on node-llama-cpp's token-by-token binding calls (decodeBatch, then sampleToken), for
 * tests that watch that path at the binding on a machine that has `svc engine build`'s binaries: no solo
 * runs for lone generations (`SVC_SOLO_LOOP=0`) and no samplings in the decode's job (`SVC_STEP_SAMPLING=0`),
 * both read as each step or run starts. Returns the undo.
 */
export function engineBuildPathsOff(): () => void {
  const names = ["SVC_SOLO_LOOP", "SVC_STEP_SAMPLING"] as const;
  const before = names.map((name) => process.env[name]);
  for (const name of names) process.env[name] = "0";
  return () =>
    names.forEach((name, i) => {
      if (before[i] === undefined) delete process.env[name];
      else process.env[name] = before[i];
    });
}
