// Benchmark of file ingestion, each case in a fresh process so its peak memory is its own:
//   1. extraction time and peak RSS for a 20-page text PDF, a 20-page scanned PDF (rendered + OCR) and a
//      5-minute video (probe, keyframes + OCR), each against a baseline process that extracts a tiny text
//      file (same modules, same worker), printed as ratios;
//   2. a 100 MB upload to POST /v1/files, streamed by another process: the server's RSS growth during the
//      upload (goal: a few MB, i.e. streamed to disk and not buffered), against a 1 MB upload.
// Usage: npm run bench:ingest
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { EngineHost } from "../server/engine/engine-host.js";
import { FilesService } from "../server/features/files/files-service.js";
import { KeysService } from "../server/features/keys/keys-service.js";
import { buildApp } from "../server/app.js";
import { Ingest } from "../server/ingest/ingest.js";
import { IngestPool } from "../server/ingest/ingest-pool.js";
import { ffmpegPath } from "../server/ingest/media.js";
import type { Classified } from "../server/ingest/types.js";
import { InferencePipeline } from "../server/pipeline/pipeline.js";
import { AccountsService } from "../server/features/accounts/accounts-service.js";
import { AuditService } from "../server/features/audit/audit-service.js";
import { Store } from "../server/store/store.js";
import { scannedPdf, textPng } from "../test/support/file-fixtures.js";
import { makePdfPages } from "../test/support/make-pdf.js";

const { values } = parseArgs({ options: { case: { type: "string" }, file: { type: "string" }, kind: { type: "string" }, mime: { type: "string" } } });
const MB = 1024 * 1024;

interface CaseResult {
  ms: number;
  maxRssMb: number;
  chars: number;
  method: string;
}

/**
 * Child mode: one extraction through the real worker pool, from the compiled server in dist/ (as `svc serve`
 * runs it: no TypeScript loader in the worker), then report time and the process's peak RSS.
 */
async function runCase(): Promise<void> {
  const dist = (path: string) => new URL(`../dist/server/ingest/${path}`, import.meta.url).href;
  const { IngestPool: CompiledPool } = (await import(dist("ingest-pool.js"))) as typeof import("../server/ingest/ingest-pool.js");
  const { Ingest: CompiledIngest } = (await import(dist("ingest.js"))) as typeof import("../server/ingest/ingest.js");
  const pool = new CompiledPool({ idleMs: 1000 });
  const ingest = new CompiledIngest(pool);
  const classified: Classified = { kind: values.kind as Classified["kind"], mediaType: values.mime! };
  const started = performance.now();
  const out = await ingest.extractFile(values.file!, classified, values.file!);
  const ms = performance.now() - started;
  await pool.close();
  const result: CaseResult = { ms, maxRssMb: process.resourceUsage().maxRSS / 1024, chars: out.text.length, method: out.method };
  process.stdout.write(JSON.stringify(result));
}

function child(args: string[]): CaseResult {
  const out = execFileSync(process.execPath, ["--import", "tsx", new URL(import.meta.url).pathname, ...args], { encoding: "utf8", maxBuffer: 16 * MB });
  return JSON.parse(out) as CaseResult;
}

function fixtures(dir: string): Promise<Record<string, { path: string; kind: string; mime: string; label: string }>> {
  return (async () => {
    const lines = (page: number) => Array.from({ length: 45 }, (_, i) => `Page ${page}, line ${i + 1}: the quarterly figures and what they mean for the plan.`);
    const textPdf = join(dir, "text.pdf");
    writeFileSync(textPdf, makePdfPages(Array.from({ length: 20 }, (_, p) => lines(p + 1))));
    const pages: Buffer[] = [];
    for (let p = 0; p < 20; p++) pages.push(await textPng([`Scanned page ${p + 1}`, "Invoice number 4711", "Total due 123.45 EUR", "Thank you for your business."]));
    const scanned = join(dir, "scanned.pdf");
    writeFileSync(scanned, await scannedPdf(pages));
    const video = join(dir, "video.mp4");
    execFileSync(ffmpegPath(), [
      "-hide_banner", "-loglevel", "error", "-y",
      "-f", "lavfi", "-i", "testsrc=size=640x360:rate=5:duration=300",
      "-f", "lavfi", "-i", "sine=frequency=300:sample_rate=16000:duration=300",
      "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", video,
    ]);
    const tiny = join(dir, "tiny.txt");
    writeFileSync(tiny, "hello");
    return {
      baseline: { path: tiny, kind: "text", mime: "text/plain", label: "baseline: 5-byte text file" },
      textPdf: { path: textPdf, kind: "pdf", mime: "application/pdf", label: "20-page text PDF" },
      scanned: { path: scanned, kind: "pdf", mime: "application/pdf", label: "20-page scanned PDF" },
      video: { path: video, kind: "video", mime: "video/mp4", label: "5-minute video (640×360)" },
    };
  })();
}

/**
 * Streams a multipart upload of `bytes` from another process: a real one-second MP4 (its index first, so it
 * probes as a video, whose limit is the whole 100 MB), padded with zeros. Resolves with the HTTP status.
 */
function uploadFromChild(url: string, key: string, bytes: number, mp4Path: string): Promise<number> {
  const script = `
    const boundary = "----bench";
    const mp4 = require("node:fs").readFileSync(${JSON.stringify(mp4Path)});
    const head = Buffer.concat([Buffer.from('--' + boundary + '\\r\\nContent-Disposition: form-data; name="file"; filename="clip.mp4"\\r\\nContent-Type: video/mp4\\r\\n\\r\\n'), mp4]);
    const tail = Buffer.from('\\r\\n--' + boundary + '--\\r\\n');
    const chunk = Buffer.alloc(1024 * 1024, 0);
    let left = ${bytes} - mp4.length;
    const body = new ReadableStream({ start(c) { c.enqueue(head); }, pull(c) { if (left <= 0) { c.enqueue(tail); c.close(); return; } const n = Math.min(left, chunk.length); c.enqueue(chunk.subarray(0, n)); left -= n; } });
    fetch(${JSON.stringify(url)}, { method: "POST", body, duplex: "half", headers: { authorization: "Bearer ${key}", "content-type": "multipart/form-data; boundary=" + boundary, "content-length": String(head.length - mp4.length + ${bytes} + tail.length) } })
      .then(async (r) => { await r.text(); process.stdout.write(String(r.status)); });
  `;
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (d: Buffer) => (out += d.toString()));
    p.on("error", reject);
    p.on("close", () => resolve(Number(out)));
  });
}

async function uploadGrowth(mp4Path: string): Promise<{ small: number; big: number; status: number }> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-files-"));
  const store = Store.open(dataDir);
  const keys = new KeysService(store);
  const pool = new IngestPool();
  // Answer as soon as the file is stored, so the sampling window is the upload, not the extraction after it.
  const files = new FilesService({ store, dataDir, ingest: new Ingest(pool), waitForContentMs: 0 });
  await files.start();
  const host = EngineHost.of(null);
  const app = await buildApp({
    pipeline: new InferencePipeline(host, { files }),
    keys,
    accounts: new AccountsService(store, keys),
    audit: new AuditService(store),
    engineHost: host,
    files,
    version: "bench",
  });
  const url = `${await app.listen({ host: "127.0.0.1", port: 0 })}/v1/files`;
  const key = keys.create().key;
  const measure = async (bytes: number): Promise<{ growth: number; status: number }> => {
    (globalThis as { gc?: () => void }).gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
    const status = await uploadFromChild(url, key, bytes, mp4Path);
    clearInterval(timer);
    return { growth: (peak - before) / MB, status };
  };
  await measure(MB); // warm-up: first request, multipart parser, the ingest worker
  await new Promise((resolve) => setTimeout(resolve, 3000)); // the warm-up's extraction ends
  const small = await measure(MB);
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const big = await measure(100 * MB - 64 * 1024);
  await app.close();
  await files.close();
  await pool.close();
  store.close();
  rmSync(dataDir, { recursive: true, force: true });
  return { small: small.growth, big: big.growth, status: big.status };
}

async function main(): Promise<void> {
  if (values.case) return runCase();
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-ingest-"));
  try {
    console.log("Making the test files (20-page PDFs, a 5-minute video)…");
    const cases = await fixtures(dir);
    const results: Record<string, CaseResult> = {};
    for (const [name, c] of Object.entries(cases)) {
      results[name] = child(["--case", name, "--file", c.path, "--kind", c.kind, "--mime", c.mime]);
      const r = results[name]!;
      console.log(`${c.label.padEnd(30)} ${(r.ms / 1000).toFixed(2).padStart(7)} s   peak RSS ${r.maxRssMb.toFixed(0).padStart(5)} MB   ${r.method}, ${r.chars} characters`);
    }
    const base = results.baseline!;
    console.log("\nAgainst the baseline process:");
    for (const name of ["textPdf", "scanned", "video"]) {
      const r = results[name]!;
      console.log(
        `  ${cases[name]!.label.padEnd(28)} time ×${(r.ms / base.ms).toFixed(1)}, peak RSS ×${(r.maxRssMb / base.maxRssMb).toFixed(2)} (+${(r.maxRssMb - base.maxRssMb).toFixed(0)} MB)` +
          (name === "video" ? "" : `, ${(r.ms / 20).toFixed(0)} ms per page`),
      );
    }
    console.log("\nUpload to POST /v1/files (server RSS growth while a separate process streams the body):");
    const clip = join(dir, "clip.mp4");
    execFileSync(ffmpegPath(), ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "color=c=gray:s=64x64:d=1:r=5", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart", clip]);
    const up = await uploadGrowth(clip);
    console.log(`  1 MB upload: +${up.small.toFixed(1)} MB   100 MB upload: +${up.big.toFixed(1)} MB (HTTP ${up.status})   ratio of growth to body: ${(up.big / 100).toFixed(3)} (goal: a few MB, not ~100)`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
