// The request the engine tests start from (the Engine interface's, server/engine/types.ts): "Hello" from the
// user, the fast mode, greedy, no tools, room for 100 tokens; each test replaces what it is about.
import type { EngineRequest } from "../../server/engine/types.js";

export function engineRequest(over: Partial<EngineRequest> = {}): EngineRequest {
  return {
    messages: [{ role: "user", content: [{ type: "text", text: "Hello" }] }],
    tools: [],
    toolChoice: { type: "auto" },
    parallelToolCalls: true,
    output: { type: "text" },
    mode: "fast",
    reasoningBudget: 0,
    maxTokens: 100,
    stopSequences: [],
    sampling: { temperature: 0 },
    ...over,
  };
}

/** One user message of one text part. */
export const userMessage = (text: string): EngineRequest["messages"] => [{ role: "user", content: [{ type: "text", text }] }];
