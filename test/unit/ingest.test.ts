// The ingest registry through its public entry (Ingest.inline: classification here, extraction in the
// worker), on files the tests make: text, PDFs (text layer and scanned), images (with OCR), HEIC, iWork,
// audio and video.
import sharp from "sharp";
import { afterAll, describe, expect, it } from "vitest";
import { formatFileText, Ingest, MAX_TEXT_CHARS } from "../../server/ingest/ingest.js";
import { IngestPool } from "../../server/ingest/ingest-pool.js";
import { NO_SPEECH_MODEL } from "../../server/ingest/speech.js";
import { NOTHING_LEGIBLE } from "../../server/ingest/vision.js";
import { blankPng, captionMp4, heicOf, heicSkipReason, iworkZip, longMp4, scannedPdf, textPng, toneWav, zipBomb } from "../support/file-fixtures.js";
import { makePdf, makePdfPages } from "../support/make-pdf.js";

const b64 = (s: string | Buffer) => Buffer.from(s).toString("base64");
const pool = new IngestPool({ idleMs: 5_000 });
const ingest = new Ingest(pool);
afterAll(() => pool.close());

const inline = (data: Buffer | string, mediaType: string, filename?: string, expect?: "image") =>
  ingest.inline({ source: { kind: "base64", mediaType, data: b64(data) }, filename, param: "p", expect });

describe("text and PDF", () => {
  it("extracts the text layer of a PDF", async () => {
    const out = await inline(makePdf(["Quarterly report", "Revenue grew (a lot)"]), "application/pdf");
    expect(out).toMatchObject({ kind: "pdf", method: "pdf_text", pages: 1, truncated: false });
    expect(out.text).toBe("Quarterly report\nRevenue grew (a lot)");
  });

  it("reads at most 20 pages and says so", async () => {
    const pages = Array.from({ length: 23 }, (_, i) => [`Page number ${i + 1}`]);
    const out = await inline(makePdfPages(pages), "application/pdf");
    expect(out).toMatchObject({ pages: 23, pagesRead: 20 });
    expect(out.text).toContain("Page number 20");
    expect(out.text).not.toContain("Page number 21");
    expect(out.text).toContain("only the first 20 were read");
  });

  it("refuses a broken PDF, naming the part", async () => {
    await expect(inline("%PDF-1.4 not really", "application/pdf")).rejects.toMatchObject({ code: "invalid_pdf", param: "p" });
  });

  it("decodes text and code files, by media type or extension, and cuts at 200,000 characters", async () => {
    expect((await inline("a,b\n1,2", "text/csv")).text).toBe("a,b\n1,2");
    const code = await inline("fn main() {}", "application/octet-stream", "main.rs");
    expect(code).toMatchObject({ text: "fn main() {}", mediaType: "text/x-rust", kind: "text" });
    const long = await ingest.inline({ source: { kind: "text", mediaType: "text/plain", text: "x".repeat(MAX_TEXT_CHARS + 5) }, param: "p" });
    expect(long.text).toHaveLength(MAX_TEXT_CHARS);
    expect(long.truncated).toBe(true);
    expect(formatFileText(long, "big.txt")).toContain("was cut at 200000 characters");
  });

  it("remembers an inline file's extraction by its bytes, so a conversation's next turn does not read it again", async () => {
    const counting = new IngestPool({ idleMs: 1000 });
    let runs = 0;
    const run = counting.run.bind(counting);
    counting.run = (...args) => {
      runs++;
      return run(...args);
    };
    const remembering = new Ingest(counting);
    const part = (filename: string) => ({ source: { kind: "base64" as const, mediaType: "text/plain", data: b64("remember me") }, filename, param: "p" });
    expect((await remembering.inline(part("a.txt"))).text).toBe("remember me");
    expect((await remembering.inline(part("a.txt"))).text).toBe("remember me");
    expect(runs).toBe(1);
    await remembering.inline(part("b.txt"));
    expect(runs).toBe(2);
    await counting.close();
  });

  it("refuses binary data posing as text, unsupported types, URLs, bad base64", async () => {
    await expect(inline(Buffer.from([0x41, 0x00, 0x42, 0x00]), "text/plain", "notes.txt")).rejects.toMatchObject({ code: "unsupported_file_type", status: 400 });
    await expect(inline(Buffer.from([0xc3, 0x28, 0x41, 0x42]), "text/plain", "notes.txt")).rejects.toMatchObject({ message: /not valid UTF-8/ });
    await expect(inline(Buffer.from(iworkZip()), "application/zip", "archive.zip")).rejects.toMatchObject({ code: "unsupported_file_type" });
    await expect(ingest.inline({ source: { kind: "url", url: "https://example.com/a.pdf" }, param: "p" })).rejects.toMatchObject({ code: "url_not_fetched" });
    await expect(ingest.inline({ source: { kind: "base64", mediaType: "text/plain", data: "%%%" }, param: "p" })).rejects.toMatchObject({ code: "invalid_file_data" });
  });

  it("refuses credential files by name and by content with 422", async () => {
    for (const name of ["prod.env", ".env", ".env.local", "server.pem", "id.p12", "a.pfx", "ca.cer", "site.crt"])
      await expect(inline("hello", "text/plain", name), name).rejects.toMatchObject({ kind: "unprocessable", status: 422, code: "file_type_rejected" });
    const pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n";
    await expect(inline(pem, "text/plain", "notes.txt")).rejects.toMatchObject({ status: 422, message: /PEM/ });
    await expect(inline("# settings\nDATABASE_URL=postgres://x\nAPI_KEY=abc\n", "text/plain", "settings.txt")).rejects.toMatchObject({ status: 422 });
    // A PKCS#12 header: SEQUENCE, INTEGER 3, SEQUENCE { pkcs7-data ... }
    const p12 = Buffer.from("308209c00201033082098606092a864886f70d010701a08209770482097330820", "hex");
    await expect(inline(p12, "application/octet-stream", "backup.bin")).rejects.toMatchObject({ status: 422, message: /PKCS#12/ });
    // Ordinary settings without secrets are text.
    expect((await inline("PORT=8080\nHOST=localhost\n", "text/plain", "settings.txt")).kind).toBe("text");
  });
});

describe("the vision path", () => {
  it("reads the text in a PNG with OCR and states the image's facts", async () => {
    const out = await inline(await textPng(["Invoice 4711", "Total due 123.45 EUR"]), "image/png", "scan.png", "image");
    expect(out).toMatchObject({ kind: "image", method: "vision", mediaType: "image/png" });
    expect(out.text).toMatch(/^PNG image, 1000×\d+ pixels\./);
    expect(out.text).toContain("Invoice 4711");
    expect(out.text).toContain("Total due 123.45 EUR");
  });

  it("says nothing legible was found, and invents nothing, for an image without text; EXIF date and place", async () => {
    const jpeg = await sharp(await blankPng())
      .jpeg()
      .withExif({
        IFD0: { Make: "TestCam", Model: "T1" },
        IFD2: { DateTimeOriginal: "2024:05:01 10:20:30" },
        IFD3: { GPSLatitudeRef: "N", GPSLatitude: "48/1 8/1 30/1", GPSLongitudeRef: "E", GPSLongitude: "11/1 34/1 0/1" },
      })
      .toBuffer();
    const out = await inline(jpeg, "image/jpeg", "photo.jpg", "image");
    expect(out.text).toBe(
      `JPEG image, 200×120 pixels; taken 2024-05-01 10:20:30; at latitude 48.14167, longitude 11.56667; camera: TestCam T1.\n${NOTHING_LEGIBLE}`,
    );
  });

  it("reads every listed image format sharp decodes (WebP, GIF, BMP-less formats via sharp, TIFF)", async () => {
    const png = await blankPng();
    for (const [format, mime] of [
      ["webp", "image/webp"],
      ["gif", "image/gif"],
      ["tiff", "image/tiff"],
    ] as const) {
      const bytes = await sharp(png).toFormat(format).toBuffer();
      const out = await inline(bytes, "application/octet-stream", `x.${format}`, "image");
      expect(out.mediaType, format).toBe(mime);
      expect(out.text).toContain("200×120 pixels");
    }
  });

  it("an image part must hold an image", async () => {
    await expect(inline(makePdf(["x"]), "image/png", undefined, "image")).rejects.toMatchObject({ code: "invalid_image" });
  });

  it("renders a PDF without a text layer and reads its pages", async () => {
    const pdf = await scannedPdf([await textPng(["Scanned contract", "Signed by Alice Example"])]);
    const out = await inline(pdf, "application/pdf", "scan.pdf");
    expect(out).toMatchObject({ kind: "pdf", method: "pdf_pages", pages: 1, pagesRead: 1 });
    expect(out.text).toContain("Page 1: Text read in it (OCR):");
    expect(out.text).toContain("Signed by Alice Example");
  });

  it("decodes HEIC before reading it", async (ctx) => {
    const skip = heicSkipReason();
    if (skip) return ctx.skip(skip);
    const heic = heicOf(await textPng(["Boarding pass 42"]));
    const out = await inline(heic, "application/octet-stream", "IMG_0001.HEIC", "image");
    expect(out).toMatchObject({ kind: "image", mediaType: "image/heic" });
    expect(out.text).toMatch(/^HEIC image, 1000×\d+ pixels\./);
    expect(out.text).toContain("Boarding pass 42");
  });
});

describe("Apple iWork", () => {
  it("uses the embedded PDF preview, or an image preview through the vision path", async () => {
    const withPdf = await inline(iworkZip({ name: "QuickLook/Preview.pdf", data: makePdf(["Meeting notes", "Ship on Friday"]) }), "application/zip", "notes.pages");
    expect(withPdf).toMatchObject({ kind: "iwork", mediaType: "application/vnd.apple.pages", method: "pdf_text", text: "Meeting notes\nShip on Friday" });
    const jpeg = await sharp(await textPng(["Quarterly slides"])).jpeg({ quality: 92 }).toBuffer();
    const withImage = await inline(iworkZip({ name: "preview.jpg", data: jpeg }), "application/zip", "deck.key");
    expect(withImage).toMatchObject({ kind: "iwork", mediaType: "application/vnd.apple.keynote", method: "vision" });
    expect(withImage.text).toContain("Quarterly slides");
  });

  it("gives empty content for a file saved without a preview, and refuses zip bombs", async () => {
    const empty = await inline(iworkZip(), "application/zip", "budget.numbers");
    expect(empty).toMatchObject({ kind: "iwork", method: "empty", text: "" });
    expect(formatFileText(empty, "budget.numbers")).toContain("saved without a preview");
    await expect(inline(zipBomb(40), "application/zip", "bomb.pages")).rejects.toMatchObject({ code: "zip_bomb", status: 400 });
  });
});

describe("audio and video", () => {
  it("describes audio and says no transcript is available without a speech model", async () => {
    const out = await inline(toneWav(1.5), "audio/wav", "tone.wav");
    expect(out).toMatchObject({ kind: "audio", method: "media" });
    expect(out.text).toMatch(/^Audio: 1\.5 seconds, audio pcm_s16le\./);
    expect(out.text).toContain(NO_SPEECH_MODEL);
  });

  it("reads a video's keyframes through the vision path and refuses videos over 5 minutes", async () => {
    const out = await inline(captionMp4(2, "Launch plan B"), "video/mp4", "clip.mp4");
    expect(out).toMatchObject({ kind: "video", method: "media" });
    expect(out.text).toMatch(/^Video: 2\.\d seconds, video h264 640×240, audio aac\./);
    expect(out.text).toContain(NO_SPEECH_MODEL);
    expect(out.text).toContain("Keyframe at 0:01: Text read in it (OCR):\nLaunch plan B");
    await expect(inline(longMp4(303), "video/mp4", "long.mp4")).rejects.toMatchObject({ code: "video_too_long", status: 413 });
  });
});
