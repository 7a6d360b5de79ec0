// Export: the chat on screen as JSON (its system prompt, messages, files by id, agent runs with their steps),
// downloaded by the browser. Never a chat that is not shown.
import type { Turn } from "./types";

export function exportChat(title: string, systemPrompt: string, turns: Turn[]): void {
  const data = {
    exported_at: new Date().toISOString(),
    title,
    model: "svc",
    ...(systemPrompt.trim() ? { system: systemPrompt.trim() } : {}),
    messages: turns.map((t) => ({
      role: t.role,
      content: t.content,
      ...(t.reasoning ? { reasoning: t.reasoning } : {}),
      ...(t.attachments.length
        ? { attachments: t.attachments.map((a) => ({ name: a.name, type: a.type, size: a.size, file_id: a.fileId, ...(a.gone ? { gone: true } : {}) })) }
        : {}),
      ...(t.agent ? { agent_run: { run_id: t.agent.runId, status: t.agent.status, file_ids: t.agent.fileIds, steps: t.agent.steps, usage: t.agent.usage } } : {}),
      ...(t.status !== "done" ? { status: t.status } : {}),
    })),
  };
  const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: "application/json" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = `svc-chat-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
