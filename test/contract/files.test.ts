// The Files API's limits and lifecycle on the in-process app (a real store and data dir; no model needed):
// the hourly upload limit, the stored-files limit, the sweeper, and a failed extraction.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FILE_LIFETIME_SECONDS, MAX_STORED_FILES, UPLOADS_PER_HOUR } from "../../server/features/files/files-service.js";
import { buildTestApp, type TestApp } from "../support/test-app.js";

let t: TestApp;
beforeEach(async () => {
  t = await buildTestApp(null);
});
afterEach(async () => {
  await t.close();
});

function multipart(filename: string, data: Buffer | string, fields: Record<string, string> = {}) {
  const boundary = "----svc-contract";
  const parts = Object.entries(fields).map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`);
  const body = Buffer.concat([
    Buffer.from(parts.join("")),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`),
    Buffer.from(data),
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { "content-type": `multipart/form-data; boundary=${boundary}`, body };
}

async function upload(filename: string, data: Buffer | string, key = t.key) {
  const { body, ...headers } = multipart(filename, data, { purpose: "assistants" });
  return t.app.inject({ method: "POST", url: "/v1/files", headers: { ...headers, authorization: `Bearer ${key}` }, payload: body });
}

const accountOf = (key: string) => t.keys.authenticate(key).accountId;

describe("quotas", () => {
  it(`${UPLOADS_PER_HOUR} uploads per hour per user, then 429 with Retry-After; deleting does not give uploads back`, async () => {
    for (let i = 0; i < UPLOADS_PER_HOUR; i++) {
      const res = await upload(`${i}.txt`, `file ${i}`);
      expect(res.statusCode, res.body).toBe(200);
      if (i === 0) expect((await t.app.inject({ method: "DELETE", url: `/v1/files/${res.json().id}`, headers: { authorization: `Bearer ${t.key}` } })).statusCode).toBe(200);
    }
    const res = await upload("one-more.txt", "x");
    expect(res.statusCode).toBe(429);
    const retryAfter = Number(res.headers["retry-after"]);
    expect(retryAfter).toBeGreaterThan(3500);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    expect(res.json().error).toMatchObject({ type: "rate_limit_error", code: "upload_rate_limit_exceeded" });
    expect(res.json().error.message).toContain("at most 30 uploads per hour");
    // Another user is not limited by this one.
    const otherKey = t.keys.create({ account: "other" }).key;
    expect((await upload("mine.txt", "x", otherKey)).statusCode).toBe(200);
    // An hour later the oldest uploads have aged out.
    t.store.db.prepare("UPDATE file_uploads SET at = at - 3601").run();
    expect((await upload("later.txt", "x")).statusCode).toBe(200);
  });

  it(`${MAX_STORED_FILES} stored files per user, then a 400 that says the limit`, async () => {
    const accountId = accountOf(t.key);
    const now = Math.floor(Date.now() / 1000);
    const insert = t.store.db.prepare(
      "INSERT INTO files (id, account_id, filename, purpose, mime_type, size_bytes, status, content_kind, token_estimate, created_at, expires_at) VALUES (?, ?, 'a.txt', 'user_data', 'text/plain', 1, 'processed', 'text', 1, ?, ?)",
    );
    for (let i = 0; i < MAX_STORED_FILES - 1; i++) insert.run(`file-seed${i}`, accountId, now, now + FILE_LIFETIME_SECONDS);
    expect((await upload("last.txt", "fits")).statusCode).toBe(200);
    const res = await upload("over.txt", "does not fit");
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: "file_limit_reached", type: "invalid_request_error" });
    expect(res.json().error.message).toContain("at most 100 files per user");
    // Expired files no longer count.
    t.store.db.prepare("UPDATE files SET expires_at = ? WHERE id = 'file-seed0'").run(now - 1);
    expect((await upload("now-fits.txt", "x")).statusCode).toBe(200);
  });
});

describe("lifecycle", () => {
  it("the sweeper removes expired files' records and bytes, and leaves the others", async () => {
    const keep = (await upload("keep.txt", "keep")).json();
    const old = (await upload("old.txt", "old")).json();
    const dir = join(t.files.dir, old.id);
    expect(existsSync(dir)).toBe(true);
    t.store.db.prepare("UPDATE files SET expires_at = ? WHERE id = ?").run(Math.floor(Date.now() / 1000) - 1, old.id);
    expect(await t.files.sweep()).toBe(1);
    expect(existsSync(dir)).toBe(false);
    expect(t.store.files.findAny(old.id)).toBeUndefined();
    expect(existsSync(join(t.files.dir, keep.id, "original"))).toBe(true);
  });

  it("a file whose content cannot be extracted is stored with status error and its reason; using it is a 400", async () => {
    const res = await upload("broken.pdf", "%PDF-1.7\n" + "garbage ".repeat(200));
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ status: "error", content_kind: "pdf", token_estimate: 0, status_details: expect.stringContaining("The PDF could not be read") });
    expect(res.json().purpose).toBe("assistants");
    const count = await t.app.inject({
      method: "POST",
      url: "/v1/messages/count_tokens",
      headers: { "x-api-key": t.key },
      payload: { model: "svc", messages: [{ role: "user", content: [{ type: "document", source: { type: "file", file_id: res.json().id } }] }] },
    });
    expect(count.statusCode).toBe(400);
    expect(count.json().error).toMatchObject({ type: "invalid_request_error", details: { error_code: "file_unreadable", param: "messages[0].content[0]" } });
    expect(count.json().error.message).toContain(`The file '${res.json().id}' could not be read`);
  });
});
