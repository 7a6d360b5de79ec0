// The scheduler and limits on the real server and engine (one sequence, an account limit of 2), driven by the
// official clients and raw HTTP: rate headers on all three surfaces, the (N+1)th concurrent stream refused
// with 429, a queued client that leaves, X-Timezone, and schemas refused with no model loaded.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let key: string;
const LIMIT = 2;

beforeAll(async () => {
  const dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({
    model: inject("tinyModelPath"),
    dataDir,
    args: ["--sequences", "1", "--context-size", "4096", "--concurrency-limit", String(LIMIT)],
  });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

const user = (content: string) => [{ role: "user" as const, content }];
/** A schema that needs well over a thousand tokens: keeps the only sequence busy for a while. */
const longSchema = { type: "object", properties: { xs: { type: "array", items: { type: "integer" }, minItems: 800 } }, required: ["xs"] };

function longStream(signal?: AbortSignal): Promise<Response> {
  return fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: user("numbers"), stream: true, reasoning_effort: "none", response_format: { type: "json_schema", json_schema: { name: "n", schema: longSchema } } }),
    signal,
  });
}

async function health(): Promise<{ requests: { active: number; queued: number } }> {
  return (await (await fetch(`${server.url}/health`)).json()) as { requests: { active: number; queued: number } };
}

async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await condition()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function expectRateHeaders(headers: Headers, remaining: number): void {
  expect(headers.get("x-ratelimit-limit")).toBe(String(LIMIT));
  expect(headers.get("x-ratelimit-remaining")).toBe(String(remaining));
  expect(Number(headers.get("x-ratelimit-reset"))).toBeGreaterThanOrEqual(0);
}

describe("rate headers on every surface", () => {
  it("Chat Completions, Responses and Messages, streamed or not, through the official clients", async () => {
    const openai = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
    const anthropic = new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0 });

    const chat = await openai.chat.completions.create({ model: "svc", messages: user("Hi"), reasoning_effort: "none", max_tokens: 8 }).withResponse();
    expectRateHeaders(chat.response.headers, LIMIT);
    const chatStream = await openai.chat.completions.create({ model: "svc", messages: user("Hi"), reasoning_effort: "none", max_tokens: 8, stream: true }).withResponse();
    // Sent before the first event, while the stream itself holds one place.
    expectRateHeaders(chatStream.response.headers, LIMIT - 1);
    for await (const _ of chatStream.data) void _;

    const responses = await openai.responses.create({ model: "svc", input: "Hi", reasoning: { effort: "none" } as never, max_output_tokens: 8 }).withResponse();
    expectRateHeaders(responses.response.headers, LIMIT);
    const responsesStream = await openai.responses.create({ model: "svc", input: "Hi", max_output_tokens: 8, stream: true }).withResponse();
    expectRateHeaders(responsesStream.response.headers, LIMIT - 1);
    for await (const _ of responsesStream.data) void _;

    const messages = await anthropic.messages.create({ model: "claude-haiku-4-5", max_tokens: 8, messages: user("Hi") }).withResponse();
    expectRateHeaders(messages.response.headers, LIMIT);
    const messagesStream = await anthropic.messages.create({ model: "claude-haiku-4-5", max_tokens: 8, messages: user("Hi"), stream: true }).withResponse();
    expectRateHeaders(messagesStream.response.headers, LIMIT - 1);
    for await (const _ of messagesStream.data) void _;
  });
});

describe("the concurrency limit and the queue", () => {
  it("N+1 concurrent streams on an account limited to N: N are served, one gets 429 with Retry-After and the rate headers", async () => {
    const first = await longStream();
    expect(first.status).toBe(200);
    const reader = first.body!.getReader();
    await reader.read();
    // The second waits for the only sequence (its headers come once it starts, or at the first keep-alive).
    const second = longStream();
    await until(async () => (await health()).requests.queued === 1, "the second stream to queue");

    const refused = await longStream();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expectRateHeaders(refused.headers, 0);
    expect(Number(refused.headers.get("x-ratelimit-reset"))).toBeGreaterThanOrEqual(1);
    const body = (await refused.json()) as { error: { type: string; code: string; message: string } };
    expect(body.error).toMatchObject({ type: "rate_limit_error", code: "concurrency_limit_exceeded" });

    // The official client sees a RateLimitError carrying the same headers.
    const openai = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
    const err = await openai.chat.completions.create({ model: "svc", messages: user("Hi") }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).headers.get("retry-after")).toMatch(/^\d+$/);

    // Both admitted streams finish.
    let text = "";
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += new TextDecoder().decode(chunk.value);
    expect(text).toContain("data: [DONE]");
    const secondRes = await second;
    expect(secondRes.status).toBe(200);
    expect(await secondRes.text()).toContain("data: [DONE]");
  });

  it("a queued client that disconnects is gone from the queue at once and frees its place", async () => {
    const first = await longStream();
    const reader = first.body!.getReader();
    await reader.read();
    const controller = new AbortController();
    const waiting = longStream(controller.signal).catch((e: unknown) => e);
    await until(async () => (await health()).requests.queued === 1, "the second stream to queue");
    controller.abort();
    expect(await waiting).toBeInstanceOf(Error);
    await until(async () => (await health()).requests.queued === 0, "the queue to empty");
    // Its place is free again while the first still runs: a new request is admitted (and queued), not refused.
    const third = longStream();
    await until(async () => (await health()).requests.queued === 1, "the third stream to queue");
    await reader.cancel();
    expect((await third).status).toBe(200);
    await (await third).body?.cancel();
    await until(async () => (await health()).requests.active === 0, "the server to be idle");
  });
});

describe("X-Timezone", () => {
  it("an unknown zone is a 400 naming the header on each surface; a valid one is accepted", async () => {
    const chat = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-timezone": "Atlantis/Capital" },
      body: JSON.stringify({ messages: user("Hi"), max_tokens: 4 }),
    });
    expect(chat.status).toBe(400);
    expect(((await chat.json()) as { error: { param: string } }).error.param).toBe("X-Timezone");
    const messages = await fetch(`${server.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json", "x-timezone": "Atlantis/Capital" },
      body: JSON.stringify({ model: "svc", max_tokens: 4, messages: user("Hi") }),
    });
    expect(messages.status).toBe(400);
    expect(((await messages.json()) as { error: { message: string } }).error.message).toContain("X-Timezone");
    const ok = await fetch(`${server.url}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-timezone": "Asia/Tokyo" },
      body: JSON.stringify({ input: "Hi", max_output_tokens: 4, reasoning: { effort: "none" } }),
    });
    expect(ok.status).toBe(200);
  });
});

describe("with no model loaded", () => {
  it("a bad json_schema is a 400, not the 503 a good request gets", async () => {
    const dataDir = tempDataDir();
    const bare = await startSvc({ dataDir });
    try {
      const bareKey = createKey(dataDir);
      const client = new OpenAI({ apiKey: bareKey, baseURL: `${bare.url}/v1`, maxRetries: 0 });
      const bad = await client.chat.completions
        .create({
          model: "svc",
          messages: user("Hi"),
          response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", if: { required: ["a"] }, then: { required: ["b"] } } } },
        })
        .catch((e: unknown) => e);
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
      expect((bad as InstanceType<typeof OpenAI.BadRequestError>).code).toBe("invalid_schema");
      const good = await client.chat.completions.create({ model: "svc", messages: user("Hi") }).catch((e: unknown) => e);
      expect(good).toBeInstanceOf(OpenAI.InternalServerError);
      expect((good as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    } finally {
      await bare.stop();
    }
  });
});
