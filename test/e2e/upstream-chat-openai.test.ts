// Test (a) of docs/scale-out.md: chat-openai.test.ts's every test, unchanged, on a server whose engine is one
// llama-server (built from the llama.cpp source node-llama-cpp ships) behind `svc serve --upstream`.
import { afterAll, beforeAll, inject, it } from "vitest";
import { serveDefaults } from "../support/svc-process.js";
import { startLlamaServer, upstreamMissing, type Child } from "../support/upstream-servers.js";

const missing = upstreamMissing();
if (missing) it.skip(`upstream tests skipped: ${missing}`, () => undefined);
else {
  let upstream: Child | undefined;
  beforeAll(async () => {
    upstream = await startLlamaServer({ model: inject("tinyModelPath"), slots: 2, contextPerSlot: 4096 });
    serveDefaults.args = ["--upstream", upstream.url];
  });
  afterAll(async () => {
    await upstream?.stop();
  });
  await import("./chat-openai.test.js");
}
