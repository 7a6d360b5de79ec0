// Files → what the model gets. The local model reads text only: PDFs give their text layer, text and code
// files their content; images, audio and scanned PDFs are refused with a clear message.
import { extname } from "node:path";
import { AppError, invalidRequest } from "../core/errors.js";
import type { FileSource } from "../core/inference.js";
import { extractPdfText } from "./pdf.js";

/** Text beyond this is cut (spec: text files and PDF text layers, first 200,000 characters). */
export const MAX_TEXT_CHARS = 200_000;
/** PDFs are read up to this many pages. */
export const MAX_PDF_PAGES = 20;

/** Credential files are never accepted (spec, Files rule 1). */
const CREDENTIAL_EXTENSIONS = new Set([".env", ".pem", ".p12", ".pfx", ".cer", ".crt"]);

const TEXT_EXTENSIONS = new Set(
  (
    ".txt .md .markdown .csv .tsv .json .jsonl .yaml .yml .toml .ini .xml .html .htm .css .js .mjs .cjs .ts .tsx .jsx " +
    ".py .go .rs .java .kt .c .h .cpp .hpp .cc .cs .rb .php .swift .sh .bash .zsh .sql .r .lua .pl .scala .dart .vue .svelte .log .tex .rst"
  ).split(" "),
);

export type ContentKind = "text" | "pdf";

export interface IngestedText {
  kind: ContentKind;
  text: string;
  truncated: boolean;
  mediaType: string;
  pages?: number;
}

export interface IngestInput {
  source: FileSource;
  filename?: string;
  /** Where the part sits in the request, for error messages. */
  param: string;
}

export function isCredentialFile(filename: string | undefined): boolean {
  if (!filename) return false;
  const lower = filename.toLowerCase();
  return CREDENTIAL_EXTENSIONS.has(extname(lower)) || lower === ".env" || lower.endsWith("/.env");
}

function isTextType(mediaType: string, filename: string | undefined): boolean {
  const type = mediaType.toLowerCase().split(";")[0]!.trim();
  if (type.startsWith("text/")) return true;
  if (["application/json", "application/xml", "application/x-yaml", "application/yaml", "application/javascript", "application/x-sh", "application/sql"].includes(type))
    return true;
  return filename !== undefined && TEXT_EXTENSIONS.has(extname(filename.toLowerCase()));
}

function cut(text: string): { text: string; truncated: boolean } {
  return text.length > MAX_TEXT_CHARS ? { text: text.slice(0, MAX_TEXT_CHARS), truncated: true } : { text, truncated: false };
}

function decodeBase64(data: string, param: string): Buffer {
  const clean = data.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(clean)) throw invalidRequest("The file data is not valid base64.", param, "invalid_file_data");
  return Buffer.from(clean, "base64");
}

export async function ingestInline({ source, filename, param }: IngestInput): Promise<IngestedText> {
  if (isCredentialFile(filename))
    throw new AppError("unprocessable", `Credential files (${filename}) are not accepted.`, { param, code: "file_type_rejected" });
  switch (source.kind) {
    case "text":
      return { kind: "text", mediaType: source.mediaType, ...cut(source.text) };
    case "url":
      throw invalidRequest(
        "Documents given by URL are not fetched: this server works offline. Send the content inline (base64 or text) instead.",
        param,
        "url_not_fetched",
      );
    case "file_id":
      throw invalidRequest(`File references (${source.fileId}) need the Files API, which this server does not offer yet.`, param, "unsupported_content");
    case "base64": {
      const bytes = decodeBase64(source.data, param);
      const mediaType = source.mediaType.toLowerCase();
      if (mediaType === "application/pdf") {
        let pdf;
        try {
          pdf = await extractPdfText(new Uint8Array(bytes), MAX_PDF_PAGES);
        } catch (err) {
          throw invalidRequest(`The PDF could not be read: ${(err as Error).message}`, param, "invalid_pdf");
        }
        if (pdf.text.trim() === "")
          throw invalidRequest(
            "This PDF has no text layer (a scan?). Reading page images needs a vision model, which the local model is not.",
            param,
            "unsupported_content",
          );
        return { kind: "pdf", mediaType, pages: pdf.pages, ...cut(pdf.text) };
      }
      if (isTextType(mediaType, filename)) return { kind: "text", mediaType, ...cut(new TextDecoder("utf-8").decode(bytes)) };
      if (mediaType.startsWith("image/")) throw invalidRequest("Image input is not supported by the local model.", param, "unsupported_content");
      throw invalidRequest(`Files of type ${source.mediaType} are not supported inline; send text, code or PDF.`, param, "unsupported_content");
    }
  }
}

/** How a file's text is shown to the model. */
export function formatFileText(ingested: IngestedText, filename: string | undefined): string {
  const name = filename ?? (ingested.kind === "pdf" ? "document.pdf" : "document");
  const note = ingested.truncated ? `\n[The rest of ${name} was cut at ${MAX_TEXT_CHARS} characters.]` : "";
  return `<file name="${name.replace(/"/g, "'")}" type="${ingested.mediaType}">\n${ingested.text}${note}\n</file>`;
}
