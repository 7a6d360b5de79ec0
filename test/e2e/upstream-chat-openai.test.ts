// Test (a) of docs/scale-out.md: chat-openai.test.ts's every test, unchanged, with the official openai client,
// on a server whose engine is one llama-server (built from the llama.cpp source node-llama-cpp ships) behind
// `svc serve --upstream`.
import { runOnUpstream } from "../support/upstream-servers.js";

await runOnUpstream(() => import("./chat-openai.test.js"));
