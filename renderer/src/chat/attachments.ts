// What can be attached: the server's ingest rules (server/ingest, the spec's file table) as the window knows
// them, in this one list. The picker filters on it; a dropped file of a kind the model cannot read is turned
// away at once, and a credential file or one over its kind's limit is refused on its chip without being
// uploaded. The server still judges the bytes (a .txt holding binary data, a PDF it cannot open): what it
// refuses is explained on the file's chip too. test/unit/attachments.test.ts keeps this list and the
// server's limits and credential rule in step.

export type AttachmentKind = "text" | "pdf" | "image" | "audio" | "video" | "iwork";

const MB = 1024 * 1024;

/** The Files API's upload limit (spec: 100 MB), whatever the kind. */
export const MAX_UPLOAD_BYTES = 100 * MB;

export interface KindRule {
  kind: AttachmentKind;
  /** How the window names the kind ("Image"); the same words as the Files page. */
  label: string;
  /** Lower-case, with the dot. */
  extensions: string[];
  /** Media types a browser may give such a file; "text/*" stands for any text type. */
  mediaTypes: string[];
  /** The spec's per-file limit for the kind (videos: 5 minutes, checked by the server; here the upload limit). */
  maxBytes: number;
}

const TEXT_EXTENSIONS =
  ".txt .md .markdown .csv .tsv .json .jsonl .yaml .yml .toml .ini .xml .html .htm .css .js .mjs .cjs .ts .tsx .jsx " +
  ".py .go .rs .java .kt .c .h .cpp .hpp .cc .cs .rb .php .swift .sh .bash .zsh .sql .r .lua .pl .scala .dart .vue .svelte .log .tex .rst";

export const ATTACHMENT_KINDS: readonly KindRule[] = [
  {
    kind: "text",
    label: "Text",
    extensions: TEXT_EXTENSIONS.split(" "),
    mediaTypes: ["text/*", "application/json", "application/xml", "application/yaml", "application/x-yaml", "application/toml", "application/sql", "application/javascript", "application/x-sh"],
    maxBytes: 50 * MB,
  },
  { kind: "pdf", label: "PDF", extensions: [".pdf"], mediaTypes: ["application/pdf"], maxBytes: 50 * MB },
  {
    kind: "image",
    label: "Image",
    extensions: [".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff", ".heic", ".heif", ".avif"],
    mediaTypes: ["image/jpeg", "image/png", "image/webp", "image/gif", "image/bmp", "image/tiff", "image/heic", "image/heif", "image/avif"],
    maxBytes: 20 * MB,
  },
  {
    kind: "audio",
    label: "Audio",
    extensions: [".mp3", ".wav", ".opus", ".ogg", ".oga", ".flac", ".m4a", ".aac"],
    mediaTypes: ["audio/mpeg", "audio/wav", "audio/x-wav", "audio/ogg", "audio/opus", "audio/flac", "audio/x-flac", "audio/mp4", "audio/x-m4a", "audio/aac", "audio/webm"],
    maxBytes: 25 * MB,
  },
  {
    kind: "video",
    label: "Video",
    // .webm may hold sound only: the server probes it and then applies the audio limit.
    extensions: [".mp4", ".m4v", ".webm", ".mov", ".mkv", ".avi"],
    mediaTypes: ["video/mp4", "video/x-m4v", "video/webm", "video/quicktime", "video/x-matroska", "video/x-msvideo", "video/avi"],
    maxBytes: MAX_UPLOAD_BYTES,
  },
  {
    kind: "iwork",
    label: "iWork",
    extensions: [".pages", ".numbers", ".key"],
    mediaTypes: ["application/vnd.apple.pages", "application/vnd.apple.numbers", "application/vnd.apple.keynote"],
    maxBytes: 50 * MB,
  },
];

/** Spec, Files rule 1: these are refused, by name (`.env`, `prod.env`, `.env.local`, `server.pem`, …). */
export const CREDENTIAL_EXTENSIONS: readonly string[] = [".env", ".pem", ".p12", ".pfx", ".cer", ".crt"];

/** What the picker offers (the file input's accept attribute). */
export const ATTACH_ACCEPT = [...new Set(ATTACHMENT_KINDS.flatMap((k) => [...k.extensions, ...k.mediaTypes]))].join(",");

/** In plain words, for the Attach button's tooltip and the empty chat. */
export const ATTACHABLE_WORDS = "text and code, PDF, images (HEIC too), audio, video and Pages, Numbers or Keynote files";

function baseName(name: string): string {
  return name.replace(/\\/g, "/").split("/").pop()!.toLowerCase();
}

function extensionOf(name: string): string {
  const base = baseName(name);
  const dot = base.lastIndexOf(".");
  return dot > 0 ? base.slice(dot) : base.startsWith(".") ? base : "";
}

export function isCredentialName(name: string): boolean {
  const base = baseName(name);
  return CREDENTIAL_EXTENSIONS.includes(extensionOf(base)) || base === ".env" || base.startsWith(".env.");
}

/** The kind a file will be read as, by its name first, then by the media type the browser gives; null: none. */
export function kindOf(file: { name: string; type: string }): KindRule | null {
  const ext = extensionOf(file.name);
  const byName = ATTACHMENT_KINDS.find((k) => k.extensions.includes(ext));
  if (byName) return byName;
  const type = file.type.toLowerCase().split(";")[0]!.trim();
  if (!type) return null;
  return ATTACHMENT_KINDS.find((k) => k.mediaTypes.some((m) => (m.endsWith("/*") ? type.startsWith(m.slice(0, -1)) : m === type))) ?? null;
}

function sizeText(bytes: number): string {
  return bytes >= MB ? `${(bytes / MB).toFixed(bytes >= 10 * MB ? 0 : 1)} MB` : `${Math.ceil(bytes / 1024)} kB`;
}

export type Screening =
  /** Upload it. */
  | { verdict: "upload"; kind: KindRule }
  /** A kind the model cannot read at all: turned away at once, it never becomes an attachment. */
  | { verdict: "unreadable"; reason: string }
  /** A readable kind, refused all the same (credentials, size): explained on its chip, never uploaded. */
  | { verdict: "refused"; reason: string };

/** What the window does with a picked or dropped file before anything leaves the computer. */
export function screenAttachment(file: { name: string; type: string; size: number }): Screening {
  if (isCredentialName(file.name))
    return {
      verdict: "refused",
      reason: `Credential files are not accepted (${file.name} has a credential file's name); keep keys and secrets out of files you send to a model.`,
    };
  const kind = kindOf(file);
  if (!kind) return { verdict: "unreadable", reason: `${file.name} cannot be attached: the local model reads ${ATTACHABLE_WORDS}.` };
  if (file.size === 0) return { verdict: "refused", reason: "The file is empty." };
  if (file.size > kind.maxBytes)
    return {
      verdict: "refused",
      reason: `${kind.label} files may be at most ${sizeText(kind.maxBytes)}; this one is ${sizeText(file.size)}.`,
    };
  return { verdict: "upload", kind };
}

/** Image types Chromium can show as a thumbnail (HEIC and TIFF get a kind badge instead). */
export function hasPreview(type: string): boolean {
  return ["image/jpeg", "image/png", "image/webp", "image/gif", "image/bmp", "image/avif"].includes(type.toLowerCase());
}

/** A short badge for a file without a thumbnail: its extension ("PDF", "MP3"), else its kind. */
export function badgeOf(name: string, kind: string | null): string {
  const ext = extensionOf(name).slice(1).toUpperCase();
  if (ext && ext.length <= 4) return ext;
  return (ATTACHMENT_KINDS.find((k) => k.kind === kind)?.label ?? "File").toUpperCase().slice(0, 4);
}
