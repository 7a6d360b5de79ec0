// A scripted engine for contract tests: it records requests and replays the events a script returns.
import type { Engine, EngineEvent, EngineOutcome, EngineRequest, EngineStatus } from "../../server/engine/types.js";

export type Script = (request: EngineRequest) => EngineEvent[] | Error;

export function outcome(partial: Partial<EngineOutcome> & { text?: string } = {}): EngineOutcome {
  return {
    mode: partial.mode ?? "thinking",
    text: partial.text ?? "",
    reasoning: partial.reasoning ?? "",
    toolCalls: partial.toolCalls ?? [],
    ...(partial.incompleteToolCall ? { incompleteToolCall: partial.incompleteToolCall } : {}),
    stopReason: partial.stopReason ?? "end_turn",
    stopSequence: partial.stopSequence ?? null,
    usage: partial.usage ?? { promptTokens: 10, cachedTokens: 0, completionTokens: 5, reasoningTokens: 0 },
  };
}

/** Events for a plain answer: start, optional reasoning, text deltas, done. */
export function answer(text: string, options: { reasoning?: string; mode?: "fast" | "thinking"; cached?: number } = {}): EngineEvent[] {
  const mode = options.mode ?? (options.reasoning ? "thinking" : "fast");
  const words = text.split(/(?<= )/);
  const reasoningTokens = options.reasoning ? options.reasoning.split(" ").length : 0;
  return [
    { type: "start", mode, promptTokens: 12, cachedTokens: options.cached ?? 0 },
    ...(options.reasoning ? [{ type: "reasoning.delta" as const, text: options.reasoning }] : []),
    ...words.map((w) => ({ type: "text.delta" as const, text: w })),
    {
      type: "done",
      outcome: outcome({
        mode,
        text,
        reasoning: options.reasoning ?? "",
        usage: { promptTokens: 12, cachedTokens: options.cached ?? 0, completionTokens: words.length + reasoningTokens, reasoningTokens },
      }),
    },
  ];
}

export class FakeEngine implements Engine {
  readonly requests: EngineRequest[] = [];
  /** Set to fail after this many events have been sent (an error after the stream began). */
  failAfter: number | null = null;

  constructor(public script: Script = () => answer("Hello there")) {}

  status(): EngineStatus {
    return {
      state: "ready",
      model: { path: "/models/fake.gguf", name: "fake", sizeBytes: 1, trainContextSize: 4096, contextSize: 4096, maxOutputTokens: 4080, sequences: 1, threads: 1 },
      gpu: { backend: "cpu", devices: [], vramTotalBytes: 0, vramFreeBytes: 0 },
      error: null,
    };
  }

  async countPromptTokens(request: EngineRequest): Promise<number> {
    return JSON.stringify(request.messages).length;
  }

  async *generate(request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent, void, void> {
    this.requests.push(request);
    const scripted = this.script(request);
    if (scripted instanceof Error) throw scripted;
    let sent = 0;
    for (const event of scripted) {
      if (signal.aborted) return;
      if (this.failAfter !== null && sent >= this.failAfter) throw new Error("engine exploded");
      yield event;
      sent++;
      await new Promise((r) => setImmediate(r));
    }
  }

  async close(): Promise<void> {}
}
