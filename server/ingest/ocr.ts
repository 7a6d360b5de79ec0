// Optical character recognition with tesseract.js and the English model from @tesseract.js-data/eng (on
// disk, installed with npm: nothing is downloaded). One recognizer, made on first use and ended when idle.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { Worker as TesseractWorker } from "tesseract.js";

const require = createRequire(import.meta.url);
/** A line must be read with at least this confidence (0-100) to count: below it OCR mostly guesses. */
export const MIN_LINE_CONFIDENCE = 60;
const IDLE_MS = 20_000;

let recognizer: Promise<TesseractWorker> | null = null;
let idleTimer: NodeJS.Timeout | null = null;
let busy = 0;

function langPath(): string {
  return join(dirname(require.resolve("@tesseract.js-data/eng/package.json")), "4.0.0_best_int");
}

async function getRecognizer(): Promise<TesseractWorker> {
  recognizer ??= (async () => {
    const { createWorker, OEM } = await import("tesseract.js");
    const worker = await createWorker("eng", OEM.LSTM_ONLY, { langPath: langPath(), cacheMethod: "none", gzip: true });
    // Images carry no trustworthy resolution (video frames none at all); page renders are 150 dpi.
    await worker.setParameters({ user_defined_dpi: "150" });
    return worker;
  })().catch((err: unknown) => {
    recognizer = null;
    throw err;
  });
  return recognizer;
}

export interface OcrResult {
  /** The lines read with confidence, in reading order; empty when nothing legible was found. */
  lines: string[];
  /** Mean confidence of the kept lines (0-100), or 0. */
  confidence: number;
}

/** Reads the text in a PNG/JPEG/BMP image. Lines OCR is unsure of are dropped rather than guessed. */
export async function recognizeText(image: Buffer): Promise<OcrResult> {
  busy++;
  if (idleTimer) clearTimeout(idleTimer);
  try {
    const worker = await getRecognizer();
    const { data } = await worker.recognize(image, {}, { text: true, blocks: true });
    const lines: string[] = [];
    let sum = 0;
    for (const block of data.blocks ?? [])
      for (const paragraph of block.paragraphs)
        for (const line of paragraph.lines) {
          const text = line.text.trim();
          if (line.confidence < MIN_LINE_CONFIDENCE || !/[\p{L}\p{N}]{2}/u.test(text)) continue;
          lines.push(text);
          sum += line.confidence;
        }
    return { lines, confidence: lines.length ? sum / lines.length : 0 };
  } finally {
    busy--;
    if (busy === 0) {
      idleTimer = setTimeout(() => void endRecognizer(), IDLE_MS);
      idleTimer.unref();
    }
  }
}

export async function endRecognizer(): Promise<void> {
  const current = recognizer;
  recognizer = null;
  if (current) await (await current.catch(() => null))?.terminate();
}
