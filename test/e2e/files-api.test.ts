// The Files API on `svc serve` with the generated model, through the openai package's files API and raw
// multipart, and files used on all three surfaces (the prompt grows by the file's content).
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import Database from "better-sqlite3";
import sharp from "sharp";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { captionMp4, heicOf, heicSkipReason, iworkZip, textPng, toneWav } from "../support/file-fixtures.js";
import { makePdf } from "../support/make-pdf.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let dataDir: string;
let key: string;
let client: OpenAI;
let other: OpenAI;
let png: Buffer;

const NOTES = "# Release notes\nThe blue heron protocol ships on the fourteenth of March.\n".repeat(20);
type FileOut = OpenAI.FileObject & { size: number; mime_type: string; content_kind: string; token_estimate: number; expires_at: number };

beforeAll(async () => {
  dataDir = tempDataDir();
  key = createKey(dataDir);
  const otherKey = createKey(dataDir, "--account", "someone-else");
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "8192"] });
  client = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
  other = new OpenAI({ apiKey: otherKey, baseURL: `${server.url}/v1`, maxRetries: 0 });
  png = await textPng(["Invoice 4711", "Total due 123.45 EUR"]);
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
  rmSync(dataDir, { recursive: true, force: true });
});

async function upload(data: Buffer | string, name: string, purpose: OpenAI.FilePurpose = "user_data"): Promise<FileOut> {
  return (await client.files.create({ file: await toFile(Buffer.from(data), name), purpose })) as FileOut;
}

function rawUpload(form: FormData, apiKey = key): Promise<Response> {
  return fetch(`${server.url}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${apiKey}` }, body: form });
}

describe("upload, list, get, delete", () => {
  it("files.create returns every FileOut field; the bytes and their content are on disk", async () => {
    const before = Math.floor(Date.now() / 1000);
    const file = await upload(NOTES, "notes.md");
    expect(file).toEqual({
      id: expect.stringMatching(/^file-[A-Za-z0-9]{24}$/),
      object: "file",
      filename: "notes.md",
      purpose: "user_data",
      mime_type: "text/markdown",
      size: Buffer.byteLength(NOTES),
      bytes: Buffer.byteLength(NOTES),
      status: "processed",
      status_details: null,
      content_kind: "text",
      // ceil(characters / 4) of what the model reads: the text inside its <file> tag.
      token_estimate: Math.ceil(`<file name="notes.md" type="text/markdown">\n${NOTES}\n</file>`.length / 4),
      created_at: expect.any(Number),
      expires_at: file.created_at + 30 * 24 * 3600,
    });
    expect(file.created_at).toBeGreaterThanOrEqual(before);
    expect(readdirSync(join(dataDir, "files", file.id)).sort()).toEqual(["content.json", "original"]);
    expect(await client.files.retrieve(file.id)).toEqual(file);
  });

  it("raw multipart without purpose: purpose user_data, the type detected from the bytes, not the name or header", async () => {
    const form = new FormData();
    form.append("file", new Blob([new Uint8Array(png)], { type: "text/plain" }), "photo.txt");
    const res = await rawUpload(form);
    expect(res.status).toBe(200);
    const file = (await res.json()) as FileOut;
    expect(file).toMatchObject({ purpose: "user_data", mime_type: "image/png", content_kind: "image", status: "processed", filename: "photo.txt" });
    expect(file.token_estimate).toBeGreaterThan(10);
  });

  it("an image's token_estimate is what a model that sees it gets (by its size), not only the few tokens OCR reads in it", async () => {
    // 1024x768 with two lines of text: count_tokens' estimate for that size is 1049 (docs/api.md, "Images").
    const photo = await sharp({ create: { width: 1024, height: 768, channels: 3, background: "#fff" } })
      .composite([{ input: await textPng(["Invoice 4711"]), top: 10, left: 10 }])
      .png()
      .toBuffer();
    const file = await upload(photo, "photo.png");
    expect(file).toMatchObject({ content_kind: "image", status: "processed", token_estimate: 1049 });
    // What the text-only path reads is far less (its <file> block: facts and the OCR text).
    const content = JSON.parse(readFileSync(join(dataDir, "files", file.id, "content.json"), "utf8")) as { text: string };
    expect(Math.ceil(content.text.length / 4)).toBeLessThan(300);
  });

  it("lists own files newest first with OpenAI's cursor pagination; another account sees none of them", async () => {
    const made = [await upload("one", "1.txt"), await upload("two", "2.txt"), await upload("three", "3.txt")];
    const page = await client.files.list({ limit: 2 });
    expect(page.data).toHaveLength(2);
    expect(page.has_more).toBe(true);
    const all: string[] = [];
    for await (const file of client.files.list({ limit: 2 })) all.push(file.id);
    expect(all.slice(0, 3)).toEqual(made.map((f) => f.id).reverse());
    const raw = (await (await fetch(`${server.url}/v1/files?limit=1&order=asc`, { headers: { authorization: `Bearer ${key}` } })).json()) as Record<string, unknown>;
    expect(raw).toMatchObject({ object: "list", has_more: true, first_id: expect.stringMatching(/^file-/), last_id: raw.first_id });
    expect((await other.files.list()).data).toEqual([]);
    await expect(other.files.retrieve(made[0]!.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(other.files.delete(made[0]!.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("delete removes the record, the bytes and the extracted content", async () => {
    const file = await upload("short lived", "gone.txt");
    expect(await client.files.delete(file.id)).toEqual({ id: file.id, object: "file", deleted: true });
    expect(existsSync(join(dataDir, "files", file.id))).toBe(false);
    const err = await client.files.retrieve(file.id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({ code: "file_not_found", message: `No such file: '${file.id}'.` });
    await expect(client.files.delete(file.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("an expired file behaves as deleted", async () => {
    const file = await upload("old news", "old.txt");
    const db = new Database(join(dataDir, "svc.sqlite3"));
    db.prepare("UPDATE files SET expires_at = ? WHERE id = ?").run(Math.floor(Date.now() / 1000) - 1, file.id);
    db.close();
    await expect(client.files.retrieve(file.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    expect((await client.files.list()).data.map((f) => f.id)).not.toContain(file.id);
    const chat = await client.chat.completions
      .create({ model: "svc", max_tokens: 1, messages: [{ role: "user", content: [{ type: "file", file: { file_id: file.id } }] }] })
      .catch((e: unknown) => e);
    expect(chat).toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe("every kind through the API", () => {
  async function contentOf(id: string): Promise<string> {
    return (JSON.parse(readFileSync(join(dataDir, "files", id, "content.json"), "utf8")) as { text: string }).text;
  }

  it("audio, video, HEIC and iWork (with and without a preview) are stored, classified and read", async () => {
    const wav = await upload(toneWav(1), "tone.wav");
    expect(wav).toMatchObject({ content_kind: "audio", mime_type: expect.stringMatching(/^audio\/(wav|vnd\.wave|x-wav)$/), status: "processed" });
    expect(await contentOf(wav.id)).toContain("No transcript is available");
    const mp4 = await upload(captionMp4(2, "Heron launch"), "clip.mp4");
    expect(mp4).toMatchObject({ content_kind: "video", mime_type: "video/mp4", status: "processed" });
    expect(await contentOf(mp4.id)).toContain("Heron launch");
    const pages = await upload(iworkZip({ name: "QuickLook/Preview.pdf", data: makePdf(["Heron budget", "Total 42"]) }), "budget.pages");
    expect(pages).toMatchObject({ content_kind: "iwork", mime_type: "application/vnd.apple.pages", status: "processed" });
    expect(await contentOf(pages.id)).toBe("Heron budget\nTotal 42");
    const bare = await upload(iworkZip(), "sheet.numbers");
    expect(bare).toMatchObject({ content_kind: "iwork", status: "processed" });
    expect(await contentOf(bare.id)).toBe("");
    if (!heicSkipReason()) {
      const heic = await upload(heicOf(png), "IMG_0001.HEIC");
      expect(heic).toMatchObject({ content_kind: "image", mime_type: "image/heic", status: "processed" });
      expect(await contentOf(heic.id)).toContain("Invoice 4711");
    }
  });
});

describe("refusals", () => {
  it("credential files are 422, by name and by content", async () => {
    for (const [data, name] of [
      ["API_KEY=abc", "prod.env"],
      ["-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n", "notes.txt"],
      ["cert", "site.crt"],
    ]) {
      const err = await upload(data!, name!).catch((e: unknown) => e);
      expect(err, name).toBeInstanceOf(OpenAI.UnprocessableEntityError);
      expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe("file_type_rejected");
    }
  });

  it("an upload body over 100 MB is 413 (announced or streamed); a 21 MB image is over the image limit", async () => {
    const big = Buffer.alloc(100 * 1024 * 1024 + 1, 0x61);
    const announced = await upload(big, "big.txt").catch((e: unknown) => e);
    expect(announced).toBeInstanceOf(OpenAI.APIError);
    expect((announced as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
    // Chunked, no Content-Length: the stream is cut at the limit.
    const boundary = "----svc-test";
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\nContent-Type: text/plain\r\n\r\n`);
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(head);
        for (let i = 0; i < 101; i++) controller.enqueue(big.subarray(i * 1024 * 1024, (i + 1) * 1024 * 1024));
        controller.enqueue(tail);
        controller.close();
      },
    });
    const streamed = await fetch(`${server.url}/v1/files`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": `multipart/form-data; boundary=${boundary}` },
      body,
      duplex: "half",
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect(((await streamed.json()) as { error: { code: string } }).error.code).toBe("file_too_large");
    const image = Buffer.concat([png.subarray(0, 64), Buffer.alloc(21 * 1024 * 1024)]);
    const tooBig = await upload(image, "huge.png").catch((e: unknown) => e);
    expect((tooBig as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
    expect((tooBig as InstanceType<typeof OpenAI.APIError>).message).toContain("image files may be at most 20 MB");
    expect(readdirSync(join(dataDir, "files", ".incoming"))).toEqual([]);
  });

  it("bad forms are 400s: no file field, an unknown purpose, binary posing as text", async () => {
    const noFile = new FormData();
    noFile.append("purpose", "user_data");
    const res = await rawUpload(noFile);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: "missing_file", param: "file", type: "invalid_request_error" } });
    const purpose = await upload("x", "x.txt", "galaxy" as OpenAI.FilePurpose).catch((e: unknown) => e);
    expect(purpose).toBeInstanceOf(OpenAI.BadRequestError);
    const binary = await upload(Buffer.from([0x41, 0, 0x42, 0, 0x43]), "notes.txt").catch((e: unknown) => e);
    expect(binary).toBeInstanceOf(OpenAI.BadRequestError);
    expect((binary as Error).message).toContain("binary data");
    const unauthenticated = await rawUpload(noFile, "sk-svc-0000");
    expect(unauthenticated.status).toBe(401);
  });
});

describe("files in requests on every surface", () => {
  let notesId: string;
  let imageId: string;
  const question = "What ships when?";

  beforeAll(async () => {
    notesId = (await upload(NOTES, "notes.md")).id;
    imageId = (await upload(png, "invoice.png")).id;
  });

  async function chatTokens(content: OpenAI.Chat.ChatCompletionContentPart[]): Promise<number> {
    const res = await client.chat.completions.create({ model: "svc", max_tokens: 1, reasoning_effort: "none", messages: [{ role: "user", content }] });
    return res.usage!.prompt_tokens;
  }

  it("Chat: file_id, inline file_data and image_url data URLs reach the model; a missing or foreign id is a 404 naming it", async () => {
    const plain = await chatTokens([{ type: "text", text: question }]);
    const withFile = await chatTokens([{ type: "text", text: question }, { type: "file", file: { file_id: notesId } }]);
    expect(withFile - plain).toBeGreaterThan(NOTES.length / 8);
    const pdf = `data:application/pdf;base64,${makePdf(["Heron launch checklist", "Step one: count the herons"]).toString("base64")}`;
    const inline = await chatTokens([{ type: "text", text: question }, { type: "file", file: { filename: "checklist.pdf", file_data: pdf } }]);
    expect(inline - plain).toBeGreaterThan(15);
    const image = await chatTokens([{ type: "text", text: question }, { type: "image_url", image_url: { url: `data:image/png;base64,${png.toString("base64")}` } }]);
    expect(image - plain).toBeGreaterThan(15);
    for (const id of ["file-doesnotexist", (await other.files.create({ file: await toFile(Buffer.from("theirs"), "t.txt"), purpose: "user_data" })).id]) {
      const err = await chatTokens([{ type: "file", file: { file_id: id } }]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect((err as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ param: "messages[0].content[0].file.file_id", message: `No such file: '${id}'.` });
    }
    const remote = await chatTokens([{ type: "image_url", image_url: { url: "http://127.0.0.1:9/cat.png" } }]).catch((e: unknown) => e);
    expect(remote).toBeInstanceOf(OpenAI.BadRequestError);
    expect((remote as InstanceType<typeof OpenAI.APIError>).code).toBe("url_not_fetched");
  });

  it("Responses: input_file by id or data, input_image by id", async () => {
    const tokens = async (content: OpenAI.Responses.ResponseInputContent[]) =>
      (await client.responses.create({ model: "svc", max_output_tokens: 16, reasoning: { effort: "low" }, input: [{ role: "user", content: [{ type: "input_text", text: question }, ...content] }] }))
        .usage!.input_tokens;
    const plain = await tokens([]);
    expect((await tokens([{ type: "input_file", file_id: notesId }])) - plain).toBeGreaterThan(NOTES.length / 8);
    const data = `data:text/plain;base64,${Buffer.from("The heron count is 17 this year.").toString("base64")}`;
    expect((await tokens([{ type: "input_file", filename: "count.txt", file_data: data }])) - plain).toBeGreaterThan(5);
    expect((await tokens([{ type: "input_image", detail: "auto", file_id: imageId }])) - plain).toBeGreaterThan(15);
  });

  it("Messages: document and image blocks (base64), and count_tokens sees them", async () => {
    const anthropic = new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0 });
    const ask = (extra: Anthropic.ContentBlockParam[]) => ({
      model: "claude-haiku-4-5",
      max_tokens: 1,
      messages: [{ role: "user" as const, content: [{ type: "text" as const, text: question }, ...extra] }],
    });
    const plain = (await anthropic.messages.create(ask([]))).usage.input_tokens;
    const pdf = makePdf(["Heron launch checklist", "Step one: count the herons"]).toString("base64");
    const doc: Anthropic.ContentBlockParam = { type: "document", source: { type: "base64", media_type: "application/pdf", data: pdf } };
    const image: Anthropic.ContentBlockParam = { type: "image", source: { type: "base64", media_type: "image/png", data: png.toString("base64") } };
    const withDoc = (await anthropic.messages.create(ask([doc]))).usage.input_tokens;
    expect(withDoc - plain).toBeGreaterThan(15);
    const withImage = (await anthropic.messages.create(ask([image]))).usage.input_tokens;
    expect(withImage - plain).toBeGreaterThan(15);
    const counted = await anthropic.messages.countTokens(ask([doc]));
    const countedPlain = await anthropic.messages.countTokens(ask([]));
    expect(counted.input_tokens - countedPlain.input_tokens).toBeGreaterThan(15);
  });
});
