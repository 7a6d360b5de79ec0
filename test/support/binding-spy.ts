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
