// Skipped when .cache/upstream/bin/llama-server or .cache/upstream/bin/ggml-rpc-server does not exist (check:
// `ls .cache/upstream/bin`; SVC_TEST_UPSTREAM_BIN names another folder); `npm run upstream:build` builds both.
// The run then warns "Skipping the upstream tests: ..." with the folder. With CI=1 a missing binary fails
// instead (.ci/run builds them first).
// Test (b) of docs/scale-out.md: one llama-server whose model's layers live on two rpc-server workers on
// loopback (a model split across "machines": --rpc A,B -ngl 99), behind `svc serve --upstream`, with the
// official OpenAI and Anthropic clients. Killing a worker at the end shows the layers were there: the upstream
// fails, and the next request gets a clean error in its surface's format.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import { validateJsonAgainstSchema } from "../../server/engine/json-schema-grammar.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";
import { startLlamaServer, startRpcServer, upstreamMissing, type Child } from "../support/upstream-servers.js";

const missing = upstreamMissing();
const suite = describe.skipIf(missing !== null);

suite("a llama-server with its layers on two rpc-server workers", () => {
  const workers: Child[] = [];
  let upstream: Child;
  let server: SvcServer;
  let openai: OpenAI;
  let anthropic: Anthropic;
  const greedy = greedyTexts();

  beforeAll(async () => {
    workers.push(await startRpcServer(), await startRpcServer());
    upstream = await startLlamaServer({ model: inject("tinyModelPath"), slots: 2, contextPerSlot: 4096, rpc: workers.map((w) => `127.0.0.1:${w.port}`) });
    const dataDir = tempDataDir();
    const key = createKey(dataDir);
    server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--upstream", upstream.url] });
    openai = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
    anthropic = new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0 });
  });
  afterAll(async () => {
    if (server) expect(await server.stop()).toBe(0);
    await upstream?.stop("SIGKILL");
    for (const w of workers) await w.stop("SIGKILL");
  });

  it("streams the model's thought and answer (Chat Completions), as the local engine does", async () => {
    const stream = await openai.chat.completions.create({ model: "svc", messages: [{ role: "user", content: "Hello" }], temperature: 0, stream: true });
    let reasoning = "";
    let content = "";
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
      reasoning += delta?.reasoning_content ?? "";
      content += delta?.content ?? "";
    }
    expect(reasoning).toBe(greedy.thought.trim());
    expect(content).toBe(greedy.answer.trim());
  });

  it("forces a tool call with arguments matching its schema (Messages), and answers json_schema", async () => {
    const time: Anthropic.Tool = { name: "get_time", input_schema: { type: "object", properties: { zone: { enum: ["utc", "local"] } }, required: ["zone"] } };
    const res = (await anthropic.messages.create({
      model: "claude-haiku-4-5",
      max_tokens: 200,
      temperature: 0,
      messages: [{ role: "user", content: "What time is it?" }],
      tools: [time],
      tool_choice: { type: "tool", name: "get_time" },
    } as never)) as Anthropic.Message;
    expect(res.stop_reason).toBe("tool_use");
    const call = res.content.find((b): b is Anthropic.ToolUseBlock => b.type === "tool_use")!;
    expect(call.name).toBe("get_time");
    expect(validateJsonAgainstSchema(time.input_schema as Record<string, unknown>, call.input)).toEqual({ valid: true });

    const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false };
    const json = await openai.chat.completions.create({
      model: "svc",
      messages: [{ role: "user", content: "json" }],
      temperature: 0,
      response_format: { type: "json_schema", json_schema: { name: "r", schema, strict: true } },
    });
    expect(validateJsonAgainstSchema(schema, JSON.parse(json.choices[0]!.message.content!))).toEqual({ valid: true });
  });

  it("a worker gone takes the upstream down: the next request is a clean 503 in its surface's format", async () => {
    await workers[0]!.stop("SIGKILL");
    const err = await openai.chat.completions.create({ model: "svc", messages: [{ role: "user", content: "Hello again" }], temperature: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect((err as Error).message).toMatch(/upstream/i);
  });
});
