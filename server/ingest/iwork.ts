// Apple iWork files (.pages, .numbers, .key) are zip archives. What can be read without Apple's software is
// the preview the app embeds: a PDF (QuickLook/Preview.pdf, older files) or an image (preview.jpg). Without
// a preview the content is empty (spec, Files rule 2). Archives that inflate out of all proportion are refused.
import yauzl from "yauzl";
import { AppError } from "../core/errors.js";

/** Previews in the order they are preferred. */
const PREVIEWS = ["QuickLook/Preview.pdf", "preview.pdf", "preview.jpg", "QuickLook/Thumbnail.jpg", "preview-web.jpg", "preview-micro.jpg", "QuickLook/Thumbnail.png"];
const MAX_ENTRIES = 20_000;
const MAX_PREVIEW_BYTES = 50 * 1024 * 1024;
/** Total uncompressed size and compression ratio beyond which an archive counts as a zip bomb. */
const MAX_TOTAL_UNCOMPRESSED = 1024 * 1024 * 1024;
const MAX_RATIO = 200;

export interface IworkPreview {
  name: string;
  type: "pdf" | "image";
  data: Buffer;
}

function bomb(why: string): AppError {
  return new AppError("invalid_request", `The archive was refused: ${why} (a zip bomb?).`, { code: "zip_bomb" });
}

function openZip(source: { path?: string; bytes?: Uint8Array }): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    const done = (err: Error | null, zip?: yauzl.ZipFile) => (err || !zip ? reject(err ?? new Error("no zip")) : resolve(zip));
    const options = { lazyEntries: true, autoClose: false, validateEntrySizes: true, strictFileNames: false };
    if (source.path) yauzl.open(source.path, options, done);
    else yauzl.fromBuffer(Buffer.from(source.bytes!), options, done);
  });
}

export async function findIworkPreview(source: { path?: string; bytes?: Uint8Array }): Promise<IworkPreview | null> {
  let zip: yauzl.ZipFile;
  try {
    zip = await openZip(source);
  } catch (err) {
    throw new AppError("invalid_request", `The iWork file is not a readable zip archive: ${(err as Error).message}`, { code: "invalid_archive" });
  }
  try {
    if (zip.entryCount > MAX_ENTRIES) throw bomb(`${zip.entryCount} entries`);
    const entries = new Map<string, yauzl.Entry>();
    let total = 0;
    await new Promise<void>((resolve, reject) => {
      zip.on("entry", (entry: yauzl.Entry) => {
        total += entry.uncompressedSize;
        if (total > MAX_TOTAL_UNCOMPRESSED) return reject(bomb("it would inflate to more than 1 GB"));
        if (entry.uncompressedSize > 1024 * 1024 && entry.uncompressedSize / Math.max(1, entry.compressedSize) > MAX_RATIO)
          return reject(bomb(`${entry.fileName} inflates ${Math.round(entry.uncompressedSize / Math.max(1, entry.compressedSize))} times`));
        entries.set(entry.fileName, entry);
        zip.readEntry();
      });
      zip.on("end", () => resolve());
      zip.on("error", reject);
      zip.readEntry();
    });
    const name = PREVIEWS.find((n) => entries.has(n));
    if (!name) return null;
    const entry = entries.get(name)!;
    if (entry.uncompressedSize > MAX_PREVIEW_BYTES) throw bomb(`its preview would be ${entry.uncompressedSize} bytes`);
    const data = await readEntry(zip, entry);
    return { name, type: name.endsWith(".pdf") ? "pdf" : "image", data };
  } finally {
    zip.close();
  }
}

function readEntry(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (err, stream) => {
      if (err || !stream) return reject(err ?? new Error("no stream"));
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on("data", (chunk: Buffer) => {
        size += chunk.length;
        // yauzl checks the declared size too; this bounds memory whatever the header says.
        if (size > MAX_PREVIEW_BYTES) stream.destroy(bomb("its preview inflates beyond 50 MB"));
        else chunks.push(chunk);
      });
      stream.on("end", () => resolve(Buffer.concat(chunks)));
      stream.on("error", reject);
    });
  });
}
