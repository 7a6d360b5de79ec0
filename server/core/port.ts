// Whether a TCP port is free, asked before anything slow happens: `svc serve` checks its port before it loads a
// model (seconds to minutes), and the desktop app before it picks a fallback port.
import { createServer } from "node:net";

/** Whether something already listens on host:port (the probe binds and lets go at once). */
export function isPortTaken(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", (err: NodeJS.ErrnoException) => resolve(err.code === "EADDRINUSE" || err.code === "EACCES"));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(false)));
  });
}

/** A listen failure that another port would fix. */
export function isAddressInUse(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE" || code === "EACCES") return true;
    if (/\bEADDRINUSE\b/.test(e.message)) return true;
  }
  return false;
}
