// PDF → text (the text layer) or page images (scans), with pdfjs-dist: no network, no eval. Page images are
// drawn with @napi-rs/canvas, which pdfjs uses in Node.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import type { PDFDocumentProxy } from "pdfjs-dist/types/src/display/api.js";

export interface PdfText {
  text: string;
  pages: number;
  pagesRead: number;
}

export interface PageImage {
  page: number;
  format: "png" | "jpeg";
  data: Buffer;
  width: number;
  height: number;
}

export interface PdfPages {
  images: PageImage[];
  pages: number;
  /** Rendering stopped before this page because the images would have passed the byte budget. */
  stoppedAtPage: number | null;
}

const require = createRequire(import.meta.url);
let standardFonts: string | undefined;
function standardFontDataUrl(): string {
  standardFonts ??= `${pathToFileURL(join(dirname(require.resolve("pdfjs-dist/package.json")), "standard_fonts")).href}/`;
  return standardFonts;
}

async function withDocument<T>(data: Uint8Array, use: (doc: PDFDocumentProxy) => Promise<T>): Promise<T> {
  const { getDocument, VerbosityLevel } = await import("pdfjs-dist/legacy/build/pdf.mjs");
  const task = getDocument({
    // pdfjs takes a plain Uint8Array (not a Buffer), and may detach it.
    data: Buffer.isBuffer(data) ? new Uint8Array(data) : data,
    isEvalSupported: false,
    useSystemFonts: false,
    disableFontFace: true,
    standardFontDataUrl: standardFontDataUrl(),
    verbosity: VerbosityLevel.ERRORS,
  });
  const doc = await task.promise;
  try {
    return await use(doc);
  } finally {
    await task.destroy();
  }
}

/** Extracts the text layer of the first `maxPages` pages, a line per text line, pages separated by blank lines. */
export async function extractPdfText(data: Uint8Array, maxPages: number): Promise<PdfText> {
  return withDocument(data, async (doc) => {
    const pagesRead = Math.min(doc.numPages, maxPages);
    const pages: string[] = [];
    for (let n = 1; n <= pagesRead; n++) {
      const page = await doc.getPage(n);
      const content = await page.getTextContent();
      let text = "";
      for (const item of content.items) {
        if (!("str" in item)) continue;
        text += item.str;
        if (item.hasEOL) text += "\n";
      }
      pages.push(text.trim());
      page.cleanup();
    }
    return { text: pages.filter(Boolean).join("\n\n"), pages: doc.numPages, pagesRead };
  });
}

/**
 * Renders the first `maxPages` pages at about 150 dpi, each as the smaller of PNG and JPEG, and stops before
 * the images together would pass `maxBytes`.
 */
export async function renderPdfPages(data: Uint8Array, maxPages: number, maxBytes: number): Promise<PdfPages> {
  const { createCanvas } = await import("@napi-rs/canvas");
  return withDocument(data, async (doc) => {
    const images: PageImage[] = [];
    let total = 0;
    let stoppedAtPage: number | null = null;
    for (let n = 1; n <= Math.min(doc.numPages, maxPages); n++) {
      const page = await doc.getPage(n);
      const base = page.getViewport({ scale: 1 });
      // 150 dpi, but no side beyond 2500 pixels (posters, odd page sizes).
      const scale = Math.min(150 / 72, 2500 / Math.max(base.width, base.height));
      const viewport = page.getViewport({ scale });
      const canvas = createCanvas(Math.ceil(viewport.width), Math.ceil(viewport.height));
      const context = canvas.getContext("2d");
      context.fillStyle = "#ffffff";
      context.fillRect(0, 0, canvas.width, canvas.height);
      await page.render({ canvas: canvas as never, canvasContext: context as never, viewport }).promise;
      page.cleanup();
      const png = await canvas.encode("png");
      const jpeg = await canvas.encode("jpeg", 85);
      const [format, bytes] = png.length <= jpeg.length ? (["png", png] as const) : (["jpeg", jpeg] as const);
      if (total + bytes.length > maxBytes) {
        stoppedAtPage = n;
        break;
      }
      total += bytes.length;
      images.push({ page: n, format, data: bytes, width: canvas.width, height: canvas.height });
    }
    return { images, pages: doc.numPages, stoppedAtPage };
  });
}
