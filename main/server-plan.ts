// Where the desktop app's server listens: the host from the LAN-exposure setting, the port from the config
// with a fallback to a free one. No electron import: the unit tests drive these directly.
import { createServer } from "node:net";

export const LOOPBACK_HOST = "127.0.0.1";
export const ALL_INTERFACES_HOST = "0.0.0.0";

/**
 * The host to bind at start: an explicit SVC_HOST wins (as the CLI's environment does); otherwise the stored
 * LAN-exposure setting ("on": every interface), else this machine only.
 */
export function hostForStart(lanSetting: string | undefined, envHost?: string): string {
  if (envHost !== undefined && envHost.trim() !== "") return envHost.trim();
  return lanSetting === "on" ? ALL_INTERFACES_HOST : LOOPBACK_HOST;
}

/** Whether something already listens on host:port (the probe binds and lets go at once). */
export function isPortTaken(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", (err: NodeJS.ErrnoException) => resolve(err.code === "EADDRINUSE" || err.code === "EACCES"));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(false)));
  });
}

export interface PortPlan {
  /** The port to listen on (0: any free one). */
  port: number;
  /** The configured port, when it was taken and the plan fell back to a free one. */
  taken: number | null;
}

/** The configured port if it is free; otherwise port 0 (a free port), remembering which one was taken. */
export async function planPort(host: string, configured: number, taken: (host: string, port: number) => Promise<boolean> = isPortTaken): Promise<PortPlan> {
  if (configured === 0) return { port: 0, taken: null };
  return (await taken(host, configured)) ? { port: 0, taken: configured } : { port: configured, taken: null };
}

/** A listen failure that a free port would fix (the probe can lose a race with another program). */
export function isAddressInUse(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE" || code === "EACCES") return true;
    if (/\bEADDRINUSE\b/.test(e.message)) return true;
  }
  return false;
}

/** What the user is told when the server is not on the port they configured (null when it is). */
export function portNoteFor(plan: PortPlan, actualPort: number): string | null {
  if (plan.taken === null) return null;
  return `Port ${plan.taken} is in use, so the server is on port ${actualPort} for now. Free port ${plan.taken} or set SVC_PORT to choose another; clients need the new base URL until then.`;
}
