// Images (JPEG, PNG, WebP, GIF, BMP, TIFF through sharp; HEIC/HEIF decoded first with heic-decode, since
// sharp's prebuilt libvips has no HEVC decoder) → the vision path.
import { createRequire } from "node:module";
import sharp from "sharp";
import { AppError } from "../core/errors.js";
import { describeFacts, exifFacts, imageFacts, prepareForOcr, readTextIn, type ImageFacts } from "./vision.js";

const require = createRequire(import.meta.url);
const HEIF_TYPES = new Set(["image/heic", "image/heif", "image/heic-sequence", "image/heif-sequence"]);

function formatName(mediaType: string): string {
  return mediaType.replace(/^image\//, "").replace(/^x-/, "").replace("-sequence", "");
}

export async function describeImage(bytes: Buffer, mediaType: string): Promise<string> {
  let facts: ImageFacts;
  let ocrInput: Buffer;
  if (HEIF_TYPES.has(mediaType)) {
    const decode = require("heic-decode") as (options: { buffer: Uint8Array }) => Promise<{ width: number; height: number; data: Uint8ClampedArray }>;
    let image;
    try {
      image = await decode({ buffer: bytes });
    } catch (err) {
      throw new AppError("invalid_request", `The HEIC image could not be decoded: ${(err as Error).message ?? String(err)}`, { code: "invalid_image" });
    }
    facts = { format: formatName(mediaType), width: image.width, height: image.height, ...(await exifFacts(bytes)) };
    const data = Buffer.from(image.data.buffer, image.data.byteOffset, image.data.byteLength);
    ocrInput = await prepareForOcr({ raw: { width: image.width, height: image.height, channels: 4 }, data });
  } else {
    try {
      facts = await imageFacts(bytes, formatName(mediaType));
    } catch (err) {
      throw new AppError("invalid_request", `The image could not be decoded: ${(err as Error).message}`, { code: "invalid_image" });
    }
    ocrInput = await prepareForOcr(bytes);
  }
  return `${describeFacts(facts)}\n${await readTextIn(ocrInput)}`;
}

/** Keeps sharp's thread pool small: this machine's cores are shared with the model. */
sharp.concurrency(1);
