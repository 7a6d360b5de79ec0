// The one table of ingestors: each content kind's way from bytes to what the model reads. Uploads, inline
// files and Messages document/image blocks all come through here (in the ingest worker, off the event loop).
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppError } from "../core/errors.js";
import { describeImage } from "./image.js";
import { findIworkPreview } from "./iwork.js";
import { decodeAudio, formatTimestamp, frameAt, probeMedia, videoTooLong, type MediaProbe } from "./media.js";
import { extractPdfText, renderPdfPages } from "./pdf.js";
import { NO_SPEECH_MODEL, transcribe, TranscriptionError, type Transcript } from "./speech.js";
import { cutText, decodeTextFile } from "./text.js";
import { isVideoTooLong, MAX_PDF_PAGES, MAX_RENDERED_BYTES, MAX_VIDEO_SECONDS, type ContentKind, type Extracted, type IngestOptions, type IngestSource } from "./types.js";
import { imageForModel, prepareForOcr, readTextIn } from "./vision.js";

type Body = Omit<Extracted, "kind" | "mediaType">;

/** A source as bytes or as a path on disk, whichever an ingestor needs (a temporary file for inline bytes). */
export class LoadedSource {
  private cached: Buffer | null = null;
  private tempDir: string | null = null;

  constructor(readonly source: IngestSource) {}

  async bytes(): Promise<Buffer> {
    if (this.cached) return this.cached;
    const { path, bytes } = this.source;
    this.cached = bytes ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) : await readFile(path!);
    return this.cached;
  }

  async path(): Promise<string> {
    if (this.source.path) return this.source.path;
    this.tempDir ??= await mkdtemp(join(tmpdir(), "svc-ingest-"));
    const file = join(this.tempDir, "input");
    await writeFile(file, this.source.bytes!);
    return file;
  }

  /** Inline bytes written for a tool are removed: a request's bytes are never kept. */
  async dispose(): Promise<void> {
    if (this.tempDir) await rm(this.tempDir, { recursive: true, force: true });
  }
}

export interface Ingestor {
  extract(source: LoadedSource, options: IngestOptions): Promise<Body>;
}

async function readPdf(data: Uint8Array): Promise<Body> {
  let text;
  try {
    text = await extractPdfText(new Uint8Array(data), MAX_PDF_PAGES);
  } catch (err) {
    throw new AppError("invalid_request", `The PDF could not be read: ${(err as Error).message}`, { code: "invalid_pdf" });
  }
  const limitNote = text.pages > MAX_PDF_PAGES ? `\n[The PDF has ${text.pages} pages; only the first ${MAX_PDF_PAGES} were read.]` : "";
  // Spec rule 3: a document with any text layer takes the text path, as a whole.
  if (text.text.trim() !== "") {
    const cut = cutText(text.text);
    return { method: "pdf_text", text: cut.text + limitNote, truncated: cut.truncated, pages: text.pages, pagesRead: text.pagesRead };
  }
  const rendered = await renderPdfPages(new Uint8Array(data), MAX_PDF_PAGES, MAX_RENDERED_BYTES);
  const sections: string[] = [`A scanned PDF without a text layer; its pages were read as images.`];
  for (const image of rendered.images) sections.push(`Page ${image.page}: ${await readTextIn(await prepareForOcr(image.data))}`);
  const stopped =
    rendered.stoppedAtPage !== null ? `[Pages from ${rendered.stoppedAtPage} on were not read: their images would have passed ${MAX_RENDERED_BYTES / 1024 / 1024} MB.]` : "";
  if (stopped) sections.push(stopped);
  const body = sections.join("\n\n") + limitNote;
  const cut = cutText(body);
  const visual = {
    text: "A scanned PDF without a text layer; its pages follow as images.",
    images: rendered.images.map((image) => ({
      label: `Page ${image.page}:`,
      mediaType: image.format === "png" ? ("image/png" as const) : ("image/jpeg" as const),
      data: image.data.toString("base64"),
    })),
    note: [stopped, limitNote.trim()].filter(Boolean).join("\n"),
  };
  return { method: "pdf_pages", text: cut.text, truncated: cut.truncated, pages: rendered.pages, pagesRead: rendered.images.length, visual };
}

function describeMedia(probe: MediaProbe): string {
  const parts: string[] = [];
  if (probe.durationSeconds !== null) parts.push(`${probe.durationSeconds.toFixed(1)} seconds`);
  if (probe.video) parts.push(`video ${probe.video.codec} ${probe.video.width}×${probe.video.height}`);
  if (probe.audio) parts.push(`audio ${probe.audio.codec}`);
  else parts.push("no audio track");
  return parts.join(", ");
}

function formatTranscript(transcript: Transcript, durationSeconds: number | null): string {
  const { model } = transcript;
  const about = [`whisper ${model.size === "unknown" ? "model" : model.size}${model.multilingual ? "" : " (English)"}`];
  if (transcript.language) about.push(`language ${transcript.language}`);
  const endMs = durationSeconds === null ? Infinity : durationSeconds * 1000;
  const lines = transcript.segments.map((s) => {
    const from = Math.min(s.startMs, endMs) / 1000;
    const to = Math.min(s.endMs, endMs) / 1000;
    return `[${formatTimestamp(from)}–${formatTimestamp(to)}] ${s.text}`;
  });
  return `Transcript (speech recognition by ${about.join(", ")}; it can mishear):\n${lines.join("\n")}`;
}

async function transcriptSection(path: string, probe: MediaProbe, options: IngestOptions): Promise<string> {
  if (!probe.audio) return "There is no audio track, so there is no transcript.";
  if (!options.speechModelPath) return NO_SPEECH_MODEL;
  const samples = await decodeAudio(path, Math.ceil(Math.min(probe.durationSeconds ?? MAX_VIDEO_SECONDS, 3600)));
  let transcript: Transcript | null;
  try {
    transcript = await transcribe(samples, options.speechModelPath, { threads: options.speechThreads });
  } catch (err) {
    if (!(err instanceof TranscriptionError)) throw err;
    // The file is still usable (its facts, keyframes): say why there is no transcript, invent none.
    return `No transcript is available: ${err.message}.`;
  }
  if (!transcript) return NO_SPEECH_MODEL;
  if (transcript.segments.length === 0) return "The speech model heard no speech in it.";
  return formatTranscript(transcript, probe.durationSeconds ?? samples.length / 16000);
}

/** Keyframes, evenly spread: one per 30 seconds, 1 to 10 of them; what OCR read in them, and the frames. */
async function keyframeSections(path: string, durationSeconds: number): Promise<{ sections: string[]; frames: NonNullable<Extracted["visual"]>["images"] }> {
  const count = Math.min(10, Math.max(1, Math.ceil(durationSeconds / 30)));
  const out: string[] = [];
  const empty: string[] = [];
  const frames: NonNullable<Extracted["visual"]>["images"] = [];
  for (let i = 0; i < count; i++) {
    const at = ((i + 0.5) * durationSeconds) / count;
    const frame = await frameAt(path, at);
    if (!frame) continue;
    frames.push({ label: `Keyframe at ${formatTimestamp(at)}:`, mediaType: "image/png", data: frame.toString("base64") });
    const read = await readTextIn(await prepareForOcr(frame));
    if (read.startsWith("No legible text")) empty.push(formatTimestamp(at));
    else out.push(`Keyframe at ${formatTimestamp(at)}: ${read}`);
  }
  if (empty.length) out.push(`Keyframes at ${empty.join(", ")}: no legible text; nothing else about what they show can be said.`);
  return { sections: out, frames };
}

async function readMedia(source: LoadedSource, options: IngestOptions): Promise<Body> {
  const path = await source.path();
  const probe = await probeMedia(path);
  if (probe.video && probe.durationSeconds !== null && isVideoTooLong(probe.durationSeconds))
    throw videoTooLong(probe.durationSeconds);
  const sections = [`${probe.video ? "Video" : "Audio"}: ${describeMedia(probe)}.`, await transcriptSection(path, probe, options)];
  if (!probe.video) return { method: "media", text: sections.join("\n\n"), truncated: false };
  const keyframes = await keyframeSections(path, probe.durationSeconds ?? 1);
  const visual = keyframes.frames.length > 0 ? { text: [...sections, "Its keyframes follow as images."].join("\n\n"), images: keyframes.frames } : undefined;
  return { method: "media", text: [...sections, ...keyframes.sections].join("\n\n"), truncated: false, ...(visual ? { visual } : {}) };
}

export const INGESTORS: Record<ContentKind, Ingestor> = {
  text: {
    async extract(source) {
      return { method: "text", ...decodeTextFile(await source.bytes(), source.source.filename) };
    },
  },
  pdf: {
    async extract(source) {
      return readPdf(await source.bytes());
    },
  },
  image: {
    async extract(source) {
      return { method: "vision", text: await describeImage(await source.bytes(), source.source.mediaType), truncated: false };
    },
  },
  audio: { extract: readMedia },
  video: { extract: readMedia },
  iwork: {
    async extract(source) {
      const preview = await findIworkPreview(source.source.path ? { path: source.source.path } : { bytes: await source.bytes() });
      if (!preview) return { method: "empty", text: "", truncated: false };
      if (preview.type === "pdf") return readPdf(preview.data);
      const mediaType = preview.name.endsWith(".png") ? ("image/png" as const) : ("image/jpeg" as const);
      // A vision model sees the preview itself (scaled and re-encoded like any image it gets).
      const image = await imageForModel(preview.data);
      return {
        method: "vision",
        text: `The file's preview image (${preview.name}): ${await describeImage(preview.data, mediaType)}`,
        truncated: false,
        visual: { text: `The file's preview image (${preview.name}) follows.`, images: [{ label: "Preview:", mediaType: image.mediaType, data: image.data.toString("base64") }] },
      };
    },
  },
};

/** Runs the ingestor for the source's kind (in the caller's thread: the worker calls this). */
export async function extractContent(source: IngestSource, options: IngestOptions): Promise<Extracted> {
  const loaded = new LoadedSource(source);
  try {
    const body = await INGESTORS[source.kind].extract(loaded, options);
    return { kind: source.kind, mediaType: source.mediaType, ...body };
  } finally {
    await loaded.dispose();
  }
}
