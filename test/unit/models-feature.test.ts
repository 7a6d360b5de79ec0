// The models feature's pure parts: model sources, download error sentences, progress rendering, speed.
import { describe, expect, it } from "vitest";
import { AppError } from "../../server/core/errors.js";
import { describeDownloadError, findErrorCode } from "../../server/features/models/download-errors.js";
import { fitOf, parseModelSource, parseSha256, RECOMMENDED_MODEL, SUGGESTED_MODELS } from "../../server/features/models/model-sources.js";
import { filesOfModel, isLaterSplitPart } from "../../server/features/models/models-folder.js";
import {
  formatBytes,
  formatDuration,
  formatProgressLine,
  ProgressRenderer,
} from "../../server/features/models/progress-bar.js";
import { SpeedMeter } from "../../server/features/models/speed-meter.js";

describe("parseModelSource", () => {
  it("no source, or 'recommended', is the recommended model from Hugging Face", () => {
    for (const input of [undefined, "", "recommended"])
      expect(parseModelSource(input, {})).toMatchObject({ kind: "hf", uri: RECOMMENDED_MODEL.source, origin: new URL("https://huggingface.co/") });
    expect(RECOMMENDED_MODEL.source).toBe("hf:Qwen/Qwen3-4B-GGUF:Q4_K_M");
  });

  it("accepts the hf: forms and follows HF_ENDPOINT / MODEL_ENDPOINT as node-llama-cpp does", () => {
    expect(parseModelSource("hf:user/repo:Q4_K_M", {}).uri).toBe("hf:user/repo:Q4_K_M");
    expect(parseModelSource("hf:user/repo/sub/file.gguf", {}).uri).toBe("hf:user/repo/sub/file.gguf");
    expect(parseModelSource("hf:user/repo", { HF_ENDPOINT: "http://127.0.0.1:9999/" }).origin.href).toBe("http://127.0.0.1:9999/");
    expect(parseModelSource("hf:user/repo", { MODEL_ENDPOINT: "https://mirror.example/", HF_ENDPOINT: "https://other.example/" }).origin.hostname).toBe(
      "mirror.example",
    );
    expect(parseModelSource("hf:user/repo", { HF_ENDPOINT: "not a url" }).origin.hostname).toBe("huggingface.co");
  });

  it("accepts https URLs anywhere and plain http only on this machine", () => {
    expect(parseModelSource("https://example.com/m.gguf", {})).toMatchObject({ kind: "url", uri: "https://example.com/m.gguf" });
    expect(parseModelSource("http://127.0.0.1:8080/m.gguf", {}).kind).toBe("url");
    expect(parseModelSource("http://localhost/m.gguf", {}).kind).toBe("url");
    expect(() => parseModelSource("http://example.com/m.gguf", {})).toThrow(/only from this machine/);
  });

  it("refuses anything else with a sentence that shows the accepted forms", () => {
    for (const input of ["model.gguf", "ftp://example.com/m.gguf", "hf:user", "hf:user/repo/notes.txt"]) {
      let error: unknown;
      try {
        parseModelSource(input, {});
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(AppError);
      expect((error as AppError).status).toBe(400);
      expect((error as AppError).message).toContain("hf:user/repo:quant");
    }
  });

  it("parses --sha256 values", () => {
    const hex = "ab".repeat(32);
    expect(parseSha256(hex.toUpperCase())).toBe(hex);
    expect(parseSha256(`sha256:${hex}`)).toBe(hex);
    expect(parseSha256(undefined)).toBeUndefined();
    expect(() => parseSha256("abc")).toThrow(/64 hexadecimal/);
  });
});

describe("describeDownloadError", () => {
  const context = { source: "https://example.com/m.gguf", host: "example.com" };
  const fetchFailed = (code: string) => Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error(code), { code }) });

  it("finds the network error code deep in a fetch failure", () => {
    expect(findErrorCode(fetchFailed("ECONNREFUSED"))).toBe("ECONNREFUSED");
    expect(findErrorCode({ errors: [new Error("x"), { code: "ETIMEDOUT" }] })).toBe("ETIMEDOUT");
    expect(findErrorCode(new Error("plain"))).toBeUndefined();
  });

  it("says the host cannot be reached, and why, for network errors", () => {
    const refused = describeDownloadError(fetchFailed("ECONNREFUSED"), context);
    expect(refused.message).toMatch(/^Cannot reach example\.com: the connection was refused\./);
    expect(refused.code).toBe("network_unreachable");
    expect(describeDownloadError(fetchFailed("ENOTFOUND"), context).message).toContain("its name does not resolve");
    expect(describeDownloadError(fetchFailed("UND_ERR_CONNECT_TIMEOUT"), context).message).toContain("timed out");
  });

  it("maps HTTP statuses: 404 not found, 401/403 with the token hint, others as failures", () => {
    const status = (statusCode: number) => Object.assign(new Error(`status ${statusCode}`), { statusCode });
    expect(describeDownloadError(status(404), context)).toMatchObject({ kind: "not_found", code: "model_source_not_found" });
    expect(describeDownloadError(status(403), context).message).toContain("HF_TOKEN");
    expect(describeDownloadError(status(500), context).message).toContain("HTTP 500");
  });

  it("turns the library's Hugging Face messages into sentences", () => {
    const missing = describeDownloadError(new Error('Cannot get quantization "Q9" for model "hf:a/b" or it does not exist'), context);
    expect(missing).toMatchObject({ kind: "not_found" });
    expect(describeDownloadError(Object.assign(new Error("no space"), { code: "ENOSPC" }), context).code).toBe("disk_full");
    expect(describeDownloadError(new Error("weird"), context).message).toContain("weird");
  });
});

describe("split models", () => {
  it("lists every part of a split model from its first part, and hides the later parts", () => {
    expect(filesOfModel("m-00001-of-00003.gguf")).toEqual(["m-00001-of-00003.gguf", "m-00002-of-00003.gguf", "m-00003-of-00003.gguf"]);
    expect(filesOfModel("m.gguf")).toEqual(["m.gguf"]);
    expect(isLaterSplitPart("m-00002-of-00003.gguf")).toBe(true);
    expect(isLaterSplitPart("m-00001-of-00003.gguf")).toBe(false);
  });
});

describe("progress formatting", () => {
  it("formats sizes in decimal units, as download sites do", () => {
    expect(formatBytes(0)).toBe("0 B");
    expect(formatBytes(999)).toBe("999 B");
    expect(formatBytes(1500)).toBe("1.50 kB");
    expect(formatBytes(12_601_056)).toBe("12.6 MB");
    expect(formatBytes(150_000_000)).toBe("150 MB");
    // Never "1000 kB": it rounds up into the next unit.
    expect(formatBytes(999_700)).toBe("1.00 MB");
    expect(formatBytes(3_601_056)).toBe("3.60 MB");
    expect(formatBytes(2_500_000_000)).toBe("2.50 GB");
  });

  it("formats durations", () => {
    expect(formatDuration(null)).toBe("--");
    expect(formatDuration(Number.POSITIVE_INFINITY)).toBe("--");
    expect(formatDuration(42)).toBe("42s");
    expect(formatDuration(102)).toBe("1m 42s");
    expect(formatDuration(7380)).toBe("2h 03m");
  });

  it("shows bar, percent, size, speed and ETA on one line that fits the terminal", () => {
    const progress = { downloadedBytes: 1.25e9, totalBytes: 2.5e9, bytesPerSecond: 12.3e6, etaSeconds: 102 };
    const line = formatProgressLine(progress, 100);
    expect(line).toMatch(/^\[#{15}-{15}\]  50%  1\.25 GB \/ 2\.50 GB  12\.3 MB\/s  ETA 1m 42s$/);
    expect(line.length).toBeLessThanOrEqual(100);
    expect(formatProgressLine(progress, 40)).toBe(" 50%  1.25 GB / 2.50 GB  12.3 MB/s  ETA 1m 42s");
    expect(formatProgressLine({ downloadedBytes: 5e6, totalBytes: 0, bytesPerSecond: 0, etaSeconds: null }, 100)).toContain(" ?%  5.00 MB  -- /s  ETA --");
  });

  it("on a terminal, redraws one line in place at most every 100 ms", () => {
    let now = 0;
    const out: string[] = [];
    const renderer = new ProgressRenderer({ isTTY: true, columns: 80, write: (t) => out.push(t) }, { now: () => now });
    const at = (bytes: number) => ({ downloadedBytes: bytes, totalBytes: 1000, bytesPerSecond: 100, etaSeconds: 1 });
    now = 1000;
    renderer.update(at(100));
    now = 1050;
    renderer.update(at(150)); // too soon: skipped
    now = 1200;
    renderer.update(at(300));
    renderer.end();
    expect(out).toHaveLength(3);
    expect(out[0]).toMatch(/^\r\[.*\] +10% .*\x1b\[K$/);
    expect(out[1]).toContain("30%");
    expect(out[2]).toBe("\n");
  });

  it("in a pipe or file, writes a plain line per 10% (and at least every 30 s)", () => {
    let now = 0;
    const out: string[] = [];
    const renderer = new ProgressRenderer({ isTTY: false, write: (t) => out.push(t) }, { now: () => now });
    for (let bytes = 0; bytes <= 1000; bytes += 25) renderer.update({ downloadedBytes: bytes, totalBytes: 1000, bytesPerSecond: 0, etaSeconds: null });
    expect(out.map((l) => l.trim().split(" ")[0])).toEqual(["0%", "10%", "20%", "30%", "40%", "50%", "60%", "70%", "80%", "90%", "100%"]);
    expect(out.every((l) => l.endsWith("\n") && !l.includes("\r"))).toBe(true);
    // Stuck at 100 bytes for a minute: one more line after 30 s.
    out.length = 0;
    const slow = new ProgressRenderer({ isTTY: false, write: (t) => out.push(t) }, { now: () => now });
    now = 0;
    slow.update({ downloadedBytes: 101, totalBytes: 1000, bytesPerSecond: 1, etaSeconds: 900 });
    now = 10_000;
    slow.update({ downloadedBytes: 102, totalBytes: 1000, bytesPerSecond: 1, etaSeconds: 898 });
    now = 31_000;
    slow.update({ downloadedBytes: 103, totalBytes: 1000, bytesPerSecond: 1, etaSeconds: 897 });
    expect(out).toHaveLength(2);
  });
});

describe("SpeedMeter", () => {
  it("measures the rate over the last seconds and the time left at that rate", () => {
    const meter = new SpeedMeter(5000);
    let estimate = meter.add(0, 0);
    expect(estimate.bytesPerSecond).toBe(0);
    expect(estimate.etaSeconds(1000)).toBeNull();
    for (let t = 100; t <= 3000; t += 100) estimate = meter.add(t * 1000, t); // 1 MB/s
    expect(estimate.bytesPerSecond).toBeCloseTo(1e6, -3);
    expect(estimate.etaSeconds(5e6)).toBeCloseTo(2, 1);
    // Only the window counts: after a fast phase the rate follows the recent pace.
    for (let t = 3100; t <= 12_000; t += 100) estimate = meter.add(3e6 + (t - 3000) * 100, t); // 100 kB/s
    expect(estimate.bytesPerSecond).toBeCloseTo(1e5, -3);
  });

  it("starts over when the count goes backwards (a retried chunk)", () => {
    const meter = new SpeedMeter();
    meter.add(0, 0);
    meter.add(5e6, 1000);
    expect(meter.add(1e6, 1100).bytesPerSecond).toBe(0);
  });
});

describe("suggested models", () => {
  it("judge the fit by GPU memory, else by system memory", () => {
    const gb = 1e9;
    const fourB = SUGGESTED_MODELS.find((m) => m.source === RECOMMENDED_MODEL.source)!;
    expect(fitOf(fourB, { ramTotalBytes: 8 * gb, vramTotalBytes: 0, gpu: false })).toBe("fits");
    expect(fitOf(fourB, { ramTotalBytes: 5 * gb, vramTotalBytes: 0, gpu: false })).toBe("tight");
    expect(fitOf(fourB, { ramTotalBytes: 4 * gb, vramTotalBytes: 0, gpu: false })).toBe("too_big");
    expect(fitOf(fourB, { ramTotalBytes: 4 * gb, vramTotalBytes: 6 * gb, gpu: true })).toBe("fits_gpu");
    expect(SUGGESTED_MODELS.map((m) => m.approxBytes)).toEqual([...SUGGESTED_MODELS.map((m) => m.approxBytes)].sort((a, b) => a - b));
  });
});
