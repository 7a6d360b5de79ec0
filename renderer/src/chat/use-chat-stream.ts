// One answer streamed from Chat Completions with the OpenAI SDK, as any client does. The answer being written
// lives in its own small store (only its view follows each token; the conversation's list of turns changes
// when it starts and when it ends), with live counts: tokens so far and tokens per second. A stopped answer
// keeps those counts.
import OpenAI from "openai";
import { useCallback, useMemo, useRef } from "react";
import { withWindowKey } from "../api/http";
import { createStore, useStore, type Store } from "../state/store";
import { isKeyRefused } from "./chat-errors";
import type { Turn, TurnStats } from "./types";

type Usage = OpenAI.CompletionUsage & { reasoning_tokens?: number };

export interface LiveAnswer {
  turn: Turn;
  /** Tokens received so far (one per streamed piece; the usage at the end is exact). */
  tokens: number;
  tokensPerSecond: number | null;
}

export interface StreamOutcome {
  /** The answer as it ended: done, stopped (Stop, Esc) or error (then `error`). */
  turn: Turn;
  error?: unknown;
}

function statsOf(t0: number, first: { token: number | null; answer: number | null; reasoning: number | null }, end: number, usage: Usage | null, counted: number): TurnStats {
  const completion = usage?.completion_tokens ?? (counted > 0 ? counted : null);
  const genMs = first.token !== null ? end - first.token : null;
  return {
    firstTokenMs: first.token !== null ? first.token - t0 : null,
    thinkingMs: first.reasoning !== null ? (first.answer ?? end) - first.reasoning : null,
    totalMs: end - t0,
    promptTokens: usage?.prompt_tokens ?? null,
    cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? null,
    completionTokens: completion,
    reasoningTokens: usage?.reasoning_tokens ?? usage?.completion_tokens_details?.reasoning_tokens ?? null,
    tokensPerSecond: completion !== null && genMs !== null && genMs > 0 && completion > 1 ? (completion - 1) / (genMs / 1000) : null,
    ...(usage ? {} : { counted: true }),
  };
}

export interface ChatStream {
  live: Store<{ answer: LiveAnswer | null }>;
  streaming: boolean;
  /**
   * Streams `body` into `reply` (its content so far is kept: a continued answer writes on after it), and hands
   * the ended answer to `commit` in the same moment the live view lets it go.
   */
  start(baseUrl: string, body: OpenAI.Chat.ChatCompletionCreateParamsStreaming, reply: Turn, commit: (outcome: StreamOutcome) => void): Promise<void>;
  stop(): void;
}

export function useChatStream(): ChatStream {
  const live = useMemo(() => createStore<{ answer: LiveAnswer | null }>({ answer: null }), []);
  const abortRef = useRef<AbortController | null>(null);
  const streaming = useStore(live, (s) => s.answer !== null);

  const start = useCallback(
    async (baseUrl: string, body: OpenAI.Chat.ChatCompletionCreateParamsStreaming, reply: Turn, commit: (outcome: StreamOutcome) => void): Promise<void> => {
      const abort = new AbortController();
      abortRef.current = abort;
      const t0 = performance.now();
      const first = { token: null as number | null, answer: null as number | null, reasoning: null as number | null };
      let usage: Usage | null = null;
      let finish: string | null = null;
      let tokens = 0;
      let turn: Turn = { ...reply, status: "streaming", phase: "waiting", startedAt: Date.now() };
      const show = () => {
        const elapsed = first.token !== null ? (performance.now() - first.token) / 1000 : 0;
        live.set({ answer: { turn, tokens, tokensPerSecond: tokens > 1 && elapsed > 0.2 ? (tokens - 1) / elapsed : null } });
      };
      show();
      const run = async (apiKey: string) => {
        const client = new OpenAI({ baseURL: baseUrl, apiKey, dangerouslyAllowBrowser: true, maxRetries: 0 });
        const stream = await client.chat.completions.create(body, { signal: abort.signal });
        for await (const chunk of stream) {
          if (chunk.usage) usage = chunk.usage as Usage;
          const choice = chunk.choices[0];
          if (choice?.finish_reason) finish = choice.finish_reason;
          const delta = choice?.delta as (OpenAI.Chat.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string }) | undefined;
          if (!delta || (!delta.reasoning_content && !delta.content)) continue;
          const now = performance.now();
          first.token ??= now;
          tokens++;
          if (delta.reasoning_content) {
            first.reasoning ??= now;
            turn = { ...turn, reasoning: turn.reasoning + delta.reasoning_content, phase: "thinking" };
          }
          if (delta.content) {
            first.answer ??= now;
            turn = { ...turn, content: turn.content + delta.content, phase: "writing" };
          }
          show();
        }
      };
      const end = (status: Turn["status"]): Turn => ({
        ...turn,
        status,
        phase: undefined,
        finishReason: finish,
        stats: statsOf(t0, first, performance.now(), usage, tokens),
      });
      let outcome: StreamOutcome;
      try {
        // The window's key revoked elsewhere: the main process makes a new one; sent once more.
        await withWindowKey(run, (err) => isKeyRefused(err) && !abort.signal.aborted);
        // The SDK ends the iteration quietly when the request is aborted.
        outcome = { turn: end(abort.signal.aborted ? "stopped" : "done") };
      } catch (err) {
        outcome = abort.signal.aborted ? { turn: end("stopped") } : { turn: { ...turn, status: "error", phase: undefined }, error: err };
      }
      abortRef.current = null;
      commit(outcome);
      live.set({ answer: null });
    },
    [live],
  );

  const stop = useCallback(() => abortRef.current?.abort(), []);
  return { live, streaming, start, stop };
}
