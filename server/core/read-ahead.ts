// Lets a producer run ahead of its consumer: the engine keeps generating while the HTTP side encodes and
// writes the previous tokens, instead of waiting for each write. At most `limit` items wait in between.
//
// The consumer is woken in the next turn of the event loop (setImmediate), not by a promise job: the
// producer's way back to its source (the engine asking llama.cpp for the next token) is a cascade of
// promise jobs, and a consumer woken by a promise job would interleave with it, so each token's HTTP work
// would run before the next decode starts instead of while it runs.

export function readAhead<T>(source: AsyncIterator<T>, limit = 4096): AsyncIterableIterator<T> {
  const queue: T[] = [];
  let head = 0;
  let finished = false;
  let stopped = false;
  let failure: { error: unknown } | null = null;
  let wakeConsumer: (() => void) | null = null;
  let wakeProducer: (() => void) | null = null;

  const size = () => queue.length - head;
  let wakePending = false;
  const wakeNow = () => {
    wakePending = false;
    const wake = wakeConsumer;
    wakeConsumer = null;
    wake?.();
  };
  const notify = () => {
    if (wakeConsumer === null || wakePending) return;
    wakePending = true;
    setImmediate(wakeNow);
  };

  void (async () => {
    try {
      while (!stopped) {
        if (size() >= limit) await new Promise<void>((resolve) => (wakeProducer = resolve));
        if (stopped) break;
        const step = await source.next();
        if (step.done) break;
        queue.push(step.value);
        notify();
      }
    } catch (error) {
      failure = { error };
    } finally {
      finished = true;
      notify();
    }
  })();

  return {
    async next(): Promise<IteratorResult<T>> {
      while (size() === 0 && !finished) await new Promise<void>((resolve) => (wakeConsumer = resolve));
      if (size() > 0) {
        const value = queue[head++]!;
        if (head > 1024 && head * 2 > queue.length) {
          queue.splice(0, head);
          head = 0;
        }
        const wake = wakeProducer;
        wakeProducer = null;
        wake?.();
        return { value, done: false };
      }
      if (failure) throw failure.error;
      return { value: undefined, done: true };
    },
    async return(): Promise<IteratorResult<T>> {
      stopped = true;
      const wake = wakeProducer;
      wakeProducer = null;
      wake?.();
      await source.return?.(undefined);
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
