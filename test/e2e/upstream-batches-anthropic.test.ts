// Test (a), batches: batches-anthropic.test.ts's every test, unchanged, on one llama-server behind --upstream.
import { runOnUpstream } from "../support/upstream-servers.js";

// One slot, as the file's own server has one sequence (its scheduling test needs a request to wait).
await runOnUpstream(() => import("./batches-anthropic.test.js"), { slots: 1, contextPerSlot: 4096 });
