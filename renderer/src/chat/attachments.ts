// What can be attached: the local model reads text, code and PDF files (server/ingest). The picker filters
// on these, and a dropped file of another kind is refused at once instead of failing the message later.
export const MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024;

const TEXT_EXTENSIONS =
  ".txt .md .markdown .csv .tsv .json .jsonl .yaml .yml .toml .ini .xml .html .htm .css .js .mjs .cjs .ts .tsx .jsx " +
  ".py .go .rs .java .kt .c .h .cpp .hpp .cc .cs .rb .php .swift .sh .bash .zsh .sql .r .lua .pl .scala .dart .vue .svelte .log .tex .rst";
const EXTENSIONS = [...TEXT_EXTENSIONS.split(" "), ".pdf"];
/** Files holding credentials are never accepted (the server refuses them with 422). */
const CREDENTIALS = [".env", ".pem", ".p12", ".pfx", ".cer", ".crt"];

/** The file input's accept attribute. */
export const ATTACH_ACCEPT = [...EXTENSIONS, "text/*", "application/pdf", "application/json"].join(",");

export function attachRefusal(file: { name: string; type: string; size: number }): string | null {
  const lower = file.name.toLowerCase();
  const ext = lower.includes(".") ? lower.slice(lower.lastIndexOf(".")) : "";
  if (CREDENTIALS.includes(ext) || lower === ".env") return `${file.name} looks like a credentials file; those are never sent.`;
  const textual = file.type.startsWith("text/") || file.type === "application/pdf" || file.type === "application/json" || EXTENSIONS.includes(ext);
  if (!textual) return `${file.name} cannot be attached: the local model reads text, code and PDF files only.`;
  return null;
}

export function readAsDataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error ?? new Error("read failed"));
    reader.readAsDataURL(file);
  });
}
