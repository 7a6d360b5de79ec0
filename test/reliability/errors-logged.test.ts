// Every 5xx reaches the server's log with its request id at the default log level (issue 17: 500s left no
// log line): thrown before a response, after a stream committed (the reply is hijacked then), on each
// surface, and the 503s for no model and a model loading.
import { connect, type AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { EngineHost } from "../../server/engine/engine-host.js";
import type { Engine } from "../../server/engine/types.js";
import { consoleLog } from "../../server/index.js";
import { FakeEngine } from "../support/fake-engine.js";
import { buildTestApp, type TestApp } from "../support/test-app.js";

let t: TestApp | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
  vi.restoreAllMocks();
});

/** The app with the log `svc serve` uses by default (level info, to stderr), stderr captured. */
async function appLogging(engine: Engine | EngineHost | null): Promise<{ test: TestApp; lines: string[] }> {
  const lines: string[] = [];
  vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => void lines.push(args.join(" ")));
  t = await buildTestApp(engine, { log: consoleLog("info") });
  return { test: t, lines };
}

const chat = (test: TestApp, body: object) =>
  test.app.inject({ method: "POST", url: "/v1/chat/completions", headers: { authorization: `Bearer ${test.key}` }, payload: body });
const messages = (test: TestApp, body: object) =>
  test.app.inject({ method: "POST", url: "/v1/messages", headers: { "x-api-key": test.key }, payload: body });
const chatBody = { messages: [{ role: "user", content: "Hi" }] };
const messagesBody = { model: "svc", max_tokens: 8, messages: [{ role: "user", content: "Hi" }] };

function expectLogged(lines: string[], requestId: unknown, status: number): void {
  const line = lines.find((l) => l.includes(String(requestId)));
  expect(line, lines.join("\n")).toBeDefined();
  expect(line).toMatch(/^\[svc\] error: /);
  if (status !== 200) expect(line).toContain(`→ ${status}`);
}

describe("every 5xx is logged with its request id at the default level", () => {
  it("an engine failure before any response: 500 on Chat and on Messages", async () => {
    const { test, lines } = await appLogging(new FakeEngine(() => new Error("engine exploded")));
    const a = await chat(test, chatBody);
    expect(a.statusCode).toBe(500);
    expectLogged(lines, a.headers["x-request-id"], 500);
    const b = await messages(test, messagesBody);
    expect(b.statusCode).toBe(500);
    expectLogged(lines, b.headers["x-request-id"], 500);
    expect(lines.join("\n")).toContain("engine exploded");
  });

  it("a failure after a stream committed (the reply is hijacked): the error frame goes out and the log has it", async () => {
    const engine = new FakeEngine();
    engine.failAfter = 2;
    const { test, lines } = await appLogging(engine);
    for (const res of [await chat(test, { ...chatBody, stream: true }), await messages(test, { ...messagesBody, stream: true })]) {
      expect(res.statusCode).toBe(200);
      expect(res.body).toContain("error");
      const line = lines.find((l) => l.includes(String(res.headers["x-request-id"])));
      expect(line, lines.join("\n")).toMatch(/^\[svc\] error: req_\w+ POST \/v1\/(chat\/completions|messages): stream failed: Error: engine exploded/);
    }
  });

  it("503 for no model and for a model loading, streamed or not", async () => {
    const none = await appLogging(null);
    for (const res of [await chat(none.test, chatBody), await chat(none.test, { ...chatBody, stream: true })]) {
      expect(res.statusCode).toBe(503);
      expectLogged(none.lines, res.headers["x-request-id"], 503);
    }
    await t!.close();
    t = null;
    let finish: () => void = () => undefined;
    const host = new EngineHost({
      precheck: async () => undefined,
      loader: () => new Promise<Engine>((resolve) => (finish = () => resolve(new FakeEngine()))),
    });
    const loading = host.load({ modelPath: "/m/slow.gguf" });
    const { test, lines } = await appLogging(host);
    const res = await messages(test, messagesBody);
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ error: { type: "overloaded_error" } });
    expectLogged(lines, res.headers["x-request-id"], 503);
    finish();
    await loading;
  });

  it("503 for a request that arrives while the server shuts down, in the surface's format", async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const engine = new FakeEngine();
    const original = engine.generate.bind(engine);
    engine.generate = async function* (request, signal) {
      await held;
      yield* original(request, signal);
    };
    const { test, lines } = await appLogging(engine);
    await test.app.listen({ host: "127.0.0.1", port: 0 });
    const port = (test.app.server.address() as AddressInfo).port;
    // One connection: a chat request the engine holds, then a Messages request pipelined behind it, which
    // the server reads only once the first is answered, by then closing.
    const socket = connect({ host: "127.0.0.1", port });
    let received = "";
    socket.on("data", (d: Buffer) => (received += d.toString()));
    const ended = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    const request = (path: string, auth: string, body: object) =>
      `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${auth}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(JSON.stringify(body))}\r\n\r\n${JSON.stringify(body)}`;
    socket.write(request("/v1/chat/completions", `Authorization: Bearer ${test.key}`, chatBody));
    await new Promise((r) => setTimeout(r, 100));
    const closing = test.app.close();
    socket.write(request("/v1/messages", `x-api-key: ${test.key}`, messagesBody));
    await new Promise((r) => setTimeout(r, 50));
    release();
    await closing;
    await ended;
    const responses = received.split(/(?=HTTP\/1\.1 )/);
    expect(responses).toHaveLength(2);
    expect(responses[0]).toMatch(/^HTTP\/1\.1 200 /);
    expect(responses[1]).toMatch(/^HTTP\/1\.1 503 /);
    expect(responses[1]).toMatch(/retry-after: 5/i);
    expect(responses[1]).toContain('"type":"overloaded_error","message":"The server is shutting down; retry in a moment."');
    const id = /x-request-id: (req_\w+)/i.exec(responses[1]!)![1];
    expectLogged(lines, id, 503);
  });
});
