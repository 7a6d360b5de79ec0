// Images for the model. A model with a vision projector sees the image itself: imageForModel scales it and
// writes it as a PNG or JPEG the vision encoder reads. A text-only model gets the OCR fallback: what can
// honestly be said about the image, its facts (format, size, EXIF date and place) and the text OCR reads in
// it. When nothing legible is found, the content says so and nothing is made up (spec, Files rule 5).
import sharp from "sharp";
import { AppError } from "../core/errors.js";
import { recognizeText } from "./ocr.js";

/** Images are read at most this large (longer side, pixels); larger ones are scaled down first. */
const MAX_OCR_SIDE = 3000;
/** Decoding stops past this many pixels (a decompression bomb: a small file that inflates to gigabytes). */
export const MAX_INPUT_PIXELS = 268_402_689;
/**
 * Images go to the vision encoder at most this large (longer side): every projector resizes to its own
 * input (336 to about 1500 pixels), so more only costs decoding time and memory.
 */
export const MAX_MODEL_SIDE = 2048;

export interface ModelImage {
  data: Buffer;
  mediaType: "image/png" | "image/jpeg";
  width: number;
  height: number;
}

/**
 * Any image sharp decodes (HEIC decoded first) → what the vision encoder reads: upright, first frame,
 * transparency on white, at most MAX_MODEL_SIDE on its longer side, as the smaller of PNG and JPEG.
 */
export async function imageForModel(input: Buffer | { raw: { width: number; height: number; channels: 4 }; data: Buffer }): Promise<ModelImage> {
  const image = () => ("raw" in input ? sharp(input.data, { raw: input.raw }) : sharp(input, { limitInputPixels: MAX_INPUT_PIXELS }));
  try {
    const flat = await image()
      .rotate()
      .flatten({ background: "#ffffff" })
      .resize({ width: MAX_MODEL_SIDE, height: MAX_MODEL_SIDE, fit: "inside", withoutEnlargement: true })
      .raw()
      .toBuffer({ resolveWithObject: true });
    const raw = { raw: { width: flat.info.width, height: flat.info.height, channels: flat.info.channels } };
    const [png, jpeg] = await Promise.all([sharp(flat.data, raw).png({ compressionLevel: 6 }).toBuffer(), sharp(flat.data, raw).jpeg({ quality: 90 }).toBuffer()]);
    const usePng = png.length <= jpeg.length;
    return { data: usePng ? png : jpeg, mediaType: usePng ? "image/png" : "image/jpeg", width: flat.info.width, height: flat.info.height };
  } catch (err) {
    const message = (err as Error).message;
    if (/pixel limit/i.test(message))
      throw new AppError("invalid_request", `The image is larger than ${MAX_INPUT_PIXELS} pixels when decoded; scale it down first.`, { code: "image_too_large" });
    throw new AppError("invalid_request", `The image could not be decoded: ${message}`, { code: "invalid_image" });
  }
}

export interface ImageFacts {
  format: string;
  width: number;
  height: number;
  frames?: number;
  taken?: string;
  place?: string;
  camera?: string;
}

export const NOTHING_LEGIBLE = "No legible text was found in this image; its content cannot be described further.";

/** An image's width and height from its header (nothing decoded). */
export async function imageSize(bytes: Buffer): Promise<{ width: number; height: number }> {
  const meta = await sharp(bytes, { limitInputPixels: MAX_INPUT_PIXELS }).metadata();
  return { width: meta.width ?? 0, height: meta.height ?? 0 };
}

/** Format, size and EXIF (date taken, GPS place, camera) where present. */
export async function imageFacts(bytes: Buffer, format: string): Promise<ImageFacts> {
  const meta = await sharp(bytes, { animated: true, limitInputPixels: MAX_INPUT_PIXELS }).metadata();
  const facts: ImageFacts = { format, width: meta.width ?? 0, height: meta.pageHeight ?? meta.height ?? 0 };
  if ((meta.pages ?? 1) > 1) facts.frames = meta.pages;
  Object.assign(facts, await exifFacts(bytes));
  return facts;
}

export async function exifFacts(bytes: Buffer): Promise<Partial<ImageFacts>> {
  const exifr = (await import("exifr")).default;
  let exif: Record<string, unknown> | undefined;
  try {
    exif = await exifr.parse(bytes, { gps: true, tiff: true, exif: true, reviveValues: false, pick: ["DateTimeOriginal", "CreateDate", "Make", "Model", "latitude", "longitude", "GPSLatitude", "GPSLongitude"] });
  } catch {
    return {};
  }
  if (!exif) return {};
  const out: Partial<ImageFacts> = {};
  // EXIF dates carry no time zone: shown as written ("2024:05:01 10:20:30" → "2024-05-01 10:20:30").
  const taken = exif.DateTimeOriginal ?? exif.CreateDate;
  if (typeof taken === "string" && /^\d{4}:\d{2}:\d{2}/.test(taken)) out.taken = taken.replace(/^(\d{4}):(\d{2}):(\d{2})/, "$1-$2-$3").trim();
  if (typeof exif.latitude === "number" && typeof exif.longitude === "number")
    out.place = `latitude ${exif.latitude.toFixed(5)}, longitude ${exif.longitude.toFixed(5)}`;
  const camera = [exif.Make, exif.Model].filter((v) => typeof v === "string" && v.trim()).join(" ");
  if (camera) out.camera = camera;
  return out;
}

export function describeFacts(facts: ImageFacts): string {
  const parts = [`${facts.format.toUpperCase()} image, ${facts.width}×${facts.height} pixels`];
  if (facts.frames) parts.push(`${facts.frames} frames (the first is read)`);
  if (facts.taken) parts.push(`taken ${facts.taken}`);
  if (facts.place) parts.push(`at ${facts.place}`);
  if (facts.camera) parts.push(`camera: ${facts.camera}`);
  return parts.join("; ") + ".";
}

/** Any image sharp decodes → a grey PNG of reasonable size for OCR (first frame, transparency on white). */
export async function prepareForOcr(input: Buffer | { raw: { width: number; height: number; channels: 4 }; data: Buffer }): Promise<Buffer> {
  const image = "raw" in input ? sharp(input.data, { raw: input.raw }) : sharp(input, { limitInputPixels: MAX_INPUT_PIXELS });
  try {
    return await image
      .rotate()
      .flatten({ background: "#ffffff" })
      .resize({ width: MAX_OCR_SIDE, height: MAX_OCR_SIDE, fit: "inside", withoutEnlargement: true })
      .greyscale()
      .png({ compressionLevel: 1 })
      .toBuffer();
  } catch (err) {
    throw new AppError("invalid_request", `The image could not be decoded: ${(err as Error).message}`, { code: "invalid_image" });
  }
}

/** What the model is told the OCR found in one image (or page, or frame). */
export async function readTextIn(png: Buffer): Promise<string> {
  const { lines } = await recognizeText(png);
  return lines.length ? `Text read in it (OCR):\n${lines.join("\n")}` : NOTHING_LEGIBLE;
}
