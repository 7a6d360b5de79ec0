// Glassbox end to end: `svc serve` on the generated model, driven with the official openai client. The tiny
// model is a Markov chain whose logits are known (resources/test-model/tiny-model.ts), so the log-probabilities
// the server reports are checked against the model's own softmax, not just for being plausible.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { buildTransitions, buildVocab } from "../../resources/test-model/tiny-model.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let client: OpenAI;
const user = (content: string) => [{ role: "user" as const, content }];
const vocab = buildVocab();
const rows = buildTransitions(vocab);

/** log softmax(rows[prev])[next] at temperature 1: the model's own log-probability. */
function modelLogprob(prev: number, next: number): number {
  const row = rows[prev]!;
  let max = -Infinity;
  for (const l of row) max = Math.max(max, l);
  let sum = 0;
  for (const l of row) sum += Math.exp(l - max);
  return row[next]! - max - Math.log(sum);
}
/** A token's id from its text: words, special tokens, or single bytes (written <0xNN> in the vocabulary). */
function tokenId(text: string): number {
  const word = text.replace(/^ /, "\u2581");
  if (vocab.tokens.includes(word)) return vocab.id(word);
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length !== 1) throw new Error(`no single token for ${JSON.stringify(text)}`);
  return vocab.id(`<0x${bytes[0]!.toString(16).toUpperCase().padStart(2, "0")}>`);
}

interface Trace {
  confidence: number | null;
  confidence_method: string | null;
  scored_tokens: number;
  weakest_spans: Array<{ text: string; confidence: number; token_offset: number; tokens: number }>;
  stop_reason: string;
  model_stop_reason: string;
  reasoning_budget: number;
  refusal_mode: string;
  refusal: string | null;
  cached_tokens: number;
}
interface Complexity {
  score: number;
  reasoning_cap: number;
  reasoning_budget: number;
  reasoning_tokens: number;
}
type Extended = OpenAI.ChatCompletion & { svc_trace?: Trace; svc_complexity: Complexity; session_id?: string };
type ChunkExt = OpenAI.ChatCompletionChunk & { svc_trace?: Trace; svc_complexity?: Complexity };

async function chat(params: Record<string, unknown>): Promise<Extended> {
  return (await client.chat.completions.create({ model: "svc", messages: user("Hello"), temperature: 0, ...params } as never)) as unknown as Extended;
}

async function chatStream(params: Record<string, unknown>): Promise<ChunkExt[]> {
  const stream = (await client.chat.completions.create({ model: "svc", messages: user("Hello"), temperature: 0, ...params, stream: true } as never)) as unknown as AsyncIterable<ChunkExt>;
  const chunks: ChunkExt[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

/** A schema that leaves the model one answer: every token but optional whitespace is forced. */
const forcedSchema = {
  type: "json_schema",
  json_schema: { name: "pick", strict: true, schema: { type: "object", properties: { colour: { type: "string", enum: ["blue"] } }, required: ["colour"], additionalProperties: false } },
};

beforeAll(async () => {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
  client = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

describe("svc_trace and confidence", () => {
  it("has no trace without glassbox, and svc_complexity on every response, streamed or not", async () => {
    const plain = await chat({});
    expect(plain).not.toHaveProperty("svc_trace");
    expect(plain.choices[0]!.logprobs).toBeNull();
    expect(plain.svc_complexity).toMatchObject({ reasoning_cap: 4096, reasoning_tokens: 5 });
    const chunks = await chatStream({});
    const last = chunks.at(-1)!;
    expect(last.svc_complexity).toMatchObject({ reasoning_cap: 4096 });
    expect(chunks.some((c) => "svc_trace" in c)).toBe(false);
    const response = (await client.responses.create({ model: "svc", input: "Hello", temperature: 0 })) as unknown as { svc_complexity: Complexity };
    expect(response.svc_complexity).toMatchObject({ reasoning_cap: 4096 });
    expect(response).not.toHaveProperty("svc_trace");
  });

  it("confidence is null when off, and a number in [0, 1] from the model's probabilities when on", async () => {
    const off = await chat({ glassbox: { confidence: false } });
    expect(off.svc_trace).toMatchObject({ confidence: null, confidence_method: null, stop_reason: "end_turn" });
    const on = await chat({ glassbox: {} });
    const trace = on.svc_trace!;
    expect(trace.confidence_method).toBe("geometric_mean");
    expect(trace.confidence).toBeGreaterThan(0);
    expect(trace.confidence).toBeLessThanOrEqual(1);
    // The answer is six words; confidence is their geometric mean under the model (computed here from the
    // model's logit table), so the server's number is the model's and not a sampler artefact.
    const withLogprobs = await chat({ glassbox: {}, logprobs: true });
    const tokens = withLogprobs.choices[0]!.logprobs!.content!;
    expect(tokens.map((t) => t.token).join("").trim()).toBe(withLogprobs.choices[0]!.message.content);
    expect(trace.scored_tokens).toBe(tokens.length);
    const mean = tokens.reduce((s, t) => s + t.logprob, 0) / tokens.length;
    expect(trace.confidence).toBeCloseTo(Math.exp(mean), 3);
    for (let i = 1; i < tokens.length; i++)
      expect(tokens[i]!.logprob).toBeCloseTo(modelLogprob(tokenId(tokens[i - 1]!.token), tokenId(tokens[i]!.token)), 3);
    expect(trace.weakest_spans.length).toBeGreaterThan(0);
    expect(trace.weakest_spans[0]!.confidence).toBeLessThanOrEqual(trace.confidence!);
  });

  it("gives a forced (low-entropy) answer a higher confidence than free text (high entropy)", async () => {
    const free = (await chat({ glassbox: {} })).svc_trace!.confidence!;
    const forcedRes = await chat({ glassbox: {}, response_format: forcedSchema });
    expect(JSON.parse(forcedRes.choices[0]!.message.content!)).toEqual({ colour: "blue" });
    const forced = forcedRes.svc_trace!.confidence!;
    expect(free).toBeLessThan(0.8);
    expect(forced).toBeGreaterThan(0.95);
    expect(forced - free).toBeGreaterThan(0.2);
  });

  it("a threshold above the answer's confidence finishes low_confidence, with the answer", async () => {
    const res = await chat({ glassbox: { threshold: 0.95 } });
    expect(res.choices[0]!.finish_reason).toBe("low_confidence");
    expect(res.choices[0]!.message.content).not.toBe("");
    expect(res.svc_trace).toMatchObject({ stop_reason: "low_confidence", model_stop_reason: "end_turn" });
    const passing = await chat({ glassbox: { threshold: 0.05 } });
    expect(passing.choices[0]!.finish_reason).toBe("stop");
  });

  it("below the hard cutoff it abstains: no answer, streamed or not", async () => {
    const res = await chat({ glassbox: { threshold: 0.97, abstain_below: 0.95 } });
    expect(res.choices[0]!.finish_reason).toBe("abstained");
    expect(res.choices[0]!.message.content).toBe("");
    expect(res.svc_trace!.confidence).toBeLessThan(0.95);
    const chunks = await chatStream({ glassbox: { abstain_below: 0.95 } });
    expect(chunks.some((c) => c.choices[0]?.delta?.content)).toBe(false);
    expect(chunks.find((c) => c.choices[0]?.finish_reason)!.choices[0]!.finish_reason).toBe("abstained");
    // Above the cutoff the held-back answer is sent whole before the finish.
    const kept = await chatStream({ glassbox: { abstain_below: 0.05 } });
    const plain = (await chat({})).choices[0]!.message.content;
    expect(kept.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(plain);
  });
});

describe("logprobs", () => {
  const sampled = { temperature: 1, seed: 1234, logprobs: true, top_logprobs: 5, reasoning_effort: "none", max_tokens: 24 };

  it("are equal streamed and not, for a seeded request, each <= 0 with top_logprobs sorted", async () => {
    const whole = await chat(sampled);
    const content = whole.choices[0]!.logprobs!.content!;
    expect(content.length).toBeGreaterThan(1);
    const chunks = await chatStream(sampled);
    const streamed = chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(whole.choices[0]!.message.content);
    expect(streamed).toEqual(content);
    for (const t of content) {
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(t.bytes).toEqual([...Buffer.from(t.token, "utf8")]);
      expect(t.top_logprobs).toHaveLength(5);
      const tops = t.top_logprobs.map((a) => a.logprob);
      expect([...tops].sort((a, b) => b - a)).toEqual(tops);
      expect(tops.reduce((s, l) => s + Math.exp(l), 0)).toBeLessThanOrEqual(1 + 1e-6);
      // The chosen token is no more likely than the most likely one.
      expect(t.logprob).toBeLessThanOrEqual(tops[0]! + 1e-9);
    }
    // Sampling is the same with or without logprobs: the seed gives the same text.
    const without = await chat({ ...sampled, logprobs: undefined, top_logprobs: undefined });
    expect(without.choices[0]!.message.content).toBe(whole.choices[0]!.message.content);
    expect(without.choices[0]!.logprobs).toBeNull();
  });

  it("at temperature 0 the top alternatives are the model's own distribution", async () => {
    const res = await chat({ logprobs: true, top_logprobs: 3, reasoning_effort: "none" });
    const [first, second] = res.choices[0]!.logprobs!.content!;
    const prev = tokenId(first!.token);
    for (const alt of second!.top_logprobs) expect(alt.logprob).toBeCloseTo(modelLogprob(prev, tokenId(alt.token)), 3);
  });

  it("top_logprobs without logprobs is a 400 naming it", async () => {
    await expect(chat({ top_logprobs: 2 })).rejects.toMatchObject({ status: 400, param: "top_logprobs" });
  });

  it("Responses returns them with include message.output_text.logprobs, streamed alike", async () => {
    const params = { model: "svc", input: "Hello", temperature: 1, seed: 99, top_logprobs: 2, include: ["message.output_text.logprobs"], reasoning: { effort: "minimal" } };
    const res = await client.responses.create(params as never);
    const message = res.output.find((o) => o.type === "message")!;
    const part = message.content[0] as OpenAI.Responses.ResponseOutputText;
    expect(part.logprobs!.length).toBeGreaterThan(0);
    expect(part.logprobs!.map((l) => l.token).join("").trim()).toBe(part.text);
    const stream = await client.responses.create({ ...params, stream: true } as never);
    const deltas: unknown[] = [];
    for await (const event of stream as unknown as AsyncIterable<{ type: string; logprobs?: unknown[] }>)
      if (event.type === "response.output_text.delta") deltas.push(...(event.logprobs ?? []));
    expect(deltas).toEqual(part.logprobs);
  });
});

describe("svc_complexity steers the reasoning budget", () => {
  it("a harder request gets more of the effort's cap, and the trace shows the budget that ran", async () => {
    const simple = await chat({ glassbox: {} });
    const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: { q: { type: "string" } } } } }];
    const long = "Consider the following report carefully. ".repeat(80);
    const hard = await chat({ glassbox: {}, messages: user(long), tools, tool_choice: "none", response_format: forcedSchema });
    expect(simple.svc_complexity.reasoning_cap).toBe(hard.svc_complexity.reasoning_cap);
    expect(hard.svc_complexity.score).toBeGreaterThan(simple.svc_complexity.score);
    expect(hard.svc_complexity.reasoning_budget).toBeGreaterThan(simple.svc_complexity.reasoning_budget);
    expect(hard.svc_complexity.reasoning_budget).toBeLessThanOrEqual(hard.svc_complexity.reasoning_cap);
    expect(simple.svc_trace!.reasoning_budget).toBe(simple.svc_complexity.reasoning_budget);
    // max_reasoning_tokens stays a hard cap under the steered budget.
    const capped = await chat({ max_reasoning_tokens: 2 });
    expect(capped.svc_complexity).toMatchObject({ reasoning_cap: 2, reasoning_budget: 2, reasoning_tokens: 2 });
  });
});

describe("refusal_mode", () => {
  it("soft answers even when unsure (finish low_confidence); strict refuses instead, and says why", async () => {
    const soft = await chat({ glassbox: { threshold: 0.95 }, refusal_mode: "soft" });
    expect(soft.choices[0]!.message.content).not.toBe("");
    expect(soft.choices[0]!.message.refusal).toBeNull();
    expect(soft.svc_trace).toMatchObject({ refusal_mode: "soft", refusal: null, stop_reason: "low_confidence" });

    const strict = await chat({ glassbox: { threshold: 0.95 }, refusal_mode: "strict" });
    expect(strict.choices[0]!.message.content).toBeNull();
    expect(strict.choices[0]!.message.refusal).toMatch(/not confident enough/);
    expect(strict.svc_trace!.refusal_mode).toBe("strict");
    expect(strict.svc_trace!.refusal).toMatch(/below 0\.95/);
    // Strict mode also instructs the model (a system line the prompt counts).
    expect(strict.usage!.prompt_tokens).toBeGreaterThan(soft.usage!.prompt_tokens);

    // Streaming holds the answer back and sends the refusal instead.
    const chunks = await chatStream({ refusal_mode: "strict", glassbox: { threshold: 0.95 } });
    expect(chunks.some((c) => c.choices[0]?.delta?.content)).toBe(false);
    expect(chunks.map((c) => (c.choices[0]?.delta as { refusal?: string } | undefined)?.refusal ?? "").join("")).toMatch(/not confident enough/);

    // A confident answer passes strict mode untouched.
    const sure = await chat({ refusal_mode: "strict", response_format: forcedSchema });
    expect(JSON.parse(sure.choices[0]!.message.content!)).toEqual({ colour: "blue" });
    expect(sure.choices[0]!.message.refusal).toBeNull();
  });
});

describe("session_id", () => {
  it("keeps each session's cache while another session interleaves", async () => {
    const system = Array.from({ length: 40 }, (_, i) => `Rule ${i}: answer politely.`).join(" ");
    const turn = async (session: string, messages: OpenAI.ChatCompletionMessageParam[]) => {
      const res = await chat({ session_id: session, reasoning_effort: "none", messages: [{ role: "system", content: system }, ...messages] });
      expect(res.session_id).toBe(session);
      return { res, messages: [...messages, { role: "assistant" as const, content: res.choices[0]!.message.content }] };
    };
    let a = await turn("session-a", user("First question from A?"));
    let b = await turn("session-b", user("First question from B?"));
    for (let round = 0; round < 2; round++) {
      const a2 = await turn("session-a", [...a.messages, ...user(`A again, round ${round}?`)]);
      const b2 = await turn("session-b", [...b.messages, ...user(`B again, round ${round}?`)]);
      // Everything A sent last time comes from the cache, though B ran in between (and shares the system prompt).
      expect(a2.res.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(a.res.usage!.prompt_tokens - 1);
      expect(b2.res.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(b.res.usage!.prompt_tokens - 1);
      a = a2;
      b = b2;
    }
  });
});
