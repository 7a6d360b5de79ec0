// A conversation as the window keeps it.
import type { FileOut, RunStep, RunUsage } from "../../../server/features/console/wire";
import type { Effort } from "../settings";

/**
 * A file sent with a message: what it is and its id on the Files API, never its bytes (saved chats keep
 * exactly this). The message sends it as `{type: "file", file: {file_id}}`.
 */
export interface Attachment {
  name: string;
  /** Its media type, as the server detected it from the bytes. */
  type: string;
  size: number;
  fileId: string;
  /** What the server made of it: the content kind ("text", "image", …) and its token estimate. */
  kind?: string;
  tokens?: number;
  /** The server said it is gone (deleted, or expired after 30 days): shown as such, never sent again. */
  gone?: boolean;
}

/** A file in the message box: uploading, stored by the Files API (ready), or refused with the reason why. */
export interface PendingAttachment {
  key: number;
  name: string;
  type: string;
  size: number;
  /** An object URL of the picked file for a thumbnail (images Chromium can show), else null. */
  previewUrl: string | null;
  /** Upload progress, 0 to 1. */
  progress: number;
  /** Set once the Files API stored it: its kind, status ("uploaded" while still being read) and token estimate. */
  file?: FileOut;
  /** Why it will not be sent: the window's check or the server's own words. */
  error?: string;
  /** Put back from a sent message (Edit): its file is being looked up on the server again. */
  restoring?: boolean;
}

/** What the window says went wrong, in plain words, and what fixes it. */
export interface ChatProblem {
  title: string;
  detail: string;
  /** Buttons offered under the message, in order. */
  actions: ProblemAction[];
  /** For set_context: the context size (tokens) that takes the conversation. */
  contextFigure?: number;
  /** For the curious and for support: the error's code and the request's id (never the server's prose). */
  reference?: string;
}

export type ProblemAction =
  | "retry"
  | "edit"
  | "send_without_attachments"
  | "open_models"
  | "open_model_settings"
  | "open_keys"
  | "new_chat"
  | "set_context";

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
  /** The token count is the window's own (a stopped answer gets no usage from the server). */
  counted?: boolean;
}

/** An agent run kept with the chat: what it did and how it ended. */
export interface AgentRunRecord {
  runId: string | null;
  /** The run's status (queued, in_progress, completed, cancelled, incomplete, failed, ...). */
  status: string;
  steps: RunStep[];
  usage: RunUsage | null;
  incomplete: string | null;
  error: string | null;
  fileIds: string[];
}

export interface Turn {
  id: string;
  /** "agent": an agent run's steps and answer, after the user's task. */
  role: "user" | "assistant" | "agent";
  content: string;
  reasoning: string;
  attachments: Attachment[];
  /** A user turn in "error" was never answered and is left out of what is sent next. */
  status: "streaming" | "done" | "stopped" | "error";
  effort?: Effort;
  problem?: ChatProblem;
  stats?: TurnStats;
  /** The answer ended at its length limit ("length"): Continue writes on. */
  finishReason?: string | null;
  /** While streaming: "waiting" (sent, no token yet), "thinking" or "writing". */
  phase?: "waiting" | "thinking" | "writing";
  startedAt?: number;
  agent?: AgentRunRecord;
}
