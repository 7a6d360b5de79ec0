// A quick reachability check before a download: the downloader retries network errors for minutes before it
// gives up, so an unreachable host is found here, in seconds, and reported in one sentence.
import { lookup } from "node:dns/promises";
import { connect } from "node:net";
import { networkError } from "./download-errors.js";

function withTimeout<T>(promise: Promise<T>, ms: number, code: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(Object.assign(new Error(code), { code })), ms);
    promise.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e: unknown) => (clearTimeout(timer), reject(e)),
    );
  });
}

/** Resolves the host and opens a TCP connection to it; throws AppError network_unreachable. */
export async function probeHost(url: URL, timeoutMs = 10_000): Promise<void> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const port = Number(url.port) || (url.protocol === "http:" ? 80 : 443);
  const label = url.port ? `${host}:${url.port}` : host;
  let address: string;
  try {
    address = (await withTimeout(lookup(host), timeoutMs, "EAI_AGAIN")).address;
  } catch (err) {
    throw networkError(label, (err as NodeJS.ErrnoException).code ?? "ENOTFOUND");
  }
  await new Promise<void>((resolve, reject) => {
    const socket = connect({ host: address, port });
    const timer = setTimeout(() => socket.destroy(Object.assign(new Error("ETIMEDOUT"), { code: "ETIMEDOUT" })), timeoutMs);
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.destroy();
      resolve();
    });
    socket.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(networkError(label, err.code ?? "ECONNREFUSED"));
    });
  });
}
