// How much of the model's context a message would fill, before it is sent: the conversation so far (exact
// where the last answer's usage says, else estimated), the message, its files (their token estimates) and the
// system prompt; and, for one that does not fit, the context size that would take it. Estimates are the
// server's heuristic (a token per four characters), so the window and the server's figures agree.
import type { Attachment, Turn } from "./types";

/** Tokens kept for the answer on top of the prompt (as the server's advice keeps: context-advice.ts). */
export const ANSWER_ROOM = 8192;
/** The meter warns when less than this share of the context, or half the answer room, is left for the answer. */
export const WARN_FILL = 0.85;

export function formatTokens(tokens: number): string {
  return Math.round(tokens).toLocaleString("en-US");
}

export function estimateTextTokens(text: string): number {
  let chars = 0;
  for (const _ of text) chars++;
  return Math.ceil(chars / 4);
}

function attachmentTokens(attachments: readonly Attachment[]): number {
  return attachments.filter((a) => !a.gone).reduce((sum, a) => sum + (a.tokens ?? 0), 0);
}

/** The conversation's tokens: from the last answer's usage where it has one, plus what came after it. */
export function conversationTokens(turns: readonly Turn[], systemPrompt: string): number {
  let start = 0;
  let total = estimateTextTokens(systemPrompt);
  for (let i = turns.length - 1; i >= 0; i--) {
    const stats = turns[i]!.stats;
    if (turns[i]!.role !== "user" && stats?.promptTokens != null && stats.completionTokens != null && !stats.counted) {
      total = stats.promptTokens + stats.completionTokens;
      start = i + 1;
      break;
    }
  }
  for (const turn of turns.slice(start)) {
    if (turn.status === "error") continue;
    total += estimateTextTokens(turn.content) + attachmentTokens(turn.attachments);
  }
  return total;
}

/**
 * The context size that takes `tokens` with room to answer (a multiple of 1024), at most what the model was
 * trained on; null when not even that holds the tokens.
 */
export function contextFigure(tokens: number, trainContextSize: number | null): number | null {
  const figure = Math.ceil((tokens + ANSWER_ROOM) / 1024) * 1024;
  if (!trainContextSize) return figure;
  if (tokens + 256 > trainContextSize) return null;
  return Math.min(figure, trainContextSize);
}

export type Fill = "ok" | "warn" | "over";

export interface ContextFill {
  /** Tokens the message would send. */
  tokens: number;
  contextSize: number;
  fill: Fill;
  /** The largest file of the message, when it alone is over the context. */
  fileAlone: { name: string; tokens: number } | null;
  /** The context that would take it, or null when no setting can (the model's training length is the limit). */
  figure: number | null;
}

export function contextFill(input: {
  turns: readonly Turn[];
  systemPrompt: string;
  draft: string;
  attachments: ReadonlyArray<{ name: string; tokens: number }>;
  contextSize: number;
  trainContextSize: number | null;
}): ContextFill {
  const files = input.attachments.reduce((sum, a) => sum + a.tokens, 0);
  const tokens = conversationTokens(input.turns, input.systemPrompt) + estimateTextTokens(input.draft) + files;
  const biggest = [...input.attachments].sort((a, b) => b.tokens - a.tokens)[0];
  const fileAlone = biggest && biggest.tokens >= input.contextSize ? biggest : null;
  // Over: the prompt leaves no room for an answer (the server refuses what leaves none).
  const left = input.contextSize - tokens;
  const fill: Fill = left <= 16 ? "over" : left < Math.min(ANSWER_ROOM / 2, input.contextSize * (1 - WARN_FILL)) ? "warn" : "ok";
  return { tokens, contextSize: input.contextSize, fill, fileAlone, figure: fill === "ok" ? null : contextFigure(tokens, input.trainContextSize) };
}
