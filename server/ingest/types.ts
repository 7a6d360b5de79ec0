// What ingestion produces. `ContentKind` is the public content_kind of a file (docs/api.md, Files).

export type ContentKind = "text" | "pdf" | "image" | "audio" | "video" | "iwork";

export const CONTENT_KINDS: readonly ContentKind[] = ["text", "pdf", "image", "audio", "video", "iwork"];

/** How the content was read, for the model's framing and for tests. */
export type ReadMethod = "text" | "pdf_text" | "pdf_pages" | "vision" | "media" | "empty";

export interface Classified {
  kind: ContentKind;
  /** Detected from the bytes (file-type), or from the name for text files. */
  mediaType: string;
}

export interface Extracted {
  kind: ContentKind;
  mediaType: string;
  method: ReadMethod;
  /** What the model reads about the file (the body inside its <file> tag). May be empty (iWork without preview). */
  text: string;
  /** Text was cut at MAX_TEXT_CHARS. */
  truncated: boolean;
  pages?: number;
  pagesRead?: number;
  /**
   * Scanned PDF pages and video keyframes as images, for a model that sees images (it gets `text` with the
   * images in place of what OCR read in them); `text` stays what a text-only model reads.
   */
  visual?: VisualContent;
}

/** What a vision model gets for a file whose content is pictures: an opening text, then labelled images. */
export interface VisualContent {
  /** What comes before the images (e.g. the video's facts and transcript). */
  text: string;
  images: Array<{ label: string; mediaType: "image/png" | "image/jpeg"; data: string }>;
  /** After the images (e.g. pages not rendered). */
  note?: string;
}

/** One file to ingest: a path on disk (uploads) or bytes in memory (inline files). */
export interface IngestSource {
  path?: string;
  bytes?: Uint8Array;
  filename?: string;
  kind: ContentKind;
  mediaType: string;
}

export interface IngestOptions {
  /** A whisper.cpp model file for transcripts; absent: media files say no transcript is available. */
  speechModelPath?: string | null;
  /** Threads for the speech engine; default: half the cores, at most 4. */
  speechThreads?: number;
}

/** Text beyond this is cut (spec: text files and PDF text layers, first 200,000 characters). */
export const MAX_TEXT_CHARS = 200_000;
/** PDFs are read up to this many pages (spec rule 4). */
export const MAX_PDF_PAGES = 20;
/** Rendering scanned pages stops before the page images together pass this (spec rule 4: roughly 32 MB). */
export const MAX_RENDERED_BYTES = 32 * 1024 * 1024;
/** Video longer than this is refused (spec: 5 minutes). */
export const MAX_VIDEO_SECONDS = 5 * 60;
/** A 5-minute recording's container often says 300.05 s (audio priming, rounding): that still counts as 5 minutes. */
export function isVideoTooLong(seconds: number): boolean {
  return seconds > MAX_VIDEO_SECONDS + 1;
}

const MB = 1024 * 1024;
/** Per-file limits from the spec's table (video is limited by duration, and by the 100 MB upload body). */
export const MAX_BYTES_OF_KIND: Record<ContentKind, number> = {
  image: 20 * MB,
  pdf: 50 * MB,
  text: 50 * MB,
  audio: 25 * MB,
  video: 100 * MB,
  iwork: 50 * MB,
};
