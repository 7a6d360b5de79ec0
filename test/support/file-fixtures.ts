// Test files made on the spot, never downloaded: PNGs with text (a text PDF rendered by pdfjs with its own
// bundled fonts, so no system font is needed), scanned PDFs (pdf-lib), HEIC (Debian's heif-enc), iWork
// zips (fflate), WAV and MP4 (the ffmpeg bundled with the server).
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { zipSync } from "fflate";
import { PDFDocument } from "pdf-lib";
import sharp from "sharp";
import { ffmpegPath } from "../../server/ingest/media.js";
import { renderPdfPages } from "../../server/ingest/pdf.js";
import { makePdf } from "./make-pdf.js";

const require = createRequire(import.meta.url);

/** A PNG showing `lines` in black on white, cropped to the text (about 1275 pixels wide at 150 dpi). */
export async function textPng(lines: string[]): Promise<Buffer> {
  const { images } = await renderPdfPages(makePdf(lines), 1, 64 * 1024 * 1024);
  const page = images[0]!.data;
  // The text starts at 1 inch from the top-left and runs 14 points a line.
  const height = Math.ceil(((72 + 14 * lines.length + 30) * 150) / 72);
  return sharp(page).extract({ left: 100, top: 0, width: 1000, height: Math.min(height, 1650) }).png().toBuffer();
}

/** A PNG with no text at all: a smooth colour gradient. */
export async function blankPng(): Promise<Buffer> {
  const width = 200;
  const height = 120;
  const data = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) data.set([x, y * 2, 180], (y * width + x) * 3);
  return sharp(data, { raw: { width, height, channels: 3 } }).png().toBuffer();
}

/** A PDF whose pages are only images (like a scan): no text layer. */
export async function scannedPdf(pngs: Buffer[]): Promise<Buffer> {
  const doc = await PDFDocument.create();
  for (const png of pngs) {
    const image = await doc.embedPng(png);
    const page = doc.addPage([612, (612 * image.height) / image.width]);
    page.drawImage(image, { x: 0, y: 0, width: page.getWidth(), height: page.getHeight() });
  }
  return Buffer.from(await doc.save());
}

export const HEIF_ENC = "/usr/bin/heif-enc";

/** Why HEIC fixtures cannot be made here, or null (on CI a missing encoder is a failure, see .ci/run). */
export function heicSkipReason(): string | null {
  if (existsSync(HEIF_ENC)) return null;
  const reason = `${HEIF_ENC} not found (apt-get install libheif-examples; .ci/run does)`;
  if (process.env.CI) throw new Error(`HEIC tests cannot run on CI: ${reason}`);
  return reason;
}

export function heicOf(png: Buffer): Buffer {
  const dir = mkdtempSync(join(tmpdir(), "svc-heic-"));
  try {
    writeFileSync(join(dir, "in.png"), png);
    execFileSync(HEIF_ENC, ["-q", "70", join(dir, "in.png"), "-o", join(dir, "out.heic")], { stdio: "ignore" });
    return readFileSync(join(dir, "out.heic"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** An iWork-like zip: the document's own data (Index/Document.iwa) and, if given, a preview. */
export function iworkZip(preview?: { name: string; data: Buffer }): Buffer {
  const files: Record<string, Uint8Array> = {
    "Index/Document.iwa": new Uint8Array(Buffer.from("snappy-framed protobuf the app writes; not readable here")),
    "Metadata/Properties.plist": new Uint8Array(Buffer.from("<plist/>")),
  };
  if (preview) files[preview.name] = new Uint8Array(preview.data);
  return Buffer.from(zipSync(files));
}

/** A zip whose one entry inflates from a few kilobytes to `megabytes` MB of zeros. */
export function zipBomb(megabytes: number): Buffer {
  return Buffer.from(zipSync({ "preview.jpg": new Uint8Array(megabytes * 1024 * 1024) }, { level: 9 }));
}

function ffmpeg(args: string[], out: string): Buffer {
  const dir = mkdtempSync(join(tmpdir(), "svc-media-"));
  try {
    execFileSync(ffmpegPath(), ["-hide_banner", "-loglevel", "error", "-y", ...args, join(dir, out)], { stdio: "ignore" });
    return readFileSync(join(dir, out));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A WAV of a 440 Hz tone. */
export function toneWav(seconds: number): Buffer {
  return ffmpeg(["-f", "lavfi", "-i", `sine=frequency=440:sample_rate=16000:duration=${seconds}`], "tone.wav");
}

function fontFile(): string {
  return join(dirname(require.resolve("pdfjs-dist/package.json")), "standard_fonts", "LiberationSans-Regular.ttf");
}

/** An H.264 MP4 with a tone, showing `caption` in large black letters on white. */
export function captionMp4(seconds: number, caption: string): Buffer {
  const text = caption.replace(/[:'\\]/g, "");
  return ffmpeg(
    [
      "-f", "lavfi", "-i", `color=c=white:s=640x240:d=${seconds}:r=5`,
      "-f", "lavfi", "-i", `sine=frequency=300:sample_rate=16000:duration=${seconds}`,
      "-vf", `drawtext=fontfile=${fontFile()}:text='${text}':fontsize=48:fontcolor=black:x=30:y=90`,
      "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest",
    ],
    "clip.mp4",
  );
}

/** A long video cheaply (tiny frames, one per second), for the duration limit. */
export function longMp4(seconds: number): Buffer {
  return ffmpeg(["-f", "lavfi", "-i", `color=c=gray:s=64x64:d=${seconds}:r=1`, "-c:v", "libx264", "-pix_fmt", "yuv420p"], "long.mp4");
}
