// Chat with the local model over the Chat Completions API, exactly as any OpenAI client does. The conversation
// lives in this window only (the server keeps nothing); Export saves it as JSON. Attached files are uploaded
// to the Files API and sent by id; a file the server refuses is explained on its chip and never sent.
import OpenAI from "openai";
import { useEffect, useRef, useState, type DragEvent } from "react";
import type { ServerInfo } from "../../../server/features/console/contract";
import { consoleApi } from "../console-client";
import { KIND_LABEL, uploadFile, type FileOut } from "../files-client";
import { formatBytes } from "../format";
import { Markdown } from "../markdown";

type Mode = "fast" | "thinking";
type Effort = "low" | "medium" | "high";

interface Attachment {
  key: number;
  name: string;
  type: string;
  size: number;
  /** An object URL for images, shown on the chip. */
  previewUrl: string | null;
  progress: number;
  /** Set once the Files API stored it. */
  file?: FileOut;
  /** Why the server refused it. */
  error?: string;
}

interface Turn {
  id: number;
  role: "user" | "assistant";
  content: string;
  reasoning: string;
  attachments: Attachment[];
  /** error on a user turn: the server refused the message, so it is left out of the conversation. */
  status: "streaming" | "done" | "stopped" | "error";
  mode?: Mode;
  error?: string;
}

function toApiMessages(turns: Turn[]): OpenAI.Chat.ChatCompletionMessageParam[] {
  return turns
    .filter((t) => t.status !== "error" && (t.content !== "" || t.attachments.length > 0))
    .map((t): OpenAI.Chat.ChatCompletionMessageParam => {
      if (t.role === "assistant") return { role: "assistant", content: t.content };
      if (t.attachments.length === 0) return { role: "user", content: t.content };
      return {
        role: "user",
        content: [
          ...(t.content ? [{ type: "text" as const, text: t.content }] : []),
          ...t.attachments.map((a) => ({ type: "file" as const, file: { file_id: a.file!.id } })),
        ],
      };
    });
}

export function ChatPage({ info }: { info: ServerInfo | null }) {
  const [turns, setTurns] = useState<Turn[]>([]);
  const [draft, setDraft] = useState("");
  const [mode, setMode] = useState<Mode>("thinking");
  const [effort, setEffort] = useState<Effort>("medium");
  const [attachments, setAttachments] = useState<Attachment[]>([]);
  const [notice, setNotice] = useState<string | null>(null);
  const [dragging, setDragging] = useState(false);
  const abortRef = useRef<AbortController | null>(null);
  const nextId = useRef(1);
  const nextAttachment = useRef(1);
  const listRef = useRef<HTMLDivElement>(null);
  const streaming = turns.some((t) => t.status === "streaming");

  useEffect(() => {
    listRef.current?.scrollTo({ top: listRef.current.scrollHeight });
  }, [turns]);

  const update = (id: number, change: (turn: Turn) => Partial<Turn>) =>
    setTurns((all) => all.map((t) => (t.id === id ? { ...t, ...change(t) } : t)));

  const changeAttachment = (key: number, patch: Partial<Attachment>) =>
    setAttachments((all) => all.map((a) => (a.key === key ? { ...a, ...patch } : a)));

  /** Uploads each file through the Files API; its chip shows progress, then what the model will get or why not. */
  async function attach(files: FileList | File[]) {
    if (!info) return;
    const added: Array<{ file: File; attachment: Attachment }> = Array.from(files).map((file) => ({
      file,
      attachment: {
        key: nextAttachment.current++,
        name: file.name,
        type: file.type || "application/octet-stream",
        size: file.size,
        previewUrl: file.type.startsWith("image/") ? URL.createObjectURL(file) : null,
        progress: 0,
      },
    }));
    setAttachments((current) => [...current, ...added.map((a) => a.attachment)]);
    const apiKey = await consoleApi.windowKey();
    await Promise.all(
      added.map(async ({ file, attachment }) => {
        try {
          const stored = await uploadFile(info.openaiBaseUrl, apiKey, file, (progress) => changeAttachment(attachment.key, { progress }));
          changeAttachment(attachment.key, { file: stored, progress: 1 });
        } catch (err) {
          changeAttachment(attachment.key, { error: (err as Error).message });
        }
      }),
    );
  }

  const uploading = attachments.some((a) => !a.file && !a.error);
  const ready = attachments.filter((a) => a.file && a.file.status !== "error");

  async function send() {
    const text = draft.trim();
    if ((!text && ready.length === 0) || streaming || uploading || !info) return;
    setNotice(null);
    const user: Turn = { id: nextId.current++, role: "user", content: text, reasoning: "", attachments: ready, status: "done" };
    const answer: Turn = { id: nextId.current++, role: "assistant", content: "", reasoning: "", attachments: [], status: "streaming", mode };
    const history = [...turns, user];
    setTurns([...history, answer]);
    setDraft("");
    setAttachments([]);
    const abort = new AbortController();
    abortRef.current = abort;
    try {
      const apiKey = await consoleApi.windowKey();
      const client = new OpenAI({ baseURL: info.openaiBaseUrl, apiKey, dangerouslyAllowBrowser: true, maxRetries: 0 });
      const stream = await client.chat.completions.create(
        {
          model: "svc",
          messages: toApiMessages(history),
          stream: true,
          reasoning_effort: (mode === "fast" ? "none" : effort) as OpenAI.ReasoningEffort,
        },
        { signal: abort.signal },
      );
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta as (OpenAI.Chat.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string }) | undefined;
        if (!delta) continue;
        if (delta.reasoning_content) update(answer.id, (t) => ({ reasoning: t.reasoning + delta.reasoning_content }));
        if (delta.content) update(answer.id, (t) => ({ content: t.content + delta.content }));
      }
      // The SDK ends the iteration quietly when the request is aborted.
      update(answer.id, () => ({ status: abort.signal.aborted ? "stopped" : "done" }));
    } catch (err) {
      if (abort.signal.aborted) update(answer.id, () => ({ status: "stopped" }));
      else {
        update(answer.id, () => ({ status: "error", error: (err as Error).message }));
        // A message the server refused (a file it cannot use, ...) would fail every later request too.
        const status = (err as { status?: number }).status;
        if (status !== undefined && status >= 400 && status < 500 && status !== 429) update(user.id, () => ({ status: "error" }));
      }
    } finally {
      abortRef.current = null;
    }
  }

  function stop() {
    abortRef.current?.abort();
  }

  function exportConversation() {
    const data = {
      exported_at: new Date().toISOString(),
      model: "svc",
      messages: turns.map((t) => ({
        role: t.role,
        content: t.content,
        ...(t.reasoning ? { reasoning: t.reasoning } : {}),
        ...(t.attachments.length ? { attachments: t.attachments.map((a) => ({ name: a.name, type: a.type, size: a.size, file_id: a.file?.id })) } : {}),
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

  const onDrop = (event: DragEvent) => {
    event.preventDefault();
    setDragging(false);
    if (event.dataTransfer.files.length) void attach(event.dataTransfer.files);
  };

  return (
    <section
      className={`page chat ${dragging ? "dragging" : ""}`}
      data-testid="chat-page"
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={onDrop}
    >
      <header className="page-header">
        <h1>Chat</h1>
        <div className="toolbar">
          <label>
            Mode{" "}
            <select data-testid="chat-mode" value={mode} onChange={(e) => setMode(e.target.value as Mode)} disabled={streaming}>
              <option value="fast">Fast</option>
              <option value="thinking">Thinking</option>
            </select>
          </label>
          {mode === "thinking" && (
            <label>
              Effort{" "}
              <select data-testid="chat-effort" value={effort} onChange={(e) => setEffort(e.target.value as Effort)} disabled={streaming}>
                <option value="low">Low</option>
                <option value="medium">Medium</option>
                <option value="high">High</option>
              </select>
            </label>
          )}
          <button data-testid="chat-export" onClick={exportConversation} disabled={turns.length === 0}>
            Export
          </button>
          <button data-testid="chat-clear" onClick={() => setTurns([])} disabled={streaming || turns.length === 0}>
            New chat
          </button>
        </div>
      </header>

      <div className="turns" ref={listRef} data-testid="chat-turns">
        {turns.length === 0 && <p className="empty">Ask the local model anything. Drop files here (text, PDF, images, audio, video) to attach them.</p>}
        {turns.map((turn) => (
          <article key={turn.id} className={`turn ${turn.role}`} data-testid={`turn-${turn.role}`} data-status={turn.status}>
            {turn.role === "assistant" && turn.reasoning && (
              <details className="reasoning" data-testid="turn-reasoning" open={turn.status === "streaming"}>
                <summary>Thought{turn.status === "streaming" && !turn.content ? "…" : ""}</summary>
                <div className="reasoning-text" data-testid="turn-reasoning-text">
                  {turn.reasoning}
                </div>
              </details>
            )}
            {turn.role === "assistant" ? <Markdown text={turn.content} testId="turn-content" /> : <p data-testid="turn-content">{turn.content}</p>}
            {turn.attachments.length > 0 && (
              <ul className="attachments">
                {turn.attachments.map((a) => (
                  <li key={a.key}>
                    <AttachmentChip attachment={a} />
                  </li>
                ))}
              </ul>
            )}
            {turn.role === "user" && turn.status === "error" && (
              <p className="turn-note error" data-testid="turn-refused">
                The server refused this message; it is left out of the conversation.
              </p>
            )}
            {turn.status === "stopped" && <p className="turn-note" data-testid="turn-stopped">Stopped.</p>}
            {turn.status === "error" && (
              <p className="turn-note error" data-testid="turn-error">
                {turn.error}
              </p>
            )}
          </article>
        ))}
      </div>

      {notice && <p className="notice">{notice}</p>}
      {attachments.length > 0 && (
        <ul className="attachments pending" data-testid="chat-attachments">
          {attachments.map((a) => (
            <li key={a.key} data-testid="chat-attachment" data-state={a.error ? "refused" : a.file ? "ready" : "uploading"}>
              <AttachmentChip attachment={a} onRemove={() => setAttachments((all) => all.filter((x) => x.key !== a.key))} />
            </li>
          ))}
        </ul>
      )}
      <form
        className="composer"
        onSubmit={(e) => {
          e.preventDefault();
          void send();
        }}
      >
        <textarea
          data-testid="chat-input"
          value={draft}
          placeholder={info ? "Message the local model (Enter sends, Shift+Enter for a new line)" : "Waiting for the server…"}
          onChange={(e) => setDraft(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey) {
              e.preventDefault();
              void send();
            }
          }}
          rows={3}
        />
        <div className="composer-actions">
          <label className="button">
            Attach
            <input
              type="file"
              multiple
              hidden
              data-testid="chat-attach"
              onChange={(e) => {
                if (e.target.files) void attach(e.target.files);
                e.target.value = "";
              }}
            />
          </label>
          {streaming ? (
            <button type="button" className="danger" data-testid="chat-stop" onClick={stop}>
              Stop
            </button>
          ) : (
            <button type="submit" className="primary" data-testid="chat-send" disabled={!info || uploading || (!draft.trim() && ready.length === 0)}>
              Send
            </button>
          )}
        </div>
      </form>
    </section>
  );
}

function AttachmentChip({ attachment: a, onRemove }: { attachment: Attachment; onRemove?: () => void }) {
  const kind = a.file ? (KIND_LABEL[a.file.content_kind] ?? a.file.content_kind) : (a.name.split(".").pop() ?? "").toUpperCase().slice(0, 4);
  let detail: string;
  if (a.error) detail = `Not attached: ${a.error}`;
  else if (!a.file) detail = a.progress < 1 ? `uploading ${Math.round(a.progress * 100)}%` : "reading…";
  else if (a.file.status === "error") detail = `Not usable: ${a.file.status_details ?? "it could not be read"}`;
  else if (a.file.status === "uploaded") detail = `${kind} · still being read`;
  else detail = `${kind} · ≈ ${a.file.token_estimate.toLocaleString()} tokens`;
  const failed = Boolean(a.error) || a.file?.status === "error";
  return (
    <span className={`chip ${failed ? "failed" : ""}`} data-testid="attachment-chip" title={detail}>
      {a.previewUrl && !failed ? <img src={a.previewUrl} alt="" /> : <span className="chip-icon">{kind || "FILE"}</span>}
      <span className="chip-text">
        <span>
          {a.name} <span className="muted">({formatBytes(a.size)})</span>
        </span>
        <span className={`small ${failed ? "error" : "muted"}`} data-testid="attachment-detail">
          {detail}
        </span>
      </span>
      {onRemove && (
        <button className="link" onClick={onRemove} aria-label={`Remove ${a.name}`}>
          ✕
        </button>
      )}
    </span>
  );
}
