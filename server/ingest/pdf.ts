// PDF → text with pdfjs-dist (no rendering, no network, no eval).
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

export interface PdfText {
  text: string;
  pages: number;
  pagesRead: number;
}

const require = createRequire(import.meta.url);
let standardFonts: string | undefined;
function standardFontDataUrl(): string {
  standardFonts ??= `${pathToFileURL(join(dirname(require.resolve("pdfjs-dist/package.json")), "standard_fonts")).href}/`;
  return standardFonts;
}

/** Extracts the text layer of the first `maxPages` pages, a line per text line, pages separated by blank lines. */
export async function extractPdfText(data: Uint8Array, maxPages: number): Promise<PdfText> {
  const { getDocument, VerbosityLevel } = await import("pdfjs-dist/legacy/build/pdf.mjs");
  const task = getDocument({
    data,
    isEvalSupported: false,
    useSystemFonts: false,
    disableFontFace: true,
    standardFontDataUrl: standardFontDataUrl(),
    verbosity: VerbosityLevel.ERRORS,
  });
  const doc = await task.promise;
  try {
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
  } finally {
    await task.destroy();
  }
}
