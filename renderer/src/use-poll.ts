import { useEffect, useRef } from "react";

/** Runs `tick` now and every `ms` while the component is shown (and `active`). */
export function usePoll(tick: () => void | Promise<void>, ms: number, active = true): void {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => {
    if (!active) return;
    let stopped = false;
    const run = async () => {
      try {
        await latest.current();
      } catch {
        // a failed poll shows through the page's own error state; keep polling
      }
    };
    void run();
    const timer = setInterval(() => {
      if (!stopped) void run();
    }, ms);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, [ms, active]);
}
