// The window's typed handle on the console bridge (window.svc, put there by the preload or the UI tests).
import type { ConsoleApi, ConsoleBridge, ConsoleMethod, DownloadView } from "../../server/features/console/contract";

declare global {
  interface Window {
    svc?: ConsoleBridge;
  }
}

export class ConsoleCallError extends Error {
  constructor(
    message: string,
    readonly code: string | null,
  ) {
    super(message);
  }
}

async function call<M extends ConsoleMethod>(method: M, args: Parameters<ConsoleApi[M]>): Promise<Awaited<ReturnType<ConsoleApi[M]>>> {
  const bridge = window.svc;
  if (!bridge) throw new ConsoleCallError("This window is not connected to svc-desktop's main process.", "no_bridge");
  const result = await bridge.call(method, args);
  if (!result.ok) throw new ConsoleCallError(result.error.message, result.error.code);
  return result.value as Awaited<ReturnType<ConsoleApi[M]>>;
}

/** ConsoleApi, each method a call over the bridge. */
export const consoleApi = new Proxy({} as ConsoleApi, {
  get: (_target, method: string) => (...args: unknown[]) => call(method as ConsoleMethod, args as never),
});

/** A download that has not ended (done, failed or cancelled). */
export function isDownloadRunning(download: DownloadView): boolean {
  return download.phase === "resolving" || download.phase === "downloading" || download.phase === "verifying";
}
