// The window's one list of what can be attached (renderer/src/chat/attachments.ts) against the server's own
// rules (server/ingest): the same kinds and per-kind limits, the same credential names, and for a real file of
// each kind the window's guess from the name is what the server reads the bytes as.
import sharp from "sharp";
import { describe, expect, it } from "vitest";
import { ATTACH_ACCEPT, ATTACHMENT_KINDS, isCredentialName, kindOf, screenAttachment } from "../../renderer/src/chat/attachments.js";
import { classify } from "../../server/ingest/classify.js";
import { isCredentialName as serverIsCredentialName } from "../../server/ingest/credentials.js";
import { CONTENT_KINDS, MAX_BYTES_OF_KIND } from "../../server/ingest/types.js";
import { MAX_UPLOAD_BYTES } from "../../server/features/files/files-service.js";
import { heicOf, heicSkipReason, iworkZip, toneWav } from "../support/file-fixtures.js";
import { makePdf } from "../support/make-pdf.js";

describe("the window's list of attachable files", () => {
  it("has the server's kinds and per-kind limits", () => {
    expect(ATTACHMENT_KINDS.map((k) => k.kind).sort()).toEqual([...CONTENT_KINDS].sort());
    for (const rule of ATTACHMENT_KINDS) expect(rule.maxBytes, rule.kind).toBe(Math.min(MAX_BYTES_OF_KIND[rule.kind], MAX_UPLOAD_BYTES));
  });

  it("refuses the credential names the server refuses, and no others", () => {
    const names = [".env", "prod.env", ".env.local", "server.pem", "id.p12", "store.pfx", "ca.cer", "site.crt", "Server.PEM", "notes.txt", "environment.md", "report.pdf", "deck.key", "dir/sub/.env"];
    for (const name of names) expect(isCredentialName(name), name).toBe(serverIsCredentialName(name));
    for (const ext of [".env", ".pem", ".p12", ".pfx", ".cer", ".crt"]) expect(ATTACH_ACCEPT.split(","), ext).not.toContain(ext);
  });

  it("guesses from the name the kind the server reads from the bytes", async () => {
    const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: "#888" } }).png().toBuffer();
    const samples: Array<[string, Buffer]> = [
      ["notes.txt", Buffer.from("plain text\n")],
      ["main.py", Buffer.from("print('hi')\n")],
      ["data.csv", Buffer.from("a,b\n1,2\n")],
      ["report.pdf", makePdf(["Hello"])],
      ["photo.png", png],
      ["photo.jpg", await sharp(png).jpeg().toBuffer()],
      ["photo.webp", await sharp(png).webp().toBuffer()],
      ["anim.gif", await sharp(png).gif().toBuffer()],
      ["scan.tiff", await sharp(png).tiff().toBuffer()],
      ["tone.wav", toneWav(0.2)],
      ["essay.pages", iworkZip()],
    ];
    if (heicSkipReason() === null) samples.push(["photo.heic", heicOf(png)]);
    for (const [name, bytes] of samples) {
      const server = await classify(bytes.subarray(0, 64 * 1024), name, true);
      expect(kindOf({ name, type: "" })?.kind, name).toBe(server.kind);
    }
    // Every text extension the window offers is read as text by the server.
    for (const ext of ATTACHMENT_KINDS.find((k) => k.kind === "text")!.extensions)
      expect((await classify(Buffer.from("some text\n"), `file${ext}`, true)).kind, ext).toBe("text");
  });

  it("turns away what the model cannot read, and refuses credentials and oversized files on their chips", () => {
    expect(screenAttachment({ name: "backup.zip", type: "application/zip", size: 10 })).toMatchObject({ verdict: "unreadable" });
    expect(screenAttachment({ name: "setup", type: "", size: 10 })).toMatchObject({ verdict: "unreadable" });
    expect(screenAttachment({ name: "server.pem", type: "application/x-pem-file", size: 10 })).toEqual({
      verdict: "refused",
      reason: "Credential files are not accepted (server.pem has a credential file's name); keep keys and secrets out of files you send to a model.",
    });
    expect(screenAttachment({ name: "big.png", type: "image/png", size: 21 * 1024 * 1024 })).toEqual({
      verdict: "refused",
      reason: "Image files may be at most 20 MB; this one is 21 MB.",
    });
    expect(screenAttachment({ name: "song.mp3", type: "audio/mpeg", size: 5 * 1024 * 1024 })).toMatchObject({ verdict: "upload", kind: { kind: "audio" } });
    expect(screenAttachment({ name: "clip.MOV", type: "", size: 1000 })).toMatchObject({ verdict: "upload", kind: { kind: "video" } });
    expect(screenAttachment({ name: "notes", type: "text/plain", size: 10 })).toMatchObject({ verdict: "upload", kind: { kind: "text" } });
  });
});
