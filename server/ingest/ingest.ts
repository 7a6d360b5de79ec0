// Files → what the model gets, for every caller: uploads (the Files API), inline files and images in
// requests, Messages document and image blocks. Classification happens here, extraction in the ingest
// worker (see registry.ts for each kind).
import { createHash } from "node:crypto";
import { AppError, invalidRequest } from "../core/errors.js";
import type { FileSource } from "../core/inference.js";
import { classify, credentialRefusal, HEAD_BYTES } from "./classify.js";
import { isCredentialName } from "./credentials.js";
import { IngestPool, type IngestPriority } from "./ingest-pool.js";
import { modelImage } from "./image.js";
import { cutText } from "./text.js";
import type { ModelImage } from "./vision.js";
import { MAX_BYTES_OF_KIND, MAX_TEXT_CHARS, type Classified, type Extracted, type IngestOptions } from "./types.js";

export { MAX_PDF_PAGES, MAX_TEXT_CHARS } from "./types.js";
export type { Classified, ContentKind, Extracted } from "./types.js";

export interface IngestInput {
  source: FileSource;
  filename?: string;
  /** Where the part sits in the request, for error messages. */
  param: string;
  /** An image part (image_url, input_image, Messages image block) must hold an image. */
  expect?: "image";
}

export function isCredentialFile(filename: string | undefined): boolean {
  return isCredentialName(filename);
}

/** Extraction time limits: requests wait for their answer, uploads read in the background. */
const TIMEOUT_MS: Record<IngestPriority, number> = { request: 120_000, upload: 15 * 60_000 };

function humanBytes(bytes: number): string {
  return `${Math.round(bytes / 1024 / 1024)} MB`;
}

export function sizeLimitError(classified: Classified, size: number): AppError | null {
  const max = MAX_BYTES_OF_KIND[classified.kind];
  if (size <= max) return null;
  return new AppError("payload_too_large", `${classified.kind === "pdf" ? "PDF" : classified.kind} files may be at most ${humanBytes(max)}; this one is ${(size / 1024 / 1024).toFixed(1)} MB.`, {
    code: "file_too_large",
  });
}

function withParam(err: unknown, param: string): unknown {
  if (!(err instanceof AppError) || err.param) return err;
  return new AppError(err.kind, err.message, { code: err.code, param, retryAfter: err.retryAfter, details: err.details, cause: err.cause });
}

function decodeBase64(data: string, param: string): Buffer {
  const clean = data.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(clean)) throw invalidRequest("The file data is not valid base64.", param, "invalid_file_data");
  return Buffer.from(clean, "base64");
}

/**
 * Inline files come again with every turn of a conversation (the client sends it whole); their extraction is
 * remembered in memory for a while, by a hash of the bytes, so an image is not read again each turn. Nothing
 * is written to disk.
 */
const INLINE_CACHE_ENTRIES = 32;
const INLINE_CACHE_MS = 10 * 60_000;

export class Ingest {
  private readonly recent = new Map<string, { at: number; result: Extracted }>();
  /** Images prepared for the vision encoder, by a hash of their bytes (a conversation sends them each turn). */
  private readonly recentImages = new Map<string, ModelImage>();

  constructor(
    private readonly pool: IngestPool,
    private readonly options: () => IngestOptions = () => ({}),
  ) {}

  /** Classifies a file from its first bytes; throws 422 for credential files and 400 for unsupported types. */
  classify(head: Uint8Array, filename: string | undefined, complete: boolean, declaredType?: string): Promise<Classified> {
    return classify(head.subarray(0, HEAD_BYTES), filename, complete, declaredType);
  }

  /** Extracts an uploaded file (on disk). */
  extractFile(path: string, classified: Classified, filename: string): Promise<Extracted> {
    return this.pool.run({ path, filename, ...classified }, this.options(), { priority: "upload", timeoutMs: TIMEOUT_MS.upload });
  }

  /** A file or image part of a request (nothing is stored). */
  async inline({ source, filename, param, expect }: IngestInput): Promise<Extracted> {
    try {
      if (isCredentialName(filename)) throw credentialRefusal(`${filename} has a credential file's name`);
      switch (source.kind) {
        case "text":
          return { kind: "text", mediaType: source.mediaType, method: "text", ...cutText(source.text) };
        case "url":
          throw invalidRequest(
            "Files and images given by URL are not fetched: this server works offline. Send the content inline (base64 or a data: URL) or upload it to /v1/files.",
            param,
            "url_not_fetched",
          );
        case "file_id":
          throw new AppError("internal", "File references are resolved before ingestion.");
        case "base64": {
          const bytes = decodeBase64(source.data, param);
          if (bytes.length === 0) throw invalidRequest("The file is empty.", param, "empty_file");
          const classified = await this.classify(bytes, filename, true, source.mediaType);
          if (expect === "image" && classified.kind !== "image")
            throw invalidRequest(`An image part must hold an image; this one holds ${classified.mediaType}. Send other files as file parts.`, param, "invalid_image");
          const tooLarge = sizeLimitError(classified, bytes.length);
          if (tooLarge) throw tooLarge;
          const key = createHash("sha256").update(bytes).update(`\0${filename ?? ""}\0${classified.mediaType}`).digest("hex");
          const known = this.recent.get(key);
          if (known && Date.now() - known.at < INLINE_CACHE_MS) return known.result;
          const result = await this.pool.run({ bytes, filename, ...classified }, this.options(), { priority: "request", timeoutMs: TIMEOUT_MS.request });
          this.remember(key, result);
          return result;
        }
      }
    } catch (err) {
      throw withParam(err, param);
    }
  }

  /**
   * An image part for a model that sees images: checked as an image (type, the 20 MB limit, the pixel limit)
   * and turned into what the vision encoder reads. By id: the bytes of the caller's uploaded image.
   */
  async imageForModel(source: FileSource | { kind: "bytes"; bytes: Buffer; mediaType: string }, param: string): Promise<ModelImage> {
    try {
      let bytes: Buffer;
      if (source.kind === "bytes") bytes = source.bytes;
      else if (source.kind === "base64") bytes = decodeBase64(source.data, param);
      else if (source.kind === "url")
        throw invalidRequest(
          "Images given by URL are not fetched: this server works offline. Send the image inline (base64 or a data: URL) or upload it to /v1/files.",
          param,
          "url_not_fetched",
        );
      else throw invalidRequest("An image part must hold an image.", param, "invalid_image");
      if (bytes.length === 0) throw invalidRequest("The image is empty.", param, "empty_file");
      const classified = await this.classify(bytes, undefined, true, source.mediaType);
      if (classified.kind !== "image")
        throw invalidRequest(`An image part must hold an image; this one holds ${classified.mediaType}. Send other files as file parts.`, param, "invalid_image");
      const tooLarge = sizeLimitError(classified, bytes.length);
      if (tooLarge) throw tooLarge;
      const key = createHash("sha256").update(bytes).update("\0model").digest("hex");
      const known = this.recentImages.get(key);
      if (known) return known;
      const image = await modelImage(bytes, classified.mediaType);
      this.recentImages.set(key, image);
      while (this.recentImages.size > INLINE_CACHE_ENTRIES) this.recentImages.delete(this.recentImages.keys().next().value!);
      return image;
    } catch (err) {
      throw withParam(err, param);
    }
  }

  private remember(key: string, result: Extracted): void {
    this.recent.delete(key);
    this.recent.set(key, { at: Date.now(), result });
    while (this.recent.size > INLINE_CACHE_ENTRIES) this.recent.delete(this.recent.keys().next().value!);
  }
}

/** How a file's content is shown to the model. */
export function formatFileText(ingested: Extracted, filename: string | undefined): string {
  const name = filename ?? (ingested.kind === "pdf" ? "document.pdf" : ingested.kind === "image" ? "image" : "document");
  const notes: string[] = [];
  if (ingested.truncated) notes.push(`[The rest of ${name} was cut at ${MAX_TEXT_CHARS} characters.]`);
  if (ingested.method === "empty") notes.push("[This file has no readable content: it was saved without a preview.]");
  const body = [ingested.text, ...notes].filter((s) => s !== "").join("\n");
  return `<file name="${name.replace(/"/g, "'")}" type="${ingested.mediaType}">\n${body}\n</file>`;
}

let shared: Ingest | null = null;
/** One ingest worker for callers that were given none (tests, tools). */
export function sharedIngest(): Ingest {
  shared ??= new Ingest(new IngestPool());
  return shared;
}
