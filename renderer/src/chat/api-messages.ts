// The conversation as Chat Completions messages: the chat's system prompt, then each turn; files by id; an
// agent run's answer as the assistant's. A stopped answer at the end is continued (the server writes on after it).
import type OpenAI from "openai";
import type { Turn } from "./types";

export function toApiMessages(turns: Turn[], systemPrompt: string): OpenAI.Chat.ChatCompletionMessageParam[] {
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = systemPrompt.trim() ? [{ role: "system", content: systemPrompt.trim() }] : [];
  for (const t of turns) {
    // A file the server no longer has is left out, or every later message would fail on it.
    const files = t.attachments.filter((a) => !a.gone);
    // A refused or failed exchange is shown but never sent again: one bad message must not poison the rest.
    if (t.status === "error" || (t.content === "" && files.length === 0)) continue;
    if (t.role !== "user") messages.push({ role: "assistant", content: t.content });
    else if (files.length === 0) messages.push({ role: "user", content: t.content });
    else
      messages.push({
        role: "user",
        content: [...(t.content ? [{ type: "text" as const, text: t.content }] : []), ...files.map((a) => ({ type: "file" as const, file: { file_id: a.fileId } }))],
      });
  }
  return messages;
}

/** What an agent run answered: its last model step's text. */
export function agentAnswer(steps: ReadonlyArray<{ type: string; text?: string }>): string {
  return [...steps].reverse().find((s) => s.type === "model_call")?.text ?? "";
}
