// Where the desktop app's server listens: the host from the LAN-exposure setting, the port from the config
// with a fallback to a free one. No electron import: the unit tests drive these directly.
import { resolve } from "node:path";
import { isAddressInUse, isPortTaken } from "../server/core/port.js";

export { isAddressInUse, isPortTaken };

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

/**
 * The port to ask for at start: an explicit SVC_PORT wins (it is already in `configured`); otherwise the
 * window's port setting, else the configured default.
 */
export function portForStart(setting: number | null, envPort: string | undefined, configured: number): number {
  if (envPort !== undefined && envPort.trim() !== "") return configured;
  return setting ?? configured;
}

/**
 * Where the window's browser profile lives: beside the server's data dir, never inside it, because the
 * profile holds the saved chats and the server's data dir holds no conversation content. One per data dir,
 * so SVC_DATA_DIR still gives a wholly separate instance.
 */
export function windowProfileDir(dataDir: string): string {
  return `${resolve(dataDir).replace(/[\\/]+$/, "")}-window`;
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

/** What the user is told when the server is not on the port they configured (null when it is). */
export function portNoteFor(plan: PortPlan, actualPort: number): string | null {
  if (plan.taken === null) return null;
  return `Port ${plan.taken} is in use, so the server is on port ${actualPort} for now. Free port ${plan.taken}, or choose another under Server › Network › Port; clients need the new base URL until then.`;
}
