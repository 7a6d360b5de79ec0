import { describe, expect, it } from "vitest";
import { formatFileText, ingestInline, MAX_TEXT_CHARS } from "../../server/ingest/ingest.js";
import { makePdf } from "../support/make-pdf.js";

const b64 = (s: string | Buffer) => Buffer.from(s).toString("base64");

describe("ingestInline", () => {
  it("extracts the text layer of a PDF", async () => {
    const out = await ingestInline({ source: { kind: "base64", mediaType: "application/pdf", data: b64(makePdf(["Quarterly report", "Revenue grew (a lot)"])) }, param: "p" });
    expect(out).toMatchObject({ kind: "pdf", pages: 1, truncated: false });
    expect(out.text).toBe("Quarterly report\nRevenue grew (a lot)");
  });

  it("refuses a PDF without a text layer and a broken PDF, naming the part", async () => {
    await expect(ingestInline({ source: { kind: "base64", mediaType: "application/pdf", data: b64(makePdf([])) }, param: "x" })).rejects.toMatchObject({
      kind: "invalid_request",
      param: "x",
      code: "unsupported_content",
    });
    await expect(ingestInline({ source: { kind: "base64", mediaType: "application/pdf", data: b64("not a pdf") }, param: "y" })).rejects.toMatchObject({
      code: "invalid_pdf",
      param: "y",
    });
  });

  it("decodes text and code files, by media type or extension, and cuts at 200,000 characters", async () => {
    expect((await ingestInline({ source: { kind: "base64", mediaType: "text/csv", data: b64("a,b\n1,2") }, param: "p" })).text).toBe("a,b\n1,2");
    const code = await ingestInline({ source: { kind: "base64", mediaType: "application/octet-stream", data: b64("fn main() {}") }, filename: "main.rs", param: "p" });
    expect(code.text).toBe("fn main() {}");
    const long = await ingestInline({ source: { kind: "text", mediaType: "text/plain", text: "x".repeat(MAX_TEXT_CHARS + 5) }, param: "p" });
    expect(long.text).toHaveLength(MAX_TEXT_CHARS);
    expect(long.truncated).toBe(true);
    expect(formatFileText(long, "big.txt")).toContain("was cut at 200000 characters");
  });

  it("refuses URLs (offline), images, unknown binaries and credential files", async () => {
    await expect(ingestInline({ source: { kind: "url", url: "https://example.com/a.pdf" }, param: "p" })).rejects.toMatchObject({ code: "url_not_fetched" });
    await expect(ingestInline({ source: { kind: "base64", mediaType: "image/png", data: b64("x") }, param: "p" })).rejects.toMatchObject({ code: "unsupported_content" });
    await expect(ingestInline({ source: { kind: "base64", mediaType: "application/zip", data: b64("x") }, param: "p" })).rejects.toMatchObject({ code: "unsupported_content" });
    await expect(ingestInline({ source: { kind: "text", mediaType: "text/plain", text: "KEY=1" }, filename: "prod.env", param: "p" })).rejects.toMatchObject({
      kind: "unprocessable",
      status: 422,
    });
    await expect(ingestInline({ source: { kind: "base64", mediaType: "text/plain", data: "%%%" }, param: "p" })).rejects.toMatchObject({ code: "invalid_file_data" });
  });

  it("formats file text with its name and type for the model", () => {
    expect(formatFileText({ kind: "text", text: "hi", truncated: false, mediaType: "text/plain" }, "a.txt")).toBe('<file name="a.txt" type="text/plain">\nhi\n</file>');
  });
});
