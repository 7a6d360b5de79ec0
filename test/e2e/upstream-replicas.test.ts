// Skipped when .cache/upstream/bin/llama-server or .cache/upstream/bin/ggml-rpc-server does not exist (check:
// `ls .cache/upstream/bin`; SVC_TEST_UPSTREAM_BIN names another folder); `npm run upstream:build` builds both.
// The run then warns "Skipping the upstream tests: ..." with the folder. With CI=1 a missing binary fails
// instead (.ci/run builds them first).
// Test (c) of docs/scale-out.md: two llama-server replicas behind `svc serve --upstream A,B`, with the official
// Anthropic and OpenAI clients. Slots of both serve at once; a conversation's next turn goes where its prefix
// is cached; one replica killed mid-stream ends that stream with a clean error in the surface's format, new
// requests go to the other, and it serves again once it is back on its port. Also the upstream's own word on
// features it lacks (a clear 400), /v1/models' note, and count_tokens.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import { join } from "node:path";
import { ensurePeerModel } from "../../bench/peer-model.js";
import { createKey, ROOT, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";
import { startLlamaServer, upstreamMissing, type Child } from "../support/upstream-servers.js";

const missing = upstreamMissing();
const suite = describe.skipIf(missing !== null);

type Health = { model: { sequences: number; upstreams?: Array<{ url: string; healthy: boolean; slots: number; error: string | null }> } };

suite("two llama-server replicas behind --upstream", () => {
  const replicas: Child[] = [];
  let server: SvcServer;
  let anthropic: Anthropic;
  let openai: OpenAI;
  const greedy = greedyTexts();
  const health = async () => (await (await fetch(`${server.url}/health`)).json()) as Health;

  beforeAll(async () => {
    for (let i = 0; i < 2; i++) replicas.push(await startLlamaServer({ model: inject("tinyModelPath"), slots: 2, contextPerSlot: 32768 }));
    const dataDir = tempDataDir();
    const key = createKey(dataDir);
    server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--upstream", replicas.map((r) => r.url).join(",")] });
    anthropic = new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0 });
    openai = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    if (server) expect(await server.stop()).toBe(0);
    for (const r of replicas) await r.stop();
  });

  it("serves on the slots of both replicas, and says the model is theirs", async () => {
    const h = await health();
    expect(h.model.sequences).toBe(4);
    expect(h.model.upstreams!.map((u) => [u.url, u.healthy, u.slots])).toEqual(replicas.map((r) => [r.url, true, 2]));
    const models = await openai.models.list();
    expect((models.data[0] as unknown as { upstream: { replicas: number; note: string } }).upstream).toMatchObject({ replicas: 2, healthy: 2 });
    const answers = await Promise.all(
      Array.from({ length: 4 }, (_, i) => anthropic.messages.create({ model: "claude-haiku-4-5", max_tokens: 50, temperature: 0, messages: [{ role: "user", content: `Hello ${i}` }] } as never)),
    );
    for (const a of answers as Anthropic.Message[]) expect(a.content.map((b) => (b as Anthropic.TextBlock).text)).toEqual([greedy.answer.trim()]);
  });

  it("sends a conversation's next turn where its prefix is cached; count_tokens answers", async () => {
    const system = `You are a careful assistant. ${"Context line about the project. ".repeat(60)}`;
    const first = (await anthropic.messages.create({ model: "claude-haiku-4-5", max_tokens: 30, temperature: 0, system, messages: [{ role: "user", content: "Hi" }] } as never)) as Anthropic.Message;
    // count_tokens is the pipeline's estimate (docs/api.md), the same with any engine.
    const counted = await anthropic.messages.countTokens({ model: "claude-haiku-4-5", system, messages: [{ role: "user", content: "Hi" }] });
    expect(counted.input_tokens).toBeGreaterThan(100);
    const firstPrompt = first.usage.input_tokens + (first.usage.cache_read_input_tokens ?? 0);
    expect(firstPrompt).toBeGreaterThan(1000);
    // Other conversations in between, on both replicas.
    await Promise.all(Array.from({ length: 3 }, (_, i) => anthropic.messages.create({ model: "claude-haiku-4-5", max_tokens: 20, temperature: 0, messages: [{ role: "user", content: `Other ${i}` }] } as never)));
    const second = (await anthropic.messages.create({
      model: "claude-haiku-4-5",
      max_tokens: 30,
      temperature: 0,
      system,
      messages: [
        { role: "user", content: "Hi" },
        { role: "assistant", content: first.content.map((b) => (b as Anthropic.TextBlock).text).join("") },
        { role: "user", content: "And then?" },
      ],
    } as never)) as Anthropic.Message;
    // Everything up to the new turn came from the replica's KV cache.
    expect(second.usage.cache_read_input_tokens).toBeGreaterThan(firstPrompt - 5);
  });

  it("refuses token probabilities under a grammar with a clear 400 (llama-server scores before its grammar)", async () => {
    const err = await openai.chat.completions
      .create({ model: "svc", messages: [{ role: "user", content: "json" }], logprobs: true, response_format: { type: "json_object" } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).code).toBe("upstream_unsupported");
    const free = await openai.chat.completions.create({ model: "svc", messages: [{ role: "user", content: "Hi" }], logprobs: true, top_logprobs: 2, temperature: 0, reasoning_effort: "none" });
    const logprobs = free.choices[0]!.logprobs!.content!;
    expect(logprobs.length).toBeGreaterThan(0);
    for (const t of logprobs) {
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(t.top_logprobs.length).toBe(2);
    }
  });

  it("a replica killed mid-stream: that stream ends with a clean error, others go on, it comes back", async () => {
    // On bench:peer's generated model (milliseconds per token on one thread, where the tiny model's whole answer
    // takes a fraction of a second), with a forced call of 400 integers: seconds of stream to kill one in.
    const model = ensurePeerModel(join(ROOT, ".cache", "peer", "model.gguf"));
    const slow = [await startLlamaServer({ model, slots: 1, contextPerSlot: 4096 }), await startLlamaServer({ model, slots: 1, contextPerSlot: 4096 })];
    replicas.push(...slow);
    const dataDir = tempDataDir();
    const key = createKey(dataDir);
    const front = await startSvc({ model, dataDir, args: ["--upstream", slow.map((r) => r.url).join(",")] });
    const client = new Anthropic({ apiKey: key, baseURL: front.url, maxRetries: 0 });
    const frontHealth = async () => (await (await fetch(`${front.url}/health`)).json()) as Health;
    try {
      const stream = client.messages.stream({
        model: "claude-haiku-4-5",
        max_tokens: 3800,
        messages: [{ role: "user", content: "List numbers." }],
        tools: [{ name: "numbers", input_schema: { type: "object", properties: { xs: { type: "array", items: { type: "integer" }, minItems: 400, maxItems: 400 } }, required: ["xs"] } }],
        tool_choice: { type: "tool", name: "numbers" },
      });
      let deltas = 0;
      let killed: Child | null = null;
      const failure = await (async () => {
        for await (const event of stream) {
          if (event.type === "content_block_delta") deltas++;
          // The call's arguments have begun (hundreds of tokens still to come): kill the replica writing them
          // at once. (Killed later, a loaded machine could let the client read on after the server had all
          // the arguments, and the stream would end well.)
          if (event.type === "content_block_delta" && !killed) {
            // The replica whose slot runs it.
            for (const r of slow) {
              const slots = (await (await fetch(`${r.url}/slots`)).json()) as Array<{ is_processing: boolean }>;
              if (slots.some((x) => x.is_processing)) killed = r;
            }
            await killed!.stop("SIGKILL");
          }
        }
        // The SDK's MessageStream ends its iteration quietly when the error comes while no read is waiting
        // (here, during the kill above); the error is then what done() rejects with, as a user reads it.
        await stream.done();
        return null;
      })().catch((e: unknown) => e);
      expect(killed).not.toBeNull();
      // Cut off in the middle of the arguments: far fewer deltas than the 400 integers need.
      expect(deltas).toBeLessThan(200);
      expect(failure).toBeInstanceOf(Anthropic.APIError);
      expect((failure as Error).message).toMatch(/upstream/i);

      // New requests go to the replica left.
      const h = await frontHealth();
      expect(h.model.upstreams!.find((u) => u.url === killed!.url)!.healthy).toBe(false);
      expect(h.model.sequences).toBe(1);
      const after = (await client.messages.create({ model: "claude-haiku-4-5", max_tokens: 8, messages: [{ role: "user", content: "Hello" }] } as never)) as Anthropic.Message;
      expect(after.usage.output_tokens).toBeGreaterThan(0);

      // Back on its port: healthy again within the probe interval, and serving.
      const index = replicas.indexOf(killed!);
      replicas[index] = await startLlamaServer({ model, slots: 1, contextPerSlot: 4096, port: killed!.port });
      const deadline = Date.now() + 15_000;
      while (Date.now() < deadline && (await frontHealth()).model.sequences !== 2) await new Promise((r) => setTimeout(r, 200));
      expect((await frontHealth()).model.upstreams!.every((u) => u.healthy)).toBe(true);
      const again = await Promise.all(
        [0, 1].map((i) => client.messages.create({ model: "claude-haiku-4-5", max_tokens: 8, messages: [{ role: "user", content: `Back ${i}` }] } as never)),
      );
      expect(again).toHaveLength(2);
    } finally {
      expect(await front.stop()).toBe(0);
    }
  });
});
