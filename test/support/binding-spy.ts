// Watches the calls a node-llama-cpp context makes on its native binding (`_ctx`: initBatch, addToBatch,
// decodeBatch, sampleToken, ...), for tests about what reaches llama.cpp. The spy sees the arguments before
// the call and may replace one (a callback, to watch what comes back); a function it returns is given what
// the call returned (a promise's value once it resolves). Returns the undo.
export function spyOnBinding(context: object, spy: (method: string, args: unknown[]) => unknown): () => void {
  const holder = context as { _ctx: object };
  const binding = holder._ctx;
  holder._ctx = new Proxy(binding, {
    get(target, key) {
      const value = Reflect.get(target, key) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        const seen = spy(String(key), args);
        const result = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (typeof seen === "function") {
          const see = seen as (result: unknown) => void;
          if (result instanceof Promise) void result.then(see, () => undefined);
          else see(result);
        }
        return result;
      };
    },
  });
  return () => {
    holder._ctx = binding;
  };
}
