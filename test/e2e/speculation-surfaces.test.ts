// Speculation through the three surfaces (issue 44), with the official SDKs against two `svc serve` on the
// tiny model, one with `--speculation off`: every answer is the same on both (greedy and seeded, with stop
// sequences, logprobs, tool calls and structured output), the guessed tokens are reported (Chat usage's
// Predicted Outputs fields, svc_trace, /health), and an answer that repeats the conversation takes them.
//
// The model is the tiny model's echo variant (TinyModelOptions.echo): a first-order Markov chain whose answer
// is 60 printable characters the tokenizer reads back into the same tokens, so a conversation that holds the
// answer once makes every guess of the next one right.
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeTinyModel } from "../../resources/test-model/cli.js";
import { echoChain } from "../../resources/test-model/tiny-model.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

interface Side {
  server: SvcServer;
  openai: OpenAI;
  anthropic: Anthropic;
}
let on: Side;
let off: Side;
const answer = echoChain();
let modelPath: string;

async function side(speculation: "prompt-lookup" | "off"): Promise<Side> {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  // Every guess checked (not priced by this machine's timings, step-costs.ts): the counts below are exact.
  const server = await startSvc({ model: modelPath, dataDir, args: ["--sequences", "2", "--context-size", "4096", "--speculation", speculation], env: { SVC_ENGINE_TEST_KEEP_GUESSES: "1" } });
  return {
    server,
    openai: new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 }),
    anthropic: new Anthropic({ apiKey: key, baseURL: server.url, maxRetries: 0 }),
  };
}

beforeAll(async () => {
  modelPath = writeTinyModel(join(tempDataDir(), "echo.gguf"), { echo: true });
  [on, off] = await Promise.all([side("prompt-lookup"), side("off")]);
});
afterAll(async () => {
  expect(await on?.server.stop()).toBe(0);
  expect(await off?.server.stop()).toBe(0);
});

/** A conversation whose last turn asks what its first did: the model's answer repeats the earlier one. */
const echo = [
  { role: "user" as const, content: "Hello" },
  { role: "assistant" as const, content: answer },
  { role: "user" as const, content: "Hello" },
];

/**
 * The same conversation, its earlier answer edited in three places (characters the answer does not use): the
 * guesses carry the edits, the model does not, so some guesses are refused and the answer is unchanged.
 */
const unused = [...Array.from({ length: 94 }, (_, i) => String.fromCharCode(0x21 + i))].filter((c) => !answer.includes(c));
const edited = [
  echo[0]!,
  { role: "assistant" as const, content: [...answer].map((c, i) => (i === 10 ? unused[0] : i === 30 ? unused[1] : i === 45 ? unused[2] : c)).join("") },
  echo[2]!,
];

/** Ids, times and thinking signatures (each server signs with its own key) differ between two servers; the rest must match. */
function comparable<T>(value: T): T {
  return JSON.parse(
    JSON.stringify(value, (k, v) =>
      ["id", "call_id", "created", "created_at", "completed_at", "_request_id", "system_fingerprint", "usage", "signature"].includes(k) ? undefined : v,
    ),
  );
}

type ChatBody = Parameters<OpenAI["chat"]["completions"]["create"]>[0];
const both = async (body: ChatBody) => {
  const [a, b] = await Promise.all([on.openai.chat.completions.create({ ...body, stream: false }), off.openai.chat.completions.create({ ...body, stream: false })]);
  return { on: a, off: b };
};

describe("Chat Completions with speculation on and off", () => {
  it("an answer that repeats the conversation: the same text, its tokens taken from guesses (Predicted Outputs usage)", async () => {
    for (const effort of ["none", "medium"] as const) {
      const r = await both({ model: "svc", messages: echo, temperature: 0, reasoning_effort: effort });
      expect(comparable(r.on)).toEqual(comparable(r.off));
      expect(r.on.choices[0]!.message.content).toBe(answer);
      expect(r.on.usage!.completion_tokens).toBe(r.off.usage!.completion_tokens);
      const details = r.on.usage!.completion_tokens_details!;
      // Every character but the first few (the guesses start once the answer's first tokens match) and the end.
      expect(details.accepted_prediction_tokens).toBeGreaterThanOrEqual(answer.length - 10);
      expect(details.accepted_prediction_tokens).toBeLessThan(r.on.usage!.completion_tokens);
      expect(details.rejected_prediction_tokens).toBeGreaterThanOrEqual(0);
      expect(r.off.usage!.completion_tokens_details).toMatchObject({ accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 });
    }
  });

  it("Predicted Outputs: a prediction the conversation does not hold is guessed from; the answer is unchanged, and a wrong prediction changes nothing", async () => {
    const hello = [{ role: "user" as const, content: "Hello" }];
    const plain = await both({ model: "svc", messages: hello, temperature: 0, reasoning_effort: "none" });
    expect(plain.on.choices[0]!.message.content).toBe(answer);
    // Without the answer anywhere in the prompt, nothing (or next to nothing) is guessed.
    expect(plain.on.usage!.completion_tokens_details!.accepted_prediction_tokens).toBeLessThan(10);
    for (const prediction of [
      { type: "content" as const, content: answer },
      { type: "content" as const, content: [{ type: "text" as const, text: answer.slice(0, 20) }, { type: "text" as const, text: answer.slice(20) }] },
    ]) {
      const r = await both({ model: "svc", messages: hello, temperature: 0, reasoning_effort: "none", prediction });
      expect(comparable(r.on)).toEqual(comparable(plain.on));
      expect(r.on.usage!.completion_tokens).toBe(plain.on.usage!.completion_tokens);
      // The prediction's tokens are the answer's from its first: nearly all taken from guesses.
      expect(r.on.usage!.completion_tokens_details!.accepted_prediction_tokens).toBeGreaterThanOrEqual(answer.length - 10);
      expect(r.off.usage!.completion_tokens_details).toMatchObject({ accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 });
    }
    // A prediction the answer does not follow: guesses refused, the same answer.
    const wrong = await both({ model: "svc", messages: hello, temperature: 0, reasoning_effort: "none", prediction: { type: "content", content: [...answer].reverse().join("") } });
    expect(comparable(wrong.on)).toEqual(comparable(plain.on));
    // Not an object of type content: refused in Chat's error format.
    const bad = await fetch(`${on.server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${on.openai.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "svc", messages: hello, prediction: { type: "file", content: "x" } }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toMatch(/^prediction/);
  });

  it("an answer that differs from the conversation where it was edited: guesses refused there, the same answer", async () => {
    for (const temperature of [0, 1.5]) {
      const r = await both({ model: "svc", messages: edited, temperature, seed: 3, reasoning_effort: "none" });
      expect(comparable(r.on)).toEqual(comparable(r.off));
      if (temperature === 0) expect(r.on.choices[0]!.message.content).toBe(answer);
      const details = r.on.usage!.completion_tokens_details!;
      expect(details.rejected_prediction_tokens).toBeGreaterThan(0);
      expect(details.accepted_prediction_tokens).toBeGreaterThanOrEqual(answer.length - 30);
    }
  });

  it("streamed: the same chunks' text, and the usage chunk reports the guesses", async () => {
    const text = async (s: Side) => {
      const stream = await s.openai.chat.completions.create({ model: "svc", messages: echo, temperature: 0, reasoning_effort: "none", stream: true, stream_options: { include_usage: true } });
      let out = "";
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) {
        out += chunk.choices[0]?.delta.content ?? "";
        if (chunk.usage) usage = chunk.usage;
      }
      return { out, usage };
    };
    const [a, b] = await Promise.all([text(on), text(off)]);
    expect(a.out).toBe(b.out);
    expect(a.out).toBe(answer);
    expect(a.usage!.completion_tokens_details!.accepted_prediction_tokens).toBeGreaterThanOrEqual(3);
  });

  it("stop sequences inside the guessed text end the answer at the same place", async () => {
    for (const stop of [answer.slice(5, 6), answer.slice(20, 23), answer.slice(50, 52)]) {
      const r = await both({ model: "svc", messages: echo, temperature: 0, reasoning_effort: "none", stop: [stop] });
      expect(comparable(r.on)).toEqual(comparable(r.off));
      expect(r.on.choices[0]!.finish_reason).toBe("stop");
      expect(r.on.choices[0]!.message.content).not.toContain(stop);
    }
  });

  it("max_tokens inside the guessed text: the same cut, and never more tokens than asked", async () => {
    for (const max of [1, 2, 3, 5, 9, 17, 40]) {
      const r = await both({ model: "svc", messages: echo, temperature: 0, reasoning_effort: "none", max_tokens: max });
      expect(comparable(r.on)).toEqual(comparable(r.off));
      expect(r.on.usage!.completion_tokens).toBeLessThanOrEqual(max);
      expect(r.on.choices[0]!.finish_reason).toBe("length");
    }
  });

  it("seeded sampling: the same answers on both (a guess is kept only when the draw agrees)", async () => {
    for (const seed of [1, 2, 3, 4]) {
      const r = await both({ model: "svc", messages: echo, temperature: 1.2, seed, reasoning_effort: "none", max_tokens: 40 });
      expect(comparable(r.on), `seed ${seed}`).toEqual(comparable(r.off));
    }
  });

  it("logprobs, tool calls and structured output: the same as without speculation", async () => {
    const weather = { type: "function" as const, function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } };
    const bodies: ChatBody[] = [
      { model: "svc", messages: echo, temperature: 0, reasoning_effort: "none", logprobs: true, top_logprobs: 3 },
      { model: "svc", messages: echo, temperature: 0, tools: [weather], tool_choice: "required" },
      { model: "svc", messages: echo, temperature: 0, tools: [weather], tool_choice: "auto", seed: 5 },
      {
        model: "svc",
        messages: echo,
        temperature: 0,
        response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { a: { type: "string" } }, required: ["a"] } } },
      },
    ];
    for (const body of bodies) {
      const r = await both(body);
      expect(comparable(r.on)).toEqual(comparable(r.off));
    }
  });

  it("grammar phases take guesses too: structured output and a tool call's arguments that repeat the conversation come from guesses, the same as without", async () => {
    // (Strings bounded: this model never ends one of its own.)
    const schema = { type: "object", properties: { a: { type: "string", maxLength: 30 }, b: { type: "string", maxLength: 30 } }, required: ["a", "b"], additionalProperties: false };
    const response_format = { type: "json_schema" as const, json_schema: { name: "x", strict: true, schema } };
    const first = await off.openai.chat.completions.create({ model: "svc", messages: echo, temperature: 0, reasoning_effort: "none", response_format });
    const json = first.choices[0]!.message.content!;
    expect(Object.keys(JSON.parse(json) as object)).toEqual(["a", "b"]);
    // The same question again, the first answer in the conversation: every token after the first few is guessed right.
    const again = [echo[0]!, { role: "assistant" as const, content: json }, echo[2]!];
    const r = await both({ model: "svc", messages: again, temperature: 0, reasoning_effort: "none", response_format });
    expect(comparable(r.on)).toEqual(comparable(r.off));
    expect(r.on.choices[0]!.message.content).toBe(json);
    expect(r.on.usage!.completion_tokens_details!.accepted_prediction_tokens).toBeGreaterThanOrEqual(r.on.usage!.completion_tokens / 2);
    // Sampled (seeded) under the grammar: a guess is kept only where the draw agrees; the same answer.
    const seeded = await both({ model: "svc", messages: again, temperature: 1.2, seed: 11, reasoning_effort: "none", response_format });
    expect(comparable(seeded.on)).toEqual(comparable(seeded.off));

    // A forced call whose arguments the request predicts (Predicted Outputs): the arguments come from guesses.
    const note = { type: "function" as const, function: { name: "save_note", parameters: { type: "object", properties: { text: { type: "string", maxLength: 40 } }, required: ["text"] } } };
    const forced = { model: "svc", messages: echo, temperature: 0, tools: [note], tool_choice: { type: "function" as const, function: { name: "save_note" } } };
    const call = await off.openai.chat.completions.create(forced);
    const args = (call.choices[0]!.message.tool_calls![0] as { function: { arguments: string } }).function.arguments;
    const predicted = await both({ ...forced, prediction: { type: "content", content: args } });
    expect(comparable(predicted.on)).toEqual(comparable(predicted.off));
    expect((predicted.on.choices[0]!.message.tool_calls![0] as { function: { arguments: string } }).function.arguments).toBe(args);
    expect(predicted.on.usage!.completion_tokens_details!.accepted_prediction_tokens).toBeGreaterThan(args.length / 4);
  });

  it("svc_trace reports the guesses (glassbox without scoring), and /health sums them", async () => {
    const res = (await on.openai.chat.completions.create({ model: "svc", messages: echo, temperature: 0, reasoning_effort: "none", glassbox: { confidence: false } } as ChatBody)) as unknown as {
      svc_trace: { speculation: { drafted_tokens: number; accepted_tokens: number } };
      usage: OpenAI.CompletionUsage;
    };
    expect(res.svc_trace.speculation.accepted_tokens).toBe(res.usage.completion_tokens_details!.accepted_prediction_tokens);
    expect(res.svc_trace.speculation.drafted_tokens).toBe(res.svc_trace.speculation.accepted_tokens + res.usage.completion_tokens_details!.rejected_prediction_tokens!);
    type Health = { speculation: { mode: string; drafted_tokens: number; accepted_tokens: number; acceptance_rate: number | null } | null };
    const health = (await (await fetch(`${on.server.url}/health`)).json()) as Health;
    expect(health.speculation!.mode).toBe("prompt-lookup");
    expect(health.speculation!.accepted_tokens).toBeGreaterThan(0);
    expect(health.speculation!.acceptance_rate).toBeCloseTo(health.speculation!.accepted_tokens / health.speculation!.drafted_tokens, 6);
    const offHealth = (await (await fetch(`${off.server.url}/health`)).json()) as Health;
    expect(offHealth.speculation).toEqual({ mode: "off", draft_model: null, drafted_tokens: 0, accepted_tokens: 0, acceptance_rate: null });
  });
});

describe("Responses and Messages with speculation on and off", () => {
  it("Responses: the same output; svc_trace reports the guesses", async () => {
    const body = { model: "svc", input: echo.map((m) => ({ role: m.role, content: m.content })), temperature: 0, reasoning: { effort: "none" as const }, glassbox: { confidence: false } };
    const [a, b] = await Promise.all([on.openai.responses.create(body as never), off.openai.responses.create(body as never)]);
    expect(comparable((a as OpenAI.Responses.Response).output)).toEqual(comparable((b as OpenAI.Responses.Response).output));
    expect((a as OpenAI.Responses.Response).output_text).toBe(answer);
    expect((a as unknown as { svc_trace: { speculation: { accepted_tokens: number } } }).svc_trace.speculation.accepted_tokens).toBeGreaterThanOrEqual(3);
    expect((b as unknown as { svc_trace: { speculation: { drafted_tokens: number } } }).svc_trace.speculation.drafted_tokens).toBe(0);
  });

  it("Messages: the same content, streamed and not, with a stop sequence and with thinking", async () => {
    const base = { model: "claude-haiku-4-5", max_tokens: 2000, temperature: 0, messages: echo };
    for (const body of [base, { ...base, stop_sequences: [answer.slice(30, 32)] }, { ...base, thinking: { type: "enabled" as const, budget_tokens: 1024 } }]) {
      const [a, b] = await Promise.all([on.anthropic.messages.create(body), off.anthropic.messages.create(body)]);
      expect(comparable(a.content)).toEqual(comparable(b.content));
      expect(a.stop_reason).toBe(b.stop_reason);
      expect(a.usage.output_tokens).toBe(b.usage.output_tokens);
      const stream = on.anthropic.messages.stream(body);
      const streamed = await stream.finalMessage();
      expect(comparable(streamed.content)).toEqual(comparable(a.content));
    }
  });
});
