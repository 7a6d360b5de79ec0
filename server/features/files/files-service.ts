// The Files API's service: uploads streamed to <data-dir>/files, quotas, extraction (once per file, in the
// ingest worker, cached beside the bytes as content.json), expiry and the sweeper, and the content of a
// file id for requests (the pipeline's FileResolver).
import { createWriteStream } from "node:fs";
import { mkdir, open, readFile, readdir, rename, rm, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { AppError, invalidRequest } from "../../core/errors.js";
import { newId, nowSeconds } from "../../core/ids.js";
import { HEAD_BYTES } from "../../ingest/classify.js";
import { formatFileText, sizeLimitError, type Classified, type Extracted, type Ingest } from "../../ingest/ingest.js";
// Not registry.js: the server's own thread never loads the extraction libraries (sharp, pdfjs, OCR).
import { probeMedia, videoTooLong } from "../../ingest/media.js";
import { isVideoTooLong } from "../../ingest/types.js";
import type { FileResolver } from "../../pipeline/pipeline.js";
import { estimateImageTokens, estimateTokens } from "../../pipeline/token-estimate.js";
import { imageSize } from "../../ingest/vision.js";
import type { FileRow } from "../../store/files-repository.js";
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, restrictTree } from "../../store/file-modes.js";
import type { Store } from "../../store/store.js";

/** The upload body limit (spec: 100 MB), on POST /v1/files only. */
export const MAX_UPLOAD_BYTES = 100 * 1024 * 1024;
export const UPLOADS_PER_HOUR = 30;
export const MAX_STORED_FILES = 100;
export const FILE_LIFETIME_SECONDS = 30 * 24 * 3600;
export const PURPOSES = ["user_data", "assistants", "vision", "batch", "fine-tune", "evals"] as const;
export const DEFAULT_PURPOSE = "user_data";
const SWEEP_INTERVAL_MS = 60 * 60 * 1000;

/** FileOut: the spec's fields, plus OpenAI's `bytes` and `status_details` so OpenAI clients read it as theirs. */
export interface FileOut {
  id: string;
  object: "file";
  filename: string;
  purpose: string;
  mime_type: string;
  size: number;
  bytes: number;
  status: "uploaded" | "processed" | "error";
  status_details: string | null;
  content_kind: string;
  token_estimate: number;
  created_at: number;
  expires_at: number;
  /**
   * Images only: how the loaded model gets this image now, "vision" (the image itself, through its vision
   * encoder) or "ocr" (a text-only model: the OCR fallback's text and facts). Absent for other kinds.
   */
  svc_image_input?: "vision" | "ocr";
}

export interface FilesServiceOptions {
  store: Store;
  dataDir: string;
  ingest: Ingest;
  now?: () => number;
  /** How long an upload's response waits for extraction before answering with status "uploaded". */
  waitForContentMs?: number;
  log?: (level: "debug" | "info" | "warn" | "error", message: string) => void;
  /** What the loaded model does with images (the file object says it for image files); default "ocr". */
  imageInput?: () => "vision" | "ocr";
}

export function toFileOut(row: FileRow, imageInput?: () => "vision" | "ocr"): FileOut {
  return {
    id: row.id,
    object: "file",
    filename: row.filename,
    purpose: row.purpose,
    mime_type: row.mime_type,
    size: row.size_bytes,
    bytes: row.size_bytes,
    status: row.status,
    status_details: row.status_details,
    content_kind: row.content_kind,
    token_estimate: row.token_estimate,
    created_at: row.created_at,
    expires_at: row.expires_at,
    ...(row.content_kind === "image" ? { svc_image_input: imageInput?.() ?? "ocr" } : {}),
  };
}

function fileNotFound(id: string, param?: string): AppError {
  return new AppError("not_found", `No such file: '${id}'.`, { code: "file_not_found", param });
}

/** A name safe to show and store: the last path segment, no control characters, at most 255 characters. */
export function cleanFilename(name: string | undefined): string {
  const base = basename((name ?? "").replace(/\\/g, "/")).replace(/[\u0000-\u001f\u007f]/g, "").trim();
  return (base || "file").slice(0, 255);
}

/** An upload in progress: the bytes go to a temporary file; release() removes it unless it was kept. */
export class PendingUpload {
  size = 0;
  private done = false;

  constructor(
    readonly accountId: string,
    readonly tempPath: string,
    private readonly onRelease: () => void,
  ) {}

  async write(stream: Readable & { truncated?: boolean }): Promise<void> {
    stream.on("data", (chunk: Buffer) => {
      this.size += chunk.length;
    });
    await pipeline(stream, createWriteStream(this.tempPath, { flags: "wx", mode: PRIVATE_FILE_MODE }));
    if (stream.truncated) throw uploadTooLarge();
  }

  async release(): Promise<void> {
    if (this.done) return;
    this.done = true;
    this.onRelease();
    await rm(this.tempPath, { force: true });
  }
}

export function uploadTooLarge(): AppError {
  return new AppError("payload_too_large", `Uploads may be at most ${MAX_UPLOAD_BYTES / 1024 / 1024} MB.`, { code: "file_too_large" });
}

export class FilesService implements FileResolver {
  readonly dir: string;
  private readonly incoming: string;
  private readonly now: () => number;
  /** Extractions in flight, by file id. */
  private readonly jobs = new Map<string, Promise<void>>();
  /** Uploads being received, per account (they count against the quotas before they are stored). */
  private readonly inFlight = new Map<string, number>();
  private sweeper: NodeJS.Timeout | null = null;

  constructor(private readonly options: FilesServiceOptions) {
    this.dir = join(options.dataDir, "files");
    this.incoming = join(this.dir, ".incoming");
    this.now = options.now ?? nowSeconds;
  }

  /**
   * Prepares the folders (private whatever the umask; a tree an earlier version left readable is
   * tightened), removes leftovers, resumes extractions a stop interrupted, starts the sweeper.
   */
  async start(): Promise<void> {
    await rm(this.incoming, { recursive: true, force: true });
    await mkdir(this.incoming, { recursive: true, mode: PRIVATE_DIR_MODE });
    restrictTree(this.dir);
    await this.sweep();
    const known = this.options.store.files.allIds();
    for (const entry of await readdir(this.dir)) if (entry !== ".incoming" && !known.has(entry)) await rm(join(this.dir, entry), { recursive: true, force: true });
    for (const id of known) {
      const row = this.options.store.files.findAny(id);
      if (row?.status === "uploaded") this.extract(row);
    }
    this.sweeper = setInterval(() => void this.sweep().catch((err: unknown) => this.options.log?.("warn", `File sweep failed: ${(err as Error).message}`)), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    await Promise.allSettled([...this.jobs.values()]);
  }

  /** Checks the hourly upload limit and the stored-files limit, then reserves a place for one upload. */
  async beginUpload(accountId: string): Promise<PendingUpload> {
    const now = this.now();
    const files = this.options.store.files;
    const pending = this.inFlight.get(accountId) ?? 0;
    const recent = files.uploadsSince(accountId, now - 3600);
    if (recent.length + pending >= UPLOADS_PER_HOUR) {
      const retryAfter = recent.length > 0 ? Math.max(1, recent[0]! + 3600 - now) : 1;
      throw new AppError(
        "rate_limit",
        `Upload limit reached: at most ${UPLOADS_PER_HOUR} uploads per hour per user. Try again in ${retryAfter} seconds.`,
        { code: "upload_rate_limit_exceeded", retryAfter },
      );
    }
    if (files.countStored(accountId, now) + pending >= MAX_STORED_FILES)
      throw new AppError(
        "invalid_request",
        `Stored file limit reached: at most ${MAX_STORED_FILES} files per user. Delete files you no longer need (DELETE /v1/files/{file_id}); files also expire 30 days after upload.`,
        { code: "file_limit_reached" },
      );
    this.inFlight.set(accountId, pending + 1);
    await mkdir(this.incoming, { recursive: true, mode: PRIVATE_DIR_MODE });
    return new PendingUpload(accountId, join(this.incoming, newId("up_")), () => {
      const n = (this.inFlight.get(accountId) ?? 1) - 1;
      if (n > 0) this.inFlight.set(accountId, n);
      else this.inFlight.delete(accountId);
    });
  }

  /** Classifies and checks the received bytes, stores the file and starts reading it. */
  async completeUpload(upload: PendingUpload, fields: { filename: string | undefined; purpose: string | undefined }): Promise<FileOut> {
    const purpose = fields.purpose?.trim() || DEFAULT_PURPOSE;
    if (!(PURPOSES as readonly string[]).includes(purpose))
      throw invalidRequest(`Invalid purpose '${purpose}'; use one of ${PURPOSES.join(", ")}.`, "purpose", "invalid_purpose");
    if (upload.size === 0) throw invalidRequest("The uploaded file is empty.", "file", "empty_file");
    if (upload.size > MAX_UPLOAD_BYTES) throw uploadTooLarge();
    const filename = cleanFilename(fields.filename);
    const head = await readHead(upload.tempPath);
    let classified = await this.options.ingest.classify(head, filename, upload.size <= head.length);
    if (classified.kind === "audio" || classified.kind === "video") classified = await this.checkMedia(upload.tempPath, classified);
    const tooLarge = sizeLimitError(classified, upload.size);
    if (tooLarge) throw tooLarge;

    const id = newId("file-");
    const now = this.now();
    const row: FileRow = {
      id,
      account_id: upload.accountId,
      filename,
      purpose,
      mime_type: classified.mediaType,
      size_bytes: upload.size,
      status: "uploaded",
      status_details: null,
      content_kind: classified.kind,
      token_estimate: 0,
      created_at: now,
      expires_at: now + FILE_LIFETIME_SECONDS,
    };
    await mkdir(this.fileDir(id), { mode: PRIVATE_DIR_MODE });
    await rename(upload.tempPath, this.originalPath(id));
    this.options.store.files.insertUpload(row);
    const job = this.extract(row);
    const waitMs = this.options.waitForContentMs ?? 60_000;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([job, new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
    return toFileOut(this.options.store.files.findAny(id) ?? row, this.options.imageInput);
  }

  /** Audio or video by its streams (a WebM or MP4 may hold sound only); videos longer than 5 minutes are refused. */
  private async checkMedia(path: string, classified: Classified): Promise<Classified> {
    const probe = await probeMedia(path);
    if (!probe.video && !probe.audio) throw invalidRequest("The file holds no audio or video stream that can be read.", "file", "invalid_media");
    if (probe.video) {
      if (probe.durationSeconds !== null && isVideoTooLong(probe.durationSeconds)) throw videoTooLong(probe.durationSeconds);
      return { kind: "video", mediaType: classified.mediaType.replace(/^audio\//, "video/") };
    }
    return { kind: "audio", mediaType: classified.mediaType.replace(/^video\//, "audio/") };
  }

  list(accountId: string, query: { limit: number; order: "asc" | "desc"; after?: string; purpose?: string }) {
    const page = this.options.store.files.list(accountId, this.now(), query);
    const data = page.rows.map((r) => toFileOut(r, this.options.imageInput));
    return { object: "list" as const, data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: page.hasMore };
  }

  get(accountId: string, id: string): FileOut {
    const row = this.options.store.files.find(id, accountId, this.now());
    if (!row) throw fileNotFound(id, "file_id");
    return toFileOut(row, this.options.imageInput);
  }

  async delete(accountId: string, id: string): Promise<{ id: string; object: "file"; deleted: true }> {
    const row = this.options.store.files.find(id, accountId, this.now());
    if (!row) throw fileNotFound(id, "file_id");
    this.options.store.files.delete(id);
    await rm(this.fileDir(id), { recursive: true, force: true });
    return { id, object: "file", deleted: true };
  }

  /** Removes expired files (rows, bytes and content) and upload-log entries older than an hour. */
  async sweep(): Promise<number> {
    const now = this.now();
    const expired = this.options.store.files.expired(now);
    for (const id of expired) {
      this.options.store.files.delete(id);
      await rm(this.fileDir(id), { recursive: true, force: true });
    }
    this.options.store.files.pruneUploads(now - 3600);
    if (expired.length) this.options.log?.("info", `Removed ${expired.length} expired file(s).`);
    return expired.length;
  }

  /** FileResolver: the extracted content of the caller's file, waiting for an extraction still running. */
  async contentOf(fileId: string, accountId: string | undefined, param: string): Promise<{ extracted: Extracted; filename: string }> {
    let row = accountId ? this.options.store.files.find(fileId, accountId, this.now()) : undefined;
    if (!row) throw fileNotFound(fileId, param);
    if (row.status === "uploaded") {
      await (this.jobs.get(fileId) ?? this.extract(row));
      row = this.options.store.files.find(fileId, row.account_id, this.now());
      if (!row) throw fileNotFound(fileId, param);
    }
    if (row.status === "error")
      throw new AppError("invalid_request", `The file '${fileId}' could not be read, so it cannot be used: ${row.status_details ?? "unknown error"}.`, {
        param,
        code: "file_unreadable",
      });
    const extracted = JSON.parse(await readFile(this.contentPath(fileId), "utf8")) as Extracted;
    return { extracted, filename: row.filename };
  }

  /** FileResolver: the caller's file as uploaded (an image shown to a vision model), with its type. */
  async bytesOf(fileId: string, accountId: string | undefined, param: string): Promise<{ bytes: Buffer; mediaType: string; kind: string }> {
    const row = accountId ? this.options.store.files.find(fileId, accountId, this.now()) : undefined;
    if (!row) throw fileNotFound(fileId, param);
    return { bytes: await readFile(this.originalPath(fileId)), mediaType: row.mime_type, kind: row.content_kind };
  }

  fileDir(id: string): string {
    return join(this.dir, id);
  }

  originalPath(id: string): string {
    return join(this.fileDir(id), "original");
  }

  contentPath(id: string): string {
    return join(this.fileDir(id), "content.json");
  }

  /**
   * What a model that sees images gets for this file, by count_tokens' estimate per image size: an image
   * itself; scanned pages' or a video's keyframes with the text around them. 0 for files with no pictures.
   */
  private async seenTokens(row: FileRow, extracted: Extracted): Promise<number> {
    const ofImage = async (bytes: Buffer) => {
      const { width, height } = await imageSize(bytes);
      return estimateImageTokens(width, height);
    };
    if (row.content_kind === "image") return ofImage(await readFile(this.originalPath(row.id))).catch(() => 0);
    const visual = extracted.visual;
    if (!visual) return 0;
    let tokens = estimateTokens([{ role: "user", content: [{ type: "text", text: `${visual.text}\n${visual.note ?? ""}` }] }], []);
    for (const image of visual.images) tokens += await ofImage(Buffer.from(image.data, "base64")).catch(() => 0);
    return tokens;
  }

  /** Reads the file once; the content is kept beside the bytes, and a failure becomes status error with its reason. */
  private extract(row: FileRow): Promise<void> {
    const running = this.jobs.get(row.id);
    if (running) return running;
    const job = (async () => {
      const classified: Classified = { kind: row.content_kind as Classified["kind"], mediaType: row.mime_type };
      try {
        const extracted = await this.options.ingest.extractFile(this.originalPath(row.id), classified, row.filename);
        if (!this.options.store.files.findAny(row.id)) return; // deleted meanwhile
        await writeFile(this.contentPath(row.id), JSON.stringify(extracted), { mode: PRIVATE_FILE_MODE });
        const read = estimateTokens([{ role: "user", content: [{ type: "text", text: formatFileText(extracted, row.filename) }] }], []);
        // A model that sees images gets pictures instead of what OCR read in them: count the larger.
        const tokens = Math.max(read, await this.seenTokens(row, extracted));
        this.options.store.files.setResult(row.id, { status: "processed", statusDetails: null, tokenEstimate: tokens });
      } catch (err) {
        if (!this.options.store.files.findAny(row.id)) return;
        const reason = err instanceof AppError && err.kind !== "internal" ? err.message : `the content could not be extracted (${(err as Error).message})`;
        this.options.log?.("warn", `Reading ${row.id} (${row.filename}) failed: ${(err as Error).message}`);
        this.options.store.files.setResult(row.id, { status: "error", statusDetails: reason, tokenEstimate: 0 });
      } finally {
        this.jobs.delete(row.id);
        // A delete while the file was being read: its folder may have been written again.
        if (!this.options.store.files.findAny(row.id)) await rm(this.fileDir(row.id), { recursive: true, force: true });
      }
    })();
    this.jobs.set(row.id, job);
    return job;
  }
}

async function readHead(path: string): Promise<Uint8Array> {
  const handle = await open(path, "r");
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(HEAD_BYTES), 0, HEAD_BYTES, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}
