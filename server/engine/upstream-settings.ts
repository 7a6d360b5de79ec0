// The desktop app's upstream engines as the settings store keeps them (docs/configuration.md, "Upstream
// engines"): the window's form (Server page) writes them, server/index.ts reads them at start when no flag or
// environment variable names upstreams, `svc models list` mentions them. Only settings and their shapes here:
// no node-llama-cpp, so the console and the CLI can read them without loading the engine.
import { checkUpstreamUrl, upstreamUrlProblemText, type UpstreamUrlProblem } from "../core/upstream-url.js";
import type { UpstreamTarget } from "./upstream-client.js";

/** The upstreams: [{"url": ..., "key": ...}] as JSON, in order (key absent: none). */
export const UPSTREAMS_SETTING = "engine.upstreams";
/** Prefix affinity over the upstreams' slots: "on" (absent: on) or "off" (round-robin). */
export const UPSTREAM_AFFINITY_SETTING = "engine.upstream_affinity";

/** At most this many upstreams in the setting (a team's replicas, not a crawl list). */
export const MAX_UPSTREAMS = 32;

export class UpstreamSettingError extends Error {
  override name = "UpstreamSettingError";
  constructor(
    message: string,
    readonly problem: UpstreamUrlProblem | "shape" | "key" | "duplicate" | "too_many",
  ) {
    super(message);
  }
}

/** A key as llama-server's --api-key and vLLM's take it, sendable as a header: visible ASCII, no spaces. */
export function validUpstreamKey(key: string): boolean {
  return key.length > 0 && key.length <= 1024 && /^[\x21-\x7e]+$/.test(key);
}

/** The stored list, checked as the command line's is; undefined: none saved. Throws UpstreamSettingError. */
export function readUpstreamsSetting(value: string | undefined): UpstreamTarget[] | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  let list: unknown;
  try {
    list = JSON.parse(value);
  } catch {
    throw new UpstreamSettingError("it is not JSON", "shape");
  }
  if (!Array.isArray(list)) throw new UpstreamSettingError('it is not a list of {"url", "key"}', "shape");
  const targets = list.map((entry: unknown, i): UpstreamTarget => {
    const { url, key } = (entry ?? {}) as { url?: unknown; key?: unknown };
    if (typeof url !== "string") throw new UpstreamSettingError(`entry ${i + 1} has no "url"`, "shape");
    const checked = checkUpstreamUrl(url);
    if ("problem" in checked) throw new UpstreamSettingError(`'${url}' is not an http:// or https:// URL of a server (${checked.problem})`, checked.problem);
    if (key !== undefined && key !== null && key !== "" && (typeof key !== "string" || !validUpstreamKey(key)))
      throw new UpstreamSettingError(`the key of ${checked.url} is not a key`, "key");
    return { url: checked.url, ...(typeof key === "string" && key !== "" ? { key } : {}) };
  });
  return targets.length > 0 ? targets : undefined;
}

/** The setting's text for this list (written in the shape readUpstreamsSetting reads). */
export function writeUpstreamsSetting(targets: readonly UpstreamTarget[]): string {
  return JSON.stringify(targets.map((t) => (t.key ? { url: t.url, key: t.key } : { url: t.url })));
}

/** The stored affinity: true (on), false (off, round-robin), undefined (none saved: the default, on). */
export function readUpstreamAffinitySetting(value: string | undefined): boolean | undefined {
  return value === "on" ? true : value === "off" ? false : undefined;
}

/**
 * The list the window's form saves (console setUpstreams): its addresses checked as the command line's are,
 * in order and none twice, each with `key` (a string: that key for every one; null: none; undefined: the key
 * saved for that address, else the one all saved ones shared). Throws UpstreamSettingError in words the
 * window shows.
 */
export function upstreamsToSave(urls: unknown, key: unknown, saved: readonly UpstreamTarget[]): UpstreamTarget[] {
  if (!Array.isArray(urls) || urls.some((u) => typeof u !== "string")) throw new UpstreamSettingError("Upstreams are a list of addresses and an affinity (on or off).", "shape");
  if (urls.length > MAX_UPSTREAMS) throw new UpstreamSettingError(`At most ${MAX_UPSTREAMS} upstream servers.`, "too_many");
  if (key !== undefined && key !== null && (typeof key !== "string" || !validUpstreamKey(key)))
    throw new UpstreamSettingError("An upstream key is up to 1,024 letters, digits and punctuation, without spaces.", "key");
  const list: string[] = [];
  for (const text of urls as string[]) {
    const checked = checkUpstreamUrl(text);
    if ("problem" in checked) throw new UpstreamSettingError(`${text.trim() || "An empty address"}: ${upstreamUrlProblemText(checked.problem)}`, checked.problem);
    if (list.some((u) => u.toLowerCase() === checked.url.toLowerCase())) throw new UpstreamSettingError(`${checked.url} is in the list twice.`, "duplicate");
    list.push(checked.url);
  }
  const { shared } = savedKeys(saved);
  const keyOf = (url: string): string => (key === null ? "" : typeof key === "string" ? key : (saved.find((u) => u.url === url)?.key ?? shared ?? ""));
  return list.map((url) => ({ url, ...(keyOf(url) ? { key: keyOf(url) } : {}) }));
}

/**
 * What the saved keys are, never the keys: none, one for every upstream (`shared`), or one of their own for
 * each; and the shared key's last four characters when it is long enough (16 or more) to spare them.
 */
export function savedKeys(saved: readonly UpstreamTarget[]): { keys: "none" | "one" | "each"; shared: string | null; hint: string | null } {
  const keys = new Set(saved.map((u) => u.key ?? ""));
  const shared = keys.size === 1 && !keys.has("") ? [...keys][0]! : null;
  return {
    keys: saved.every((u) => !u.key) ? "none" : shared !== null ? "one" : "each",
    shared,
    hint: shared !== null && shared.length >= 16 ? shared.slice(-4) : null,
  };
}
