// A conversation as the window keeps it.
import type { Effort } from "../settings";

export interface Attachment {
  name: string;
  type: string;
  size: number;
  dataUrl: string;
}

/** What the window says went wrong, in plain words, and what fixes it. */
export interface ChatProblem {
  title: string;
  detail: string;
  /** Buttons offered under the message, in order. */
  actions: ProblemAction[];
  /** The server's own words, for the curious (shown small). */
  serverMessage?: string;
}

export type ProblemAction = "retry" | "edit" | "send_without_attachments" | "open_models" | "new_chat";

export interface TurnStats {
  /** From sending to the first reasoning or answer token, ms. */
  firstTokenMs: number | null;
  /** From the first reasoning token to the first answer token, ms. */
  thinkingMs: number | null;
  totalMs: number;
  promptTokens: number | null;
  cachedTokens: number | null;
  completionTokens: number | null;
  reasoningTokens: number | null;
  /** Completion tokens per second, from the first token to the end. */
  tokensPerSecond: number | null;
}

export interface Turn {
  id: string;
  role: "user" | "assistant";
  content: string;
  reasoning: string;
  attachments: Attachment[];
  /** A user turn in "error" was never answered and is left out of what is sent next. */
  status: "streaming" | "done" | "stopped" | "error";
  effort?: Effort;
  problem?: ChatProblem;
  stats?: TurnStats;
  /** While streaming: "waiting" (sent, no token yet), "thinking" or "writing". */
  phase?: "waiting" | "thinking" | "writing";
  startedAt?: number;
}
