// Images (JPEG, PNG, WebP, GIF, BMP, TIFF through sharp; HEIC/HEIF decoded first with heic-decode, since
// sharp's prebuilt libvips has no HEVC decoder) → the vision path.
import { createRequire } from "node:module";
import sharp from "sharp";
import { AppError } from "../core/errors.js";
import { describeFacts, exifFacts, imageFacts, imageForModel, prepareForOcr, readTextIn, type ImageFacts, type ModelImage } from "./vision.js";

const require = createRequire(import.meta.url);
const HEIF_TYPES = new Set(["image/heic", "image/heif", "image/heic-sequence", "image/heif-sequence"]);

function formatName(mediaType: string): string {
  return mediaType.replace(/^image\//, "").replace(/^x-/, "").replace("-sequence", "");
}

async function decodeHeif(bytes: Buffer): Promise<{ width: number; height: number; data: Uint8ClampedArray }> {
  const decode = require("heic-decode") as (options: { buffer: Uint8Array }) => Promise<{ width: number; height: number; data: Uint8ClampedArray }>;
  try {
    return await decode({ buffer: bytes });
  } catch (err) {
    throw new AppError("invalid_request", `The HEIC image could not be decoded: ${(err as Error).message ?? String(err)}`, { code: "invalid_image" });
  }
}

/** An image of any type we read → the PNG or JPEG the vision encoder gets (vision.ts, imageForModel). */
export async function modelImage(bytes: Buffer, mediaType: string): Promise<ModelImage> {
  if (!HEIF_TYPES.has(mediaType)) return imageForModel(bytes);
  const image = await decodeHeif(bytes);
  return imageForModel({ raw: { width: image.width, height: image.height, channels: 4 }, data: Buffer.from(image.data.buffer, image.data.byteOffset, image.data.byteLength) });
}

export async function describeImage(bytes: Buffer, mediaType: string): Promise<string> {
  let facts: ImageFacts;
  let ocrInput: Buffer;
  if (HEIF_TYPES.has(mediaType)) {
    const image = await decodeHeif(bytes);
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
