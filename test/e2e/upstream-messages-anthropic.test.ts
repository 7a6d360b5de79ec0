// Test (a), Messages: messages-anthropic.test.ts's every test (streaming, tools, forced calls, count_tokens,
// prompt caching), unchanged, with the official Anthropic client, on one llama-server behind --upstream.
import { runOnUpstream } from "../support/upstream-servers.js";

await runOnUpstream(() => import("./messages-anthropic.test.js"));
