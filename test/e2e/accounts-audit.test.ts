// `svc serve` on the generated model with `svc accounts` beside it (another process on the same data dir):
// an account's whole life through HTTP, traffic on all three surfaces through the official clients, the
// audit of it, and a scan of every file in the data dir that finds none of the prompts or outputs. The
// server logs at debug level, and its log never shows a password or a key.
import Anthropic from "@anthropic-ai/sdk";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { runSvc, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

const MARKER = "quokka-7d1e5b-marker";
let server: SvcServer;
let dataDir: string;
const secrets: string[] = [];

interface CreatedJson {
  account: { name: string; must_change_password: boolean };
  temporary_password: string;
  key: { id: string; key: string };
}

beforeAll(async () => {
  dataDir = tempDataDir();
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096", "--log-level", "debug"] });
});

afterAll(async () => {
  await server?.stop();
});

/** The files under the data dir (database, write-ahead log, models...) that contain `text`. */
function filesHolding(text: string): string[] {
  const hits: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) {
        const bytes = readFileSync(path);
        if (bytes.includes(Buffer.from(text, "utf8")) || bytes.includes(Buffer.from(text, "utf16le"))) hits.push(path);
      }
    }
  };
  walk(dataDir);
  return hits;
}

/** A tiny cookie-keeping client for the console's JSON side. */
class Holder {
  cookie = "";
  csrf = "";
  async send(method: string, path: string, body?: unknown): Promise<Response> {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { "content-type": "application/json", ...(this.cookie ? { cookie: this.cookie } : {}), ...(this.csrf ? { "x-csrf-token": this.csrf } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const set = res.headers.get("set-cookie");
    if (set) this.cookie = set.split(";")[0]!;
    return res;
  }
}

describe("accounts with svc accounts and the console, against a running server", () => {
  let created: CreatedJson;
  let holder: Holder;
  const password = "a password of my own";

  it("creates an account from the CLI beside the server; its key works at once, and the first login forces a new password", async () => {
    const result = runSvc(["accounts", "create", "alice", "--data-dir", dataDir, "--json"]);
    expect(result.status, result.stderr).toBe(0);
    created = JSON.parse(result.stdout) as CreatedJson;
    secrets.push(created.temporary_password, created.key.key, password);
    expect(created.account).toMatchObject({ name: "alice", must_change_password: true });

    const plain = runSvc(["accounts", "create", "bob", "--data-dir", dataDir]);
    expect(plain.stdout).toMatch(/Temporary password \(the first console login must change it\): [a-z2-9-]{24}\n/);
    expect(plain.stdout).toMatch(/API key: sk-svc-[0-9a-f]{32}\n/);
    secrets.push(/Temporary password[^:]*: (\S+)/.exec(plain.stdout)![1]!, /API key: (\S+)/.exec(plain.stdout)![1]!);

    const openai = new OpenAI({ apiKey: created.key.key, baseURL: `${server.url}/v1`, maxRetries: 0 });
    expect((await openai.chat.completions.create({ model: "svc", messages: [{ role: "user", content: "hi" }], max_tokens: 5 })).object).toBe("chat.completion");

    holder = new Holder();
    const login = await holder.send("POST", "/v1/console/login", { account: "alice", password: created.temporary_password });
    expect(login.status).toBe(200);
    holder.csrf = ((await login.json()) as { csrf_token: string }).csrf_token;
    expect((await holder.send("GET", "/v1/console/keys")).status).toBe(403);
    const changed = await holder.send("POST", "/v1/console/password", { current_password: created.temporary_password, new_password: password });
    expect(changed.status).toBe(200);
    const keys = (await (await holder.send("GET", "/v1/console/keys")).json()) as { data: Array<{ id: string }> };
    expect(keys.data.map((k) => k.id)).toEqual([created.key.id]);

    const listed = JSON.parse(runSvc(["accounts", "list", "--data-dir", dataDir, "--json"]).stdout) as Array<{ name: string; must_change_password: boolean; active_keys: number }>;
    expect(listed.find((a) => a.name === "alice")).toMatchObject({ must_change_password: false, active_keys: 1 });
    expect(runSvc(["accounts", "list", "--data-dir", dataDir]).stdout).toMatch(/^alice {2}active {2}1 active key\(s\) {2}password set {2}acct_/m);
  });

  it("records traffic on all three surfaces, and keeps no prompt or output anywhere in the data dir", async () => {
    const made = (await (await holder.send("POST", "/v1/console/keys", { name: "clients", reasoning_trace: true })).json()) as { key: string };
    secrets.push(made.key);
    const openai = new OpenAI({ apiKey: made.key, baseURL: `${server.url}/v1`, maxRetries: 0 });
    const anthropic = new Anthropic({ apiKey: made.key, baseURL: server.url, maxRetries: 0 });
    const prompt = `Please repeat ${MARKER} and nothing else.`;
    const outputs: string[] = [];
    const ids: string[] = [];

    const chat = await openai.chat.completions.create({ model: "svc", messages: [{ role: "system", content: MARKER }, { role: "user", content: prompt }], session_id: `session-of-${"alice"}`, max_tokens: 60 } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    ids.push(chat._request_id!);
    outputs.push(chat.choices[0]!.message.content ?? "", (chat.choices[0]!.message as { reasoning_content?: string }).reasoning_content ?? "");
    const chatStream = await openai.chat.completions.create({ model: "svc", messages: [{ role: "user", content: prompt }], stream: true, max_tokens: 60 }).withResponse();
    ids.push(chatStream.request_id!);
    let streamed = "";
    for await (const chunk of chatStream.data) streamed += chunk.choices[0]?.delta?.content ?? "";
    outputs.push(streamed);
    const responses = await openai.responses.create({ model: "svc", input: prompt, instructions: MARKER, max_output_tokens: 60 });
    ids.push(responses._request_id!);
    outputs.push(responses.output_text, ...responses.output.filter((o) => o.type === "reasoning").flatMap((o) => o.summary.map((s) => s.text)));
    const responsesStream = await openai.responses.create({ model: "svc", input: [{ role: "user", content: prompt }], stream: true, max_output_tokens: 60 }).withResponse();
    ids.push(responsesStream.request_id!);
    for await (const event of responsesStream.data) if (event.type === "response.output_text.done") outputs.push(event.text);
    const message = await anthropic.messages.create({ model: "claude-sonnet", max_tokens: 60, system: MARKER, messages: [{ role: "user", content: prompt }] });
    ids.push(message._request_id!);
    outputs.push(...message.content.map((b) => (b.type === "text" ? b.text : b.type === "thinking" ? b.thinking : "")));
    const messageStream = anthropic.messages.stream({ model: "claude-haiku", max_tokens: 60, messages: [{ role: "user", content: [{ type: "text", text: prompt }] }] });
    const final = await messageStream.finalMessage();
    ids.push(messageStream.request_id!);
    outputs.push(...final.content.map((b) => (b.type === "text" ? b.text : "")));
    const counted = await anthropic.messages.countTokens({ model: "claude-haiku", messages: [{ role: "user", content: prompt }] });
    expect(counted.input_tokens).toBeGreaterThan(0);

    // The holder sees the records (the console reads the same audit), none with content.
    const list = (await (await holder.send("GET", "/v1/console/audit?limit=100")).json()) as { data: Array<Record<string, unknown>> };
    const byId = new Map(list.data.map((r) => [r.id as string, r]));
    for (const id of ids) expect(byId.has(id), id).toBe(true);
    expect(byId.get(ids[0]!)).toMatchObject({ surface: "chat", model: "svc", session_id: "session-of-alice", status: 200 });
    expect(byId.get(ids[2]!)).toMatchObject({ surface: "responses", path: "/v1/responses" });
    expect(byId.get(ids[4]!)).toMatchObject({ surface: "messages", model: "claude-sonnet", mode: "thinking" });
    expect(byId.get(ids[5]!)).toMatchObject({ surface: "messages", model: "claude-haiku", mode: "fast" });
    expect(list.data.some((r) => r.path === "/v1/messages/count_tokens")).toBe(true);
    expect(JSON.stringify(list)).not.toContain(MARKER);

    // The scan: the marker, and every output long enough to be telling, are nowhere in the data dir.
    const telling = [...new Set(outputs.map((o) => (o ?? "").trim()).filter((o) => o.length >= 12))];
    expect(telling.length).toBeGreaterThan(2);
    expect(filesHolding(MARKER)).toEqual([]);
    for (const text of telling) expect(filesHolding(text), text).toEqual([]);
    // The records are there, so the scan reads the right files.
    expect(filesHolding(ids[0]!).length).toBeGreaterThan(0);
  });

  it("disables the account from the CLI: its keys get 401 at once from the running server; enable and reset", async () => {
    const anthropic = new Anthropic({ apiKey: created.key.key, baseURL: server.url, maxRetries: 0 });
    expect((await anthropic.messages.create({ model: "claude-haiku", max_tokens: 5, messages: [{ role: "user", content: "hi" }] })).type).toBe("message");
    const disabled = runSvc(["accounts", "disable", "alice", "--data-dir", dataDir]);
    expect(disabled.status).toBe(0);
    expect(disabled.stdout).toContain("alice  disabled");
    await expect(anthropic.messages.create({ model: "claude-haiku", max_tokens: 5, messages: [{ role: "user", content: "hi" }] })).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
    expect((await holder.send("GET", "/v1/console/keys")).status).toBe(401);
    expect(runSvc(["accounts", "enable", "alice", "--data-dir", dataDir]).status).toBe(0);
    expect((await anthropic.messages.create({ model: "claude-haiku", max_tokens: 5, messages: [{ role: "user", content: "hi" }] })).type).toBe("message");

    const reset = runSvc(["accounts", "reset-password", "alice", "--data-dir", dataDir]);
    expect(reset.status).toBe(0);
    const temporary = reset.stdout.trim().split("\n").at(-1)!;
    secrets.push(temporary);
    expect((await new Holder().send("POST", "/v1/console/login", { account: "alice", password })).status).toBe(401);
    const again = await new Holder().send("POST", "/v1/console/login", { account: "alice", password: temporary });
    expect(((await again.json()) as { account: { must_change_password: boolean } }).account.must_change_password).toBe(true);

    const missing = runSvc(["accounts", "disable", "nobody", "--data-dir", dataDir]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain("No account named 'nobody'");
    expect(runSvc(["accounts", "explode", "--data-dir", dataDir]).status).toBe(2);
  });

  it("never logs a password or a key, even at debug level", async () => {
    const log = server.output();
    expect(log).toContain("/v1/console/login"); // debug logging did see the requests
    expect(secrets.length).toBeGreaterThanOrEqual(6);
    for (const secret of secrets) expect(log).not.toContain(secret);
    // After the server stops, the database it leaves has no content either.
    expect(await server.stop()).toBe(0);
    expect(filesHolding(MARKER)).toEqual([]);
  });
});
