// An upstream engine's address, checked one way (server/core/upstream-url.ts) by --upstream, by the settings
// store's engine.upstreams as the server reads it at start (server/engine/upstream-settings.ts), and by the
// window's form (Server page, Upstream engines), which bundles the same function; and the setting's shape.
import { describe, expect, it } from "vitest";
import { parseUpstreams } from "../../server/config.js";
import { checkUpstreamUrl, upstreamUrlProblemText, type UpstreamUrlProblem } from "../../server/core/upstream-url.js";
import {
  readUpstreamAffinitySetting,
  readUpstreamsSetting,
  UpstreamSettingError,
  validUpstreamKey,
  writeUpstreamsSetting,
} from "../../server/engine/upstream-settings.js";

const GOOD: Array<[string, string]> = [
  ["http://127.0.0.1:8080", "http://127.0.0.1:8080"],
  ["  http://192.168.1.20:8080/  ", "http://192.168.1.20:8080"],
  ["https://gpu-host.lan:8000", "https://gpu-host.lan:8000"],
  ["http://[::1]:8080", "http://[::1]:8080"],
  ["http://10.0.0.5:8080/llama//", "http://10.0.0.5:8080/llama"],
  ["HTTP://Gpu-Host:8000", "HTTP://Gpu-Host:8000"],
];

const BAD: Array<[string, UpstreamUrlProblem]> = [
  ["", "not_http"],
  ["localhost:8080", "not_http"],
  ["192.168.1.20:8080", "not_http"],
  ["ftp://a", "not_http"],
  ["ws://a:8080", "not_http"],
  ["http://", "not_a_url"],
  ["http:// a", "not_a_url"],
  ["http://a b:8080", "not_a_url"],
  ["http://user:pw@a:8080", "credentials"],
  ["http://user@a:8080", "credentials"],
  ["http://a:8080/?x=1", "query"],
  ["http://a:8080/#top", "query"],
  ["http://a:8080,http://b:8080", "comma"],
];

describe("an upstream's address", () => {
  it("takes http(s) URLs of a server, trimmed and without trailing slashes (paths are appended to it)", () => {
    for (const [text, url] of GOOD) expect(checkUpstreamUrl(text), text).toEqual({ url });
  });

  it("refuses the rest, with the reason the window words", () => {
    for (const [text, problem] of BAD) expect(checkUpstreamUrl(text), text).toEqual({ problem });
    for (const [, problem] of BAD) expect(upstreamUrlProblemText(problem)).toMatch(/^[A-Z].*\.$/);
  });

  it("is the command line's check too: the same addresses pass and fail", () => {
    for (const [text, url] of GOOD) expect(parseUpstreams(text, undefined), text).toEqual([{ url }]);
    // The command line splits on commas and skips empty entries before it checks.
    for (const [text] of BAD.filter(([t, p]) => p !== "comma" && t.trim() !== "")) expect(() => parseUpstreams(text, undefined), text).toThrow(/--upstream/);
  });
});

describe("the engine.upstreams setting", () => {
  it("reads [{url, key}] in order, a key optional, and writes the same shape", () => {
    const value = '[{"url":"http://a:1/"},{"url":"http://b:2","key":"k-2"},{"url":"http://c:3","key":""}]';
    const targets = readUpstreamsSetting(value);
    expect(targets).toEqual([{ url: "http://a:1" }, { url: "http://b:2", key: "k-2" }, { url: "http://c:3" }]);
    expect(writeUpstreamsSetting(targets!)).toBe('[{"url":"http://a:1"},{"url":"http://b:2","key":"k-2"},{"url":"http://c:3"}]');
    expect(readUpstreamsSetting(writeUpstreamsSetting(targets!))).toEqual(targets);
  });

  it("keeps a key with a comma whole (the old reading joined keys with commas)", () => {
    expect(readUpstreamsSetting('[{"url":"http://a:1","key":"x,y"}]')).toEqual([{ url: "http://a:1", key: "x,y" }]);
  });

  it("reads nothing from an empty setting or list, and refuses what is not the shape", () => {
    expect(readUpstreamsSetting(undefined)).toBeUndefined();
    expect(readUpstreamsSetting("")).toBeUndefined();
    expect(readUpstreamsSetting("[]")).toBeUndefined();
    expect(() => readUpstreamsSetting("http://a:1")).toThrow(UpstreamSettingError);
    expect(() => readUpstreamsSetting('{"url":"http://a:1"}')).toThrow(/list/);
    expect(() => readUpstreamsSetting('[{"href":"http://a:1"}]')).toThrow(/no "url"/);
    expect(() => readUpstreamsSetting('[{"url":"ftp://a"}]')).toThrow(/ftp:\/\/a/);
    expect(() => readUpstreamsSetting('[{"url":"http://a:1","key":"two words"}]')).toThrow(/key/);
  });

  it("takes keys as a header can carry them", () => {
    expect(validUpstreamKey("sk-abc_123.XYZ~!")).toBe(true);
    for (const key of ["", "two words", "line\nbreak", "é", "x".repeat(1025)]) expect(validUpstreamKey(key), JSON.stringify(key)).toBe(false);
  });

  it("reads the affinity as on, off, or not set", () => {
    expect(readUpstreamAffinitySetting("on")).toBe(true);
    expect(readUpstreamAffinitySetting("off")).toBe(false);
    expect(readUpstreamAffinitySetting(undefined)).toBeUndefined();
    expect(readUpstreamAffinitySetting("maybe")).toBeUndefined();
  });
});
