// Speculation in grammar phases is lossless under stress (issue 44): the constrained fuzz's schemas
// (test/support/constrained-fuzz.ts: multi-byte characters written through byte tokens in most strings, seeded
// sampling at temperature 1.5 with top_k opened up), structured output and forced tool calls, on two servers
// of the tiny model, one with `--speculation off`. Each case is asked of the server without speculation first;
// its answer is then the Predicted Outputs `prediction` of the same request to the server with it, so that
// nearly every position is guessed, in and out of characters split over several tokens (the UTF-8 guard's
// bans read ahead, LookaheadBias). The answers must be the same, byte for byte.
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { fuzzCase, fuzzRequestBody } from "../support/constrained-fuzz.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

interface Side {
  server: SvcServer;
  key: string;
}
let on: Side;
let off: Side;

async function side(speculation: "prompt-lookup" | "off"): Promise<Side> {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  // Every guess checked (not priced by this machine's timings): what is compared does not depend on them.
  const server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096", "--speculation", speculation], env: { SVC_ENGINE_TEST_KEEP_GUESSES: "1" } });
  return { server, key };
}

beforeAll(async () => {
  [on, off] = await Promise.all([side("prompt-lookup"), side("off")]);
});
afterAll(async () => {
  expect(await on?.server.stop()).toBe(0);
  expect(await off?.server.stop()).toBe(0);
});

type Completion = {
  choices: Array<{ message: { content: string | null; tool_calls?: Array<{ function: { arguments: string } }> } }>;
  usage: { completion_tokens: number; completion_tokens_details: { accepted_prediction_tokens: number; rejected_prediction_tokens: number } };
};

async function complete(s: Side, body: Record<string, unknown>): Promise<Completion> {
  const res = await fetch(`${s.server.url}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${s.key}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as Completion;
}

const textOf = (c: Completion) => c.choices[0]!.message.tool_calls?.[0]?.function.arguments ?? c.choices[0]!.message.content ?? "";

it("60 constrained answers, seeded at temperature 1.5, guessed from their own text: the same bytes with speculation on and off", { timeout: 240_000 }, async () => {
  const mismatches: string[] = [];
  let accepted = 0;
  let completion = 0;
  let multiByte = 0;
  for (let i = 0; i < 60; i++) {
    // The fuzz's case on Chat (the surface with Predicted Outputs), not streamed.
    const c = { ...fuzzCase(i), surface: "chat" as const, stream: false };
    const body = fuzzRequestBody(c);
    const plain = await complete(off, body);
    const text = textOf(plain);
    if (/[^\x00-\x7f]/.test(text)) multiByte++;
    const guessed = await complete(on, { ...body, prediction: { type: "content", content: text } });
    if (textOf(guessed) !== text) mismatches.push(`case ${i} (${c.kind}, ${c.schemaName}): ${JSON.stringify(textOf(guessed))} vs ${JSON.stringify(text)}`);
    accepted += guessed.usage.completion_tokens_details.accepted_prediction_tokens;
    completion += guessed.usage.completion_tokens;
  }
  expect(mismatches).toEqual([]);
  // The cases reach characters split over tokens, and most of every answer came from guesses.
  expect(multiByte).toBeGreaterThan(10);
  expect(accepted).toBeGreaterThan(completion / 2);
});
