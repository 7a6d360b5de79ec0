// Compaction, as OpenAI's Responses API does it, without keeping anything: the model writes a summary of the
// conversation, and the summary travels back to the client inside a `compaction` item. The client sends the
// item in later requests in place of the turns it summarises, and this server gives the model its summary.
// Two ways in: `POST /v1/responses/compact` (compact-routes.ts), and a `compaction_trigger` item at the end
// of a `/v1/responses` input (how Codex's remote compaction asks for it).
//
// The item's `encrypted_content` is not encrypted here: it is the summary, base64url-encoded behind a
// version tag. It is the client's own conversation, and the server keeps no key that would have to outlive it.
import { newId } from "../../core/ids.js";
import type { CanonicalMessage } from "../../core/inference.js";

/** What the model is asked to write when a conversation is compacted. */
export const COMPACTION_INSTRUCTION =
  "Compact the conversation so far. Write a summary that lets you (or another model) continue the work " +
  "without the earlier messages: the user's goal and requests, what has been done and decided, the state " +
  "of files, commands and tool results that still matter, open questions, and the next step. Be specific " +
  "and brief, keep names, paths and numbers exact, and write only the summary.";

/** Put before the summary when the model reads it back. */
export const SUMMARY_PREFIX = "Summary of the earlier part of this conversation, written when it was compacted:";

const CONTENT_TAG = "svc-compaction.v1.";

export interface CompactionItem {
  id: string;
  type: "compaction";
  encrypted_content: string;
}

export function encodeCompactionContent(summary: string): string {
  return CONTENT_TAG + Buffer.from(summary, "utf8").toString("base64url");
}

/** The summary in a compaction item this server wrote; null for anything else (e.g. OpenAI's own items). */
export function decodeCompactionContent(content: unknown): string | null {
  if (typeof content !== "string" || !content.startsWith(CONTENT_TAG)) return null;
  const data = content.slice(CONTENT_TAG.length);
  if (!/^[A-Za-z0-9_-]*$/.test(data)) return null;
  return Buffer.from(data, "base64url").toString("utf8");
}

export function compactionItem(summary: string, id = newId("cmp_")): CompactionItem {
  return { id, type: "compaction", encrypted_content: encodeCompactionContent(summary) };
}

export function summaryMessage(summary: string): CanonicalMessage {
  return { role: "user", content: [{ type: "text", text: `${SUMMARY_PREFIX}\n\n${summary}` }] };
}
