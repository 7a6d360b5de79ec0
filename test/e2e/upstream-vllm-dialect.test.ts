// The vLLM dialect of the upstream engine against a small fake HTTP server that answers with vLLM's published
// shapes (its OpenAI-compatible server: GET /v1/models with max_model_len, POST /tokenize, POST /v1/completions
// streamed as text_completion chunks with logprobs whose tokens are "token_id:N" under
// return_tokens_as_token_ids, a finish chunk, a usage chunk with prompt_tokens_details.cached_tokens, then
// [DONE]). vLLM itself needs a GPU host (docs/scale-out.md has its setup); this checks what we send and read.
import { createServer, type IncomingMessage, type Server } from "node:http";
import { getLlama, type LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { greedyTexts } from "../../resources/test-model/tiny-model.js";
import type { EngineEvent, EngineRequest } from "../../server/engine/types.js";
import { UpstreamEngine } from "../../server/engine/upstream-engine.js";
import { engineRequest } from "../support/engine-request.js";

let fake: Server;
let url: string;
let vocab: LlamaModel;
const requests: Array<{ path: string; body: Record<string, unknown> }> = [];
const greedy = greedyTexts();

async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  let text = "";
  for await (const piece of req) text += String(piece);
  return text ? (JSON.parse(text) as Record<string, unknown>) : {};
}

/** vLLM's streamed completion: one chunk per token, then the finish, the usage, and [DONE]. */
function completionStream(ids: number[], promptTokens: number): string {
  const base = { id: "cmpl-fake", object: "text_completion", created: 1, model: "tiny" };
  const chunks = ids.map((id, i) => ({
    ...base,
    choices: [
      {
        index: 0,
        text: "",
        logprobs: { text_offset: [i], token_logprobs: [-0.25], tokens: [`token_id:${id}`], top_logprobs: [{ [`token_id:${id}`]: -0.25, "token_id:4": -1.5 }] },
        finish_reason: null,
        stop_reason: null,
      },
    ],
    usage: null,
  }));
  chunks.push({ ...base, choices: [{ index: 0, text: "", logprobs: null as never, finish_reason: "stop" as never, stop_reason: null }], usage: null });
  const usage = { ...base, choices: [], usage: { prompt_tokens: promptTokens, total_tokens: promptTokens + ids.length, completion_tokens: ids.length, prompt_tokens_details: { cached_tokens: 16 } } };
  return [...chunks, usage].map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n";
}

beforeAll(async () => {
  const llama = await getLlama({ gpu: false, build: "never" });
  vocab = await llama.loadModel({ modelPath: inject("tinyModelPath"), vocabOnly: true });
  const answer = vocab.tokenize(greedy.answer, false) as unknown as number[];
  fake = createServer(async (req, res) => {
    const body = await readBody(req);
    requests.push({ path: req.url!, body });
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(value));
    };
    if (req.url === "/health") return void res.writeHead(200).end();
    if (req.url === "/v1/models") return json(200, { object: "list", data: [{ id: "tiny", object: "model", owned_by: "vllm", root: "/models/tiny.gguf", max_model_len: 4096 }] });
    if (req.url === "/tokenize") {
      const tokens = vocab.tokenize(String(body.prompt), true) as unknown as number[];
      return json(200, { count: tokens.length, max_model_len: 4096, tokens });
    }
    if (req.url === "/v1/completions") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      return void res.end(completionStream(answer, (body.prompt as number[]).length));
    }
    json(404, { detail: "Not Found" });
  });
  await new Promise<void>((resolve) => fake.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(fake.address() as { port: number }).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => fake.close(resolve));
  await vocab?.dispose();
});

const request = engineRequest;

async function run(engine: UpstreamEngine, req: EngineRequest): Promise<EngineEvent[]> {
  const events: EngineEvent[] = [];
  for await (const e of engine.generate(req, new AbortController().signal)) events.push(e);
  return events;
}

describe("the vLLM dialect", () => {
  it("is found from /v1/models, checks the tokenizer, and generates from token ids with logprobs and cached tokens", async () => {
    const engine = await UpstreamEngine.load({ modelPath: inject("tinyModelPath"), upstreams: [{ url }] });
    try {
      const model = engine.status().model!;
      expect(model.contextSize).toBe(4096);
      expect(model.upstreams).toEqual([{ url, healthy: true, slots: 8, contextSize: 4096, model: "/models/tiny.gguf", error: null }]);
      expect(requests.map((r) => r.path)).toEqual(expect.arrayContaining(["/props", "/v1/models", "/tokenize"]));

      const events = await run(engine, request({ tokenProbabilities: { top: 2 } }));
      const done = events.at(-1) as Extract<EngineEvent, { type: "done" }>;
      expect(done.outcome.text).toBe(greedy.answer.trim());
      expect(done.outcome.stopReason).toBe("end_turn");
      expect(done.outcome.usage.cachedTokens).toBe(16);
      expect(done.outcome.logprobs!.map((l) => l.logprob)).toEqual(done.outcome.logprobs!.map(() => -0.25));
      expect(done.outcome.logprobs![0]!.top.map((t) => t.logprob)).toEqual([-0.25, -1.5]);

      const sent = requests.findLast((r) => r.path === "/v1/completions")!.body;
      expect(sent).toMatchObject({ model: "tiny", stream: true, stream_options: { include_usage: true }, return_tokens_as_token_ids: true, skip_special_tokens: false, logprobs: 2, temperature: 0 });
      expect((sent.prompt as number[]).every((t) => Number.isInteger(t))).toBe(true);
      expect(sent.max_tokens).toBe(4096 - (sent.prompt as number[]).length);
    } finally {
      await engine.close();
    }
  });

  it("sends our grammar as structured_outputs.grammar and bans as logit_bias -100", async () => {
    const engine = await UpstreamEngine.load({ modelPath: inject("tinyModelPath"), upstreams: [{ url }] });
    try {
      await run(engine, request({ output: { type: "json_schema", schema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] }, strict: true } }));
      const sent = requests.findLast((r) => r.path === "/v1/completions")!.body as { structured_outputs?: { grammar?: string }; logit_bias?: Record<string, number> };
      expect(sent.structured_outputs?.grammar).toMatch(/^root ::= /m);
      expect(Object.values(sent.logit_bias ?? {}).every((v) => v === -100)).toBe(true);
      expect(Object.keys(sent.logit_bias ?? {}).length).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  });
});
