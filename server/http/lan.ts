// What changes when the server listens beyond loopback (--lan): the Host check keeps working with this
// machine's own names and addresses (a DNS-rebinding page names its own domain, which is refused), keyless
// /health tells other machines only whether the model serves, and a warning says what is exposed.
import { hostname, networkInterfaces } from "node:os";
import { isLoopbackHost } from "../core/loopback.js";

/** The host part of a Host header, lower case, without port, brackets, IPv6 zone or trailing dot. */
export function hostOf(header: string): string {
  let host = header.trim().toLowerCase();
  if (host.startsWith("[")) host = host.slice(1, host.indexOf("]") === -1 ? undefined : host.indexOf("]"));
  else host = host.replace(/:\d*$/, "");
  return host.replace(/%.*$/, "").replace(/\.$/, "");
}

/** Whether a peer address (request.ip) is this machine: 127/8, ::1, or either as an IPv4-mapped address. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  return isLoopbackHost(address.replace(/^::ffff:/i, ""));
}

const REFRESH_MS = 10_000;
const MISS_REFRESH_MS = 1_000;

/** This machine's names (host name, its short form, short.local) and interface addresses, kept fresh. */
export class MachineNames {
  private names = new Set<string>();
  private readAt = -Infinity;

  constructor(private readonly extra: readonly string[] = []) {}

  /** Whether `host` (from hostOf) names this machine; a miss rereads the interfaces at most once a second. */
  has(host: string): boolean {
    const now = performance.now();
    if (now - this.readAt > REFRESH_MS) this.read(now);
    if (this.names.has(host)) return true;
    if (now - this.readAt > MISS_REFRESH_MS) {
      this.read(now);
      return this.names.has(host);
    }
    return false;
  }

  /** Everything `has` accepts now besides loopback, for the start-up warning. */
  list(): string[] {
    this.read(performance.now());
    return [...this.names];
  }

  private read(now: number): void {
    const names = new Set(this.extra.map(hostOf));
    const full = hostname().toLowerCase().replace(/\.$/, "");
    const short = full.split(".")[0]!;
    for (const name of [full, short, `${short}.local`]) if (name) names.add(name);
    for (const addresses of Object.values(networkInterfaces()))
      for (const a of addresses ?? []) if (!a.internal) names.add(hostOf(a.address));
    this.names = names;
    this.readAt = now;
  }
}

/** The Host check: loopback names always; with LAN exposure also this machine's names and addresses. */
export function hostAllowedOn(header: string | undefined, machine: MachineNames | null): boolean {
  if (!header) return true; // HTTP/1.0 clients; nothing to rebind
  const host = hostOf(header);
  return isLoopbackHost(host) || (machine !== null && machine.has(host));
}

/** What the log says when the server listens beyond loopback. */
export function lanWarning(host: string, port: number, machine: MachineNames): string {
  const reachable = machine
    .list()
    .filter((name) => /^[\d.]+$/.test(name))
    .map((address) => `http://${address}:${port}`);
  return (
    `LAN exposure: listening on ${host}:${port}, so other machines on the network can connect` +
    `${reachable.length ? ` (${reachable.join(", ")})` : ""}. Without a key they get /v1/models and a /health that says only ` +
    `ok or loading; every other endpoint needs an API key, which is the only guard: keep keys secret, revoke unused ones, ` +
    `and firewall this port on networks you do not trust. Traffic is plain HTTP (not encrypted). Requests must name this ` +
    `machine in their Host header (${machine.list().join(", ")}, or loopback); add other names with --allowed-hosts.`
  );
}
