// Issue 36: constrained answers never fail their schema. A few hundred cases of test/support/constrained-fuzz.ts
// (all three surfaces, streamed and not, structured output and forced tool calls, multi-byte characters
// in most strings); `npm run bench:fuzz` runs the full count. Before the UTF-8 guard, 18 of these 300
// came back 500 (ill-formed bytes the grammar let through as one character).
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { runFuzz, type FuzzResult } from "../support/constrained-fuzz.js";
import { createKey, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

let server: SvcServer;
let key: string;

beforeAll(async () => {
  const dataDir = tempDataDir();
  key = createKey(dataDir);
  server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "2", "--context-size", "4096"] });
});
afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

it("300 constrained generations at temperature 1.5: every one 200 and valid, non-ASCII text in many", { timeout: 240_000 }, async () => {
  const results: FuzzResult[] = await runFuzz(server.url, key, 0, 300);
  const problems = results.filter((r) => r.problem !== null).map((r) => `${JSON.stringify(r.fuzzCase)}: ${r.problem} ${JSON.stringify(r.text)}`);
  expect(problems).toEqual([]);
  expect(results).toHaveLength(300);
  // The cases reach what broke: multi-byte characters (written through byte tokens) in the constrained text.
  const multiByte = results.filter((r) => /[^\x00-\x7f]/.test(r.text ?? "")).length;
  expect(multiByte).toBeGreaterThan(60);
  for (const surface of ["chat", "responses", "messages"]) expect(results.filter((r) => r.fuzzCase.surface === surface)).toHaveLength(100);
  // Nothing the log calls an error on a healthy request.
  expect(server.output()).not.toMatch(/\[svc\] error:|failed its own schema/);
});
