// Issue 37: the engine runs in a process of its own, so a native crash there leaves the server up. Real
// crashes: the engine process aborts (SIGABRT, as a failed GGML_ASSERT does) in the middle of a stream, or is
// killed (as by the OOM killer) while it loads the model; the directives come from a file the engine process
// reads (SVC_ENGINE_TEST_CRASH_FILE, see server/engine/engine-child.ts).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { afterEach, describe, expect, inject, it } from "vitest";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer | null = null;
afterEach(async () => {
  await server?.stop();
  server = null;
});

async function start(extraArgs: string[] = []): Promise<{ server: SvcServer; key: string; crashFile: string; client: OpenAI }> {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  const crashFile = join(dataDir, "engine-crash");
  server = await startSvc({
    model: inject("tinyModelPath"),
    dataDir,
    args: ["--sequences", "1", "--context-size", "4096", ...extraArgs],
    env: { SVC_ENGINE_TEST_CRASH_FILE: crashFile, SVC_LOG_LEVEL: "info" },
  });
  return { server, key, crashFile, client: new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 }) };
}

interface Health {
  model: { state: string; error: string | null };
  requests: { active: number; queued: number };
}

async function health(url: string): Promise<Health> {
  return (await (await fetch(`${url}/health`)).json()) as Health;
}

async function until(what: string, condition: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await condition()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The data of each SSE event. */
function sse(text: string): Array<Record<string, unknown>> {
  return text
    .split("\n\n")
    .map((b) => b.replace(/^data: /, "").trim())
    .filter((d) => d !== "" && d !== "[DONE]" && !d.startsWith(":"))
    .map((d) => JSON.parse(d) as Record<string, unknown>);
}

function streamChat(url: string, key: string): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "svc", stream: true, temperature: 0, messages: [{ role: "user", content: "Hello" }] }),
  });
}

function rssKb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))!;
  return Number(/\d+/.exec(line)![0]);
}

describe("an engine process that dies", () => {
  it("mid-stream: the stream ends with a clean error, a queued request waits and is served, the server stays up", { timeout: 120_000 }, async () => {
    const { server, key, crashFile, client } = await start();
    const pid = server.process.pid!;
    // The engine dies 3 s after the stream's third event, while the request below waits in the queue.
    writeFileSync(crashFile, "abort-mid-decode 1 3000\n");
    const crashing = streamChat(server.url, key);
    // One sequence: this one waits in the queue while the first runs, and must survive the crash.
    await until("the first request to run", async () => (await health(server.url)).requests.active === 1);
    const queued = client.chat.completions.create({ model: "svc", temperature: 0, messages: [{ role: "user", content: "Hello again" }] });
    await until("the second request to wait", async () => (await health(server.url)).requests.queued === 1);

    const res = await crashing;
    expect(res.status).toBe(200);
    const events = sse(await res.text());
    // Some of the answer came, then the surface's own error frame (not a cut connection, not a 500).
    expect(events.length).toBeGreaterThan(1);
    const error = events.at(-1)!.error as { code: string; message: string; type: string };
    expect(error.code).toBe("engine_restarting");
    expect(error.message).toMatch(/engine process stopped \(signal SIGABRT: svc engine test crash: abort mid-decode\)/);

    const answer = await queued;
    expect(answer.choices[0]!.finish_reason).toBe("stop");
    expect(answer.choices[0]!.message.content).not.toBe("");
    expect((await health(server.url)).model.state).toBe("ready");
    // The same server process throughout, and it says what happened.
    expect(server.process.pid).toBe(pid);
    expect(server.process.exitCode).toBeNull();
    expect(server.output()).toMatch(/\[svc\] error: The engine process stopped \(signal SIGABRT: svc engine test crash: abort mid-decode\)/);
    expect(server.output()).toMatch(/The engine process is running again/);
  });

  it("while restarting, /health says so and new requests get a 503 with Retry-After; killed during the reload, it tries again", { timeout: 120_000 }, async () => {
    const { server, key, crashFile, client } = await start();
    // The crash, then the reload killed (as by the OOM killer), then the next reload works.
    writeFileSync(crashFile, "abort-mid-decode\nexit-during-load\n");
    await (await streamChat(server.url, key)).text();
    const during = await health(server.url);
    expect(during.model.state).toBe("loading");
    expect(during.model.error).toMatch(/engine process stopped .*it is being started again/);
    const refused = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "svc", messages: [{ role: "user", content: "Hi" }] }),
    });
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBeTruthy();
    await until("the engine to be ready again", async () => (await health(server.url)).model.state === "ready");
    expect(server.output()).toMatch(/engine process stopped \(signal SIGKILL while loading the model: svc engine test crash: killed during a model load\)/);
    const answer = await client.chat.completions.create({ model: "svc", temperature: 0, messages: [{ role: "user", content: "Hello" }] });
    expect(answer.choices[0]!.finish_reason).toBe("stop");
  });

  it("three times within a minute: it is not started again, and /health says why with the last native line", { timeout: 120_000 }, async () => {
    const { server, key, crashFile } = await start();
    for (let i = 0; i < 3; i++) {
      await until("a ready engine", async () => (await health(server.url)).model.state === "ready");
      writeFileSync(crashFile, "abort-mid-decode\n");
      await (await streamChat(server.url, key)).text();
    }
    await until("the engine to be given up", async () => (await health(server.url)).model.state === "error");
    const { model } = await health(server.url);
    expect(model.error).toMatch(/stopped 3 times within a minute, so it is not started again\. The last time: signal SIGABRT: svc engine test crash: abort mid-decode/);
    const res = await streamChat(server.url, key);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("model_not_loaded");
    expect(server.process.exitCode).toBeNull();
  });

  it("20 crash-restart cycles leave the server's memory flat", { timeout: 300_000 }, async () => {
    const { server, key, crashFile } = await start(["--engine-restart-limit", "1000"]);
    const pid = server.process.pid!;
    const cycle = async () => {
      writeFileSync(crashFile, "abort-mid-decode\n");
      const events = sse(await (await streamChat(server.url, key)).text());
      expect((events.at(-1)!.error as { code: string }).code).toBe("engine_restarting");
      await until("the engine to be ready again", async () => (await health(server.url)).model.state === "ready");
    };
    for (let i = 0; i < 3; i++) await cycle();
    const before = rssKb(pid);
    for (let i = 0; i < 17; i++) await cycle();
    const after = rssKb(pid);
    // Flat: a leak of anything per crash (listeners, buffers, the old process's handles) would add up here.
    expect(after - before, `RSS ${before} kB -> ${after} kB`).toBeLessThan(20_000);
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "svc", temperature: 0, messages: [{ role: "user", content: "Hi" }] }),
    });
    expect(res.status).toBe(200);
  });
});
