// Issue 38, item 4: cut requests were recorded as successes. A request cut by the body deadline got its 408,
// yet its audit record said `status 200, aborted` (the record read Node's default statusCode when no
// response had been sent), and an upload the client cut was logged as `POST /v1/files → 500: Error:
// aborted`. The records and the log say what the client got: 408 for the deadline, 499 (nginx's "client
// closed request": no status was sent) for a client that left before any answer, and no 5xx in the log.
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

const REQUEST_TIMEOUT_S = 2;
let server: SvcServer;
let key: string;

beforeAll(async () => {
  const dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({
    dataDir,
    args: ["--request-timeout", String(REQUEST_TIMEOUT_S), "--headers-timeout", String(REQUEST_TIMEOUT_S)],
    env: { SVC_LOG_LEVEL: "info" },
  });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

const port = () => Number(new URL(server.url).port);

interface AuditRecord {
  request_id: string;
  path: string;
  status: number;
  error_code: string | null;
  aborted: boolean;
}

/** The newest audit records of the key's account. */
async function audit(): Promise<AuditRecord[]> {
  const res = await fetch(`${server.url}/v1/audit?limit=50`, { headers: { authorization: `Bearer ${key}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: AuditRecord[] }).data;
}

/** Waits for the audit record of a request on `path` that none of `before` is. */
async function newRecord(path: string, before: AuditRecord[]): Promise<AuditRecord> {
  const seen = new Set(before.map((r) => r.request_id));
  for (let i = 0; i < 50; i++) {
    const found = (await audit()).find((r) => r.path === path && !seen.has(r.request_id));
    if (found) return found;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no new audit record for ${path}`);
}

/**
 * A raw connection that writes `head` and `body`, then (unless `cutAfterMs` is set, when it leaves then)
 * waits for the server to answer or close; resolves with what came back.
 */
function rawRequest(head: string, body: string | Buffer, cutAfterMs?: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port: port() });
    let response = "";
    socket.on("data", (d: Buffer) => (response += d.toString()));
    socket.on("error", () => undefined);
    socket.on("close", () => resolve(response));
    socket.write(head);
    socket.write(body);
    if (cutAfterMs !== undefined) setTimeout(() => socket.destroy(), cutAfterMs);
  });
}

function multipartStart(boundary: string): string {
  return `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="notes.txt"\r\nContent-Type: text/plain\r\n\r\n`;
}

const uploadHead = (boundary: string, length: number) =>
  `POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1:${port()}\r\nAuthorization: Bearer ${key}\r\n` +
  `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${length}\r\n\r\n`;

/** The log lines that name `requestId`. */
const logLines = (requestId: string) => server.output().split("\n").filter((l) => l.includes(requestId));

describe("cut requests are recorded and logged as what the client got (issue 38, item 4)", () => {
  it("a chat body cut by the deadline: the client's 408 is the record's 408, with the request id", async () => {
    const before = await audit();
    const head =
      `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${port()}\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n`;
    const response = await rawRequest(head, '{"messages":');
    expect(response).toMatch(/^HTTP\/1\.1 408 /);
    const record = await newRecord("/v1/chat/completions", before);
    expect(record).toMatchObject({ status: 408, error_code: "request_timeout", aborted: false });
    // The 408 carries the request id like every other answer, so a client can quote it.
    expect(response).toMatch(new RegExp(`x-request-id: ${record.request_id}\\r\\n`, "i"));
    expect(logLines(record.request_id).join("\n")).not.toMatch(/→ 5\d\d|\berror:/);
  });

  it("an upload cut by the deadline: 408 in the record, no 5xx in the log", async () => {
    const before = await audit();
    const boundary = "cutbydeadline";
    const start = multipartStart(boundary);
    const response = await rawRequest(uploadHead(boundary, start.length + 100_000), start + "x".repeat(50_000));
    expect(response).toMatch(/^HTTP\/1\.1 408 /);
    const record = await newRecord("/v1/files", before);
    expect(record).toMatchObject({ status: 408, error_code: "request_timeout", aborted: false });
    await new Promise((r) => setTimeout(r, 200));
    expect(logLines(record.request_id).join("\n")).not.toMatch(/→ 5\d\d|\berror:/);
    expect(server.output()).not.toMatch(/POST \/v1\/files → 500/);
  });

  it("an upload the client cuts: recorded as 499 and aborted, no 5xx in the log", async () => {
    const before = await audit();
    const boundary = "cutbyclient";
    const start = multipartStart(boundary);
    const response = await rawRequest(uploadHead(boundary, start.length + 100_000), start + "x".repeat(50_000), 300);
    expect(response).toBe("");
    const record = await newRecord("/v1/files", before);
    expect(record).toMatchObject({ status: 499, error_code: "client_closed_request", aborted: true });
    await new Promise((r) => setTimeout(r, 200));
    expect(logLines(record.request_id).join("\n")).not.toMatch(/→ 5\d\d|\berror:/);
    expect(server.output()).not.toMatch(/POST \/v1\/files → 500/);
    // The server serves on, and the upload left nothing behind that counts against the account.
    const form = new FormData();
    form.append("file", new Blob(["Some notes.\n"], { type: "text/plain" }), "notes.txt");
    const ok = await fetch(`${server.url}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
    expect(ok.status).toBe(200);
  });

  it("a chat body the client cuts before it is complete: 499 and aborted", async () => {
    const before = await audit();
    const head =
      `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${port()}\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n`;
    await rawRequest(head, '{"messages":', 300);
    const record = await newRecord("/v1/chat/completions", before);
    expect(record).toMatchObject({ status: 499, error_code: "client_closed_request", aborted: true });
  });
});
