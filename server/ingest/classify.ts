// Which kind of file this is, from its bytes (file-type) and, for text, its name: the client's media type is
// a hint at most. Credential files and unsupported types are refused here, before any extraction.
import { extname } from "node:path";
import { fileTypeFromBuffer } from "file-type";
import { AppError } from "../core/errors.js";
import { credentialKindOfContent, isCredentialName } from "./credentials.js";
import type { Classified, ContentKind } from "./types.js";

/** How many leading bytes classification reads. */
export const HEAD_BYTES = 64 * 1024;

const KIND_OF_MIME: Record<string, ContentKind> = {
  "image/jpeg": "image",
  "image/png": "image",
  "image/webp": "image",
  "image/gif": "image",
  "image/bmp": "image",
  "image/tiff": "image",
  "image/heic": "image",
  "image/heic-sequence": "image",
  "image/heif": "image",
  "image/heif-sequence": "image",
  "image/avif": "image",
  "application/pdf": "pdf",
  "audio/mpeg": "audio",
  "audio/wav": "audio",
  "audio/x-wav": "audio",
  "audio/vnd.wave": "audio",
  "audio/ogg": "audio",
  "audio/ogg; codecs=opus": "audio",
  "audio/opus": "audio",
  "audio/flac": "audio",
  "audio/x-flac": "audio",
  "audio/x-m4a": "audio",
  "audio/mp4": "audio",
  "audio/aac": "audio",
  "audio/aiff": "audio",
  "audio/webm": "audio",
  "video/mp4": "video",
  "video/x-m4v": "video",
  "video/webm": "video",
  "video/quicktime": "video",
  "video/x-matroska": "video",
  "video/matroska": "video",
  "video/vnd.avi": "video",
  "video/x-msvideo": "video",
  "video/avi": "video",
  "video/ogg": "video",
};

const IWORK_TYPES: Record<string, string> = {
  ".pages": "application/vnd.apple.pages",
  ".numbers": "application/vnd.apple.numbers",
  ".key": "application/vnd.apple.keynote",
};

/** Media types of text files by extension; any other UTF-8 text is text/plain. */
const TEXT_TYPES: Record<string, string> = {
  ".md": "text/markdown",
  ".markdown": "text/markdown",
  ".csv": "text/csv",
  ".tsv": "text/tab-separated-values",
  ".json": "application/json",
  ".jsonl": "application/jsonl",
  ".xml": "application/xml",
  ".html": "text/html",
  ".htm": "text/html",
  ".css": "text/css",
  ".js": "text/javascript",
  ".mjs": "text/javascript",
  ".cjs": "text/javascript",
  ".ts": "text/x-typescript",
  ".tsx": "text/x-typescript",
  ".py": "text/x-python",
  ".go": "text/x-go",
  ".rs": "text/x-rust",
  ".java": "text/x-java",
  ".c": "text/x-c",
  ".h": "text/x-c",
  ".cpp": "text/x-c++",
  ".hpp": "text/x-c++",
  ".rb": "text/x-ruby",
  ".sh": "text/x-shellscript",
  ".sql": "application/sql",
  ".yaml": "application/yaml",
  ".yml": "application/yaml",
  ".toml": "application/toml",
};

/** Text-based formats file-type may recognise; they are read as text. */
const TEXTUAL_MIMES = new Set(["application/xml", "text/xml", "image/svg+xml", "application/rtf", "text/calendar", "text/vtt"]);

export function credentialRefusal(what: string): AppError {
  return new AppError(
    "unprocessable",
    `Credential files are not accepted (${what}); keep keys and secrets out of files you send to a model.`,
    { code: "file_type_rejected" },
  );
}

/** Why these bytes are not text, or null if they read as UTF-8 text. `complete`: the bytes are the whole file. */
export function notTextReason(bytes: Uint8Array, complete: boolean): string | null {
  if (bytes.includes(0)) return "it holds binary data (NUL bytes)";
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes, { stream: !complete });
  } catch {
    return "it is not valid UTF-8 text";
  }
  let controls = 0;
  for (const b of bytes) if (b < 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0d && b !== 0x0c && b !== 0x1b) controls++;
  if (controls > bytes.length / 100) return "it holds binary data (control characters)";
  return null;
}

/**
 * Classifies a file by its first bytes. `complete` says `head` is the whole file. `declaredType` (inline files)
 * only names text that has no telling extension (e.g. text/csv), never overrides what the bytes are.
 */
export async function classify(head: Uint8Array, filename: string | undefined, complete: boolean, declaredType?: string): Promise<Classified> {
  const what = isCredentialName(filename) ? `${filename} has a credential file's name` : credentialKindOfContent(head);
  if (what) throw credentialRefusal(isCredentialName(filename) ? what : `${filename ?? "the file"} looks like ${what}`);
  const ext = filename ? extname(filename.toLowerCase()) : "";
  const detected = await fileTypeFromBuffer(head);
  const declared = declaredType?.toLowerCase().split(";")[0]!.trim();
  const declaredKind = declared ? KIND_OF_MIME[declared] : undefined;
  // A part declared as a PDF, image or media file whose bytes are not one is broken, not text.
  if (declared && declaredKind && (!detected || (KIND_OF_MIME[detected.mime] !== declaredKind && !(declaredKind === "audio" && KIND_OF_MIME[detected.mime] === "video") && !(declaredKind === "video" && KIND_OF_MIME[detected.mime] === "audio"))))
    throw notWhatItSays(declared, declaredKind, detected?.mime);
  if (detected) {
    if (detected.mime === "application/zip" && IWORK_TYPES[ext]) return { kind: "iwork", mediaType: IWORK_TYPES[ext]! };
    const kind = KIND_OF_MIME[detected.mime];
    if (kind) return { kind, mediaType: detected.mime };
    if (!TEXTUAL_MIMES.has(detected.mime))
      throw new AppError(
        "invalid_request",
        `Files of type ${detected.mime} (.${detected.ext}) are not supported. Send text or code, PDF, images, audio, video or Apple iWork files.`,
        { code: "unsupported_file_type" },
      );
  }
  const reason = notTextReason(head, complete);
  if (reason)
    throw new AppError(
      "invalid_request",
      `${filename ?? "The file"} is not a supported file: ${reason}, and its bytes match no supported format.`,
      { code: "unsupported_file_type" },
    );
  const mediaType = TEXT_TYPES[ext] ?? (detected && TEXTUAL_MIMES.has(detected.mime) ? detected.mime : undefined) ?? (declared && isTextMediaType(declared) ? declared : "text/plain");
  return { kind: "text", mediaType };
}

function notWhatItSays(declared: string, kind: ContentKind, detected: string | undefined): AppError {
  const found = detected ? `its bytes are ${detected}` : "its bytes are not in that format";
  if (kind === "pdf") return new AppError("invalid_request", `The PDF could not be read: ${found}.`, { code: "invalid_pdf" });
  if (kind === "image") return new AppError("invalid_request", `The image could not be decoded: ${found} (declared ${declared}).`, { code: "invalid_image" });
  return new AppError("invalid_request", `The audio or video file could not be read: ${found} (declared ${declared}).`, { code: "invalid_media" });
}

function isTextMediaType(type: string): boolean {
  return type.startsWith("text/") || ["application/json", "application/xml", "application/yaml", "application/x-yaml", "application/javascript", "application/sql", "application/x-sh", "application/toml"].includes(type);
}
