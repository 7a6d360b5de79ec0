// Chat with the local model over the Chat Completions API, exactly as any OpenAI client does. Chats are saved
// by the window in its own storage (chat-store.ts); the server keeps nothing of them. Attached files are
// uploaded to the Files API and sent by id; a file refused (by the window's check or the server) is explained
// on its chip and never sent.
import OpenAI from "openai";
import { useCallback, useEffect, useRef, useState } from "react";
import type { DownloadView, FirstRunView, ServerInfo, StatusView } from "../../../server/features/console/contract";
import { PendingChip, pendingState } from "../chat/attachment-chip";
import { ATTACH_ACCEPT, ATTACHABLE_WORDS, hasPreview, screenAttachment } from "../chat/attachments";
import { describeChatError, isKeyRefused, missingFileId } from "../chat/chat-errors";
import { ChatList } from "../chat/chat-list";
import { deleteAllChats, deleteChat, listChats, saveChat, titleFor, type SavedChat } from "../chat/chat-store";
import { AgentPanel } from "../chat/agent-panel";
import { SettingsDrawer } from "../chat/settings-drawer";
import { TurnView } from "../chat/turn-view";
import type { Attachment, PendingAttachment, ProblemAction, Turn, TurnStats } from "../chat/types";
import { consoleApi, isDownloadRunning } from "../console-client";
import { FileApiError, getFile, KIND_LABEL, uploadFile, type FileOut } from "../files-client";
import { FirstRunPanel } from "../first-run";
import { formatBytes } from "../format";
import { Paperclip, Send, Settings2, Square } from "../icons";
import { defaultEffort, EFFORTS, useSettings, type Effort } from "../settings";
import { useDropTarget } from "../use-drop-target";

type Usage = OpenAI.CompletionUsage & { completion_tokens_details?: { reasoning_tokens?: number }; prompt_tokens_details?: { cached_tokens?: number } };

function newId(): string {
  return crypto.randomUUID();
}

function toApiMessages(turns: Turn[], systemPrompt: string): OpenAI.Chat.ChatCompletionMessageParam[] {
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = systemPrompt.trim() ? [{ role: "system", content: systemPrompt.trim() }] : [];
  for (const t of turns) {
    // A file the server no longer has is left out, or every later message would fail on it.
    const files = t.attachments.filter((a) => !a.gone);
    // A refused or failed exchange is shown but never sent again: one bad message must not poison the rest.
    if (t.status === "error" || (t.content === "" && files.length === 0)) continue;
    if (t.role === "assistant") messages.push({ role: "assistant", content: t.content });
    else if (files.length === 0) messages.push({ role: "user", content: t.content });
    else
      messages.push({
        role: "user",
        content: [
          ...(t.content ? [{ type: "text" as const, text: t.content }] : []),
          ...files.map((a) => ({ type: "file" as const, file: { file_id: a.fileId } })),
        ],
      });
  }
  return messages;
}

/** What a message keeps of a stored file: its metadata and id, never its bytes. */
function sentAttachment(a: PendingAttachment & { file: FileOut }): Attachment {
  return { name: a.name, type: a.file.mime_type, size: a.size, fileId: a.file.id, kind: a.file.content_kind, tokens: a.file.status === "processed" ? a.file.token_estimate : undefined };
}

const GONE_WORDS = "It is no longer on the server (deleted, or expired after 30 days); attach it again.";

/** An upload or lookup error in the chip's words. */
function uploadProblem(err: unknown): string {
  if (err instanceof FileApiError && err.status === 0) return "The window could not reach its server; try again in a moment.";
  return (err as Error).message;
}

/** Chats saved before attachments went through the Files API hold no file id (and may hold the bytes): never sent. */
function openedTurn(t: Turn): Turn {
  const attachments = t.attachments.map((a) => (a.fileId ? a : { name: a.name, type: a.type, size: a.size, fileId: "", gone: true }));
  return { ...t, attachments, status: t.status === "streaming" ? "stopped" : t.status };
}

function statsOf(t0: number, firstToken: number | null, firstAnswer: number | null, firstReasoning: number | null, end: number, usage: Usage | null): TurnStats {
  const completion = usage?.completion_tokens ?? null;
  const genMs = firstToken !== null ? end - firstToken : null;
  return {
    firstTokenMs: firstToken !== null ? firstToken - t0 : null,
    thinkingMs: firstReasoning !== null ? (firstAnswer ?? end) - firstReasoning : null,
    totalMs: end - t0,
    promptTokens: usage?.prompt_tokens ?? null,
    cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? null,
    completionTokens: completion,
    reasoningTokens: (usage as { reasoning_tokens?: number } | null)?.reasoning_tokens ?? usage?.completion_tokens_details?.reasoning_tokens ?? null,
    tokensPerSecond: completion !== null && genMs !== null && genMs > 0 && completion > 1 ? (completion - 1) / (genMs / 1000) : null,
  };
}

export interface ChatPageProps {
  info: ServerInfo | null;
  status: StatusView | null;
  offer: FirstRunView | null;
  downloads: DownloadView[];
  visible: boolean;
  /** Increments when the user asks for a new chat from anywhere (Ctrl+N). */
  newChatRequest: number;
  onGo: (page: "models") => void;
  /** Asks the window to read the server's state again now (after starting a download, say). */
  onRefresh: () => void;
}

export function ChatPage({ info, status, offer, downloads, visible, newChatRequest, onGo, onRefresh }: ChatPageProps) {
  const [settings, setSettings] = useSettings();
  const [chats, setChats] = useState<SavedChat[]>([]);
  const [chatId, setChatId] = useState<string | null>(null);
  const [turns, setTurns] = useState<Turn[]>([]);
  const [draft, setDraft] = useState("");
  const [attachments, setAttachments] = useState<PendingAttachment[]>([]);
  const [notice, setNotice] = useState<string | null>(null);
  const [drawerOpen, setDrawerOpen] = useState(false);
  /** Agent mode: the server's agent run over picked files instead of a chat (chat/agent-panel.tsx). */
  const [agentMode, setAgentMode] = useState(false);
  const [listOpen, setListOpen] = useState(false);
  const [announcement, setAnnouncement] = useState("");
  const [storageError, setStorageError] = useState<string | null>(null);
  const abortRef = useRef<AbortController | null>(null);
  const listRef = useRef<HTMLDivElement>(null);
  const inputRef = useRef<HTMLTextAreaElement>(null);
  const fileRef = useRef<HTMLInputElement>(null);
  const nextAttachment = useRef(1);
  /** Thumbnails of sent images, by file id, while this window holds the picked files (never saved). */
  const previews = useRef(new Map<string, string>());
  const stickToBottom = useRef(true);
  const chatMeta = useRef<{ createdAt: number; title: string | null }>({ createdAt: Date.now(), title: null });
  const streaming = turns.some((t) => t.status === "streaming");

  const hardware = defaultEffort(status?.gpu?.backend);
  const effort: Effort = settings.effort ?? hardware.effort;
  const modelState = status?.model.state ?? null;
  const modelReady = modelState === "ready";
  const runningDownload = downloads.find(isDownloadRunning) ?? null;

  const refreshChats = useCallback(async () => {
    try {
      setChats(await listChats());
      setStorageError(null);
    } catch (err) {
      setStorageError(`Saved chats are unavailable: ${(err as Error).message}`);
    }
  }, []);
  useEffect(() => {
    void refreshChats();
  }, [refreshChats]);

  // Follow the answer while the user is at the bottom; leave the view alone once they scroll up to read.
  const onScroll = () => {
    const el = listRef.current;
    if (el) stickToBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 48;
  };
  useEffect(() => {
    const el = listRef.current;
    if (el && stickToBottom.current) el.scrollTop = el.scrollHeight;
  }, [turns]);

  // Saved when an answer ends (not on every token), and after edits.
  useEffect(() => {
    if (streaming || !chatId || turns.length === 0 || !settings.historyEnabled) return;
    const chat: SavedChat = {
      id: chatId,
      title: chatMeta.current.title ?? titleFor(turns),
      createdAt: chatMeta.current.createdAt,
      updatedAt: Date.now(),
      turns: turns.map(({ phase: _phase, ...rest }) => rest),
    };
    saveChat(chat).then(refreshChats, (err: Error) => setStorageError(`This chat could not be saved: ${err.message}`));
  }, [turns, streaming, chatId, settings.historyEnabled, refreshChats]);

  const update = (id: string, change: (turn: Turn) => Partial<Turn>) => setTurns((all) => all.map((t) => (t.id === id ? { ...t, ...change(t) } : t)));

  const changeAttachment = (key: number, patch: Partial<PendingAttachment>) =>
    setAttachments((all) => all.map((a) => (a.key === key ? { ...a, ...patch } : a)));

  /** Calls the Files API with the window's key; a key revoked elsewhere is replaced once, as for the chat. */
  async function withKey<T>(call: (apiKey: string) => Promise<T>): Promise<T> {
    try {
      return await call(await consoleApi.windowKey());
    } catch (err) {
      if (!(err instanceof FileApiError && err.status === 401)) throw err;
      return call(await consoleApi.windowKey());
    }
  }

  /** Reads a stored file again until the server has read it (large media can take longer than the upload's answer). */
  async function followReading(key: number, file: FileOut) {
    let current = file;
    for (let i = 0; current.status === "uploaded" && i < 600 && info; i++) {
      await new Promise((r) => setTimeout(r, 1500));
      try {
        current = await withKey((apiKey) => getFile(info.openaiBaseUrl, apiKey, file.id));
      } catch {
        return;
      }
      changeAttachment(key, { file: current });
    }
  }

  function announceUpload(name: string, outcome: { file?: FileOut; error?: string }) {
    if (outcome.error) setAnnouncement(`${name} is not attached: ${outcome.error}`);
    else if (outcome.file?.status === "error") setAnnouncement(`${name} is not attached: ${outcome.file.status_details ?? "the server could not read it"}`);
    else if (outcome.file) setAnnouncement(`${name} is attached (${KIND_LABEL[outcome.file.content_kind] ?? outcome.file.content_kind}).`);
  }

  /**
   * Uploads each file through the Files API; its chip shows the progress, then what the model will get or why
   * not. A kind the model cannot read is turned away at once; a credential file or one over its kind's limit
   * is refused on its chip without being uploaded.
   */
  async function attach(files: FileList | File[]) {
    const turnedAway: string[] = [];
    const uploads: Array<{ file: File; key: number }> = [];
    const added: PendingAttachment[] = [];
    for (const file of Array.from(files)) {
      const check = screenAttachment(file);
      if (check.verdict === "unreadable") {
        turnedAway.push(check.reason);
        continue;
      }
      const key = nextAttachment.current++;
      const type = file.type || "application/octet-stream";
      const error = check.verdict === "refused" ? check.reason : !info ? "The server is not running yet; attach it again in a moment." : undefined;
      added.push({ key, name: file.name, type, size: file.size, previewUrl: !error && hasPreview(type) ? URL.createObjectURL(file) : null, progress: 0, error });
      if (error) announceUpload(file.name, { error });
      else uploads.push({ file, key });
    }
    setNotice(turnedAway.length ? turnedAway.join(" ") : null);
    setAttachments((current) => [...current, ...added]);
    if (!info || uploads.length === 0) return;
    await Promise.all(
      uploads.map(async ({ file, key }) => {
        try {
          const stored = await withKey((apiKey) => uploadFile(info.openaiBaseUrl, apiKey, file, (progress) => changeAttachment(key, { progress })));
          changeAttachment(key, { file: stored, progress: 1 });
          announceUpload(file.name, { file: stored });
          if (stored.status === "uploaded") void followReading(key, stored);
        } catch (err) {
          changeAttachment(key, { error: uploadProblem(err) });
          announceUpload(file.name, { error: uploadProblem(err) });
        }
      }),
    );
  }

  /** Frees a chip's thumbnail, unless a sent message still shows it. */
  const releasePreview = useCallback((url: string | null) => {
    if (url && ![...previews.current.values()].includes(url)) URL.revokeObjectURL(url);
  }, []);

  function removeAttachment(key: number) {
    releasePreview(attachments.find((a) => a.key === key)?.previewUrl ?? null);
    setAttachments((all) => all.filter((a) => a.key !== key));
  }

  /** Puts a sent message's files back in the message box (Edit), checking each is still on the server. */
  function restoreAttachments(sent: Attachment[]) {
    const restored = sent.map((a): PendingAttachment => ({
      key: nextAttachment.current++,
      name: a.name,
      type: a.type,
      size: a.size,
      previewUrl: a.gone ? null : (previews.current.get(a.fileId) ?? null),
      progress: 1,
      ...(a.gone ? { error: GONE_WORDS } : { restoring: true }),
    }));
    setAttachments(restored);
    if (!info) return;
    restored.forEach((pending, i) => {
      const a = sent[i]!;
      if (a.gone) return;
      withKey((apiKey) => getFile(info.openaiBaseUrl, apiKey, a.fileId)).then(
        (file) => changeAttachment(pending.key, { file, restoring: false }),
        (err: unknown) =>
          changeAttachment(pending.key, {
            restoring: false,
            error: err instanceof FileApiError && err.status === 404 ? GONE_WORDS : uploadProblem(err),
          }),
      );
    });
  }

  /** The server no longer has this file: every message keeps it on its chip, and none sends it again. */
  function markGone(fileId: string) {
    setTurns((all) =>
      all.map((t) => (t.attachments.some((a) => a.fileId === fileId) ? { ...t, attachments: t.attachments.map((a) => (a.fileId === fileId ? { ...a, gone: true } : a)) } : t)),
    );
  }

  /** Streams an answer to `history`, whose last turn is the user's. */
  async function answer(history: Turn[]) {
    if (!info) return;
    const user = history.at(-1)!;
    const reply: Turn = { id: newId(), role: "assistant", content: "", reasoning: "", attachments: [], status: "streaming", effort, phase: "waiting", startedAt: Date.now() };
    stickToBottom.current = true;
    if (!chatId) {
      setChatId(newId());
      chatMeta.current = { createdAt: Date.now(), title: null };
    }
    setTurns([...history.map((t) => (t.id === user.id ? { ...t, status: "done" as const, problem: undefined } : t)), reply]);
    setAnnouncement("");
    const abort = new AbortController();
    abortRef.current = abort;
    const t0 = performance.now();
    let firstToken: number | null = null;
    let firstAnswer: number | null = null;
    let firstReasoning: number | null = null;
    let usage: Usage | null = null;
    let content = "";
    const body: OpenAI.Chat.ChatCompletionCreateParamsStreaming = {
      model: "svc",
      messages: toApiMessages(history, settings.systemPrompt),
      stream: true,
      reasoning_effort: effort as OpenAI.ReasoningEffort,
      ...(settings.temperature !== null ? { temperature: settings.temperature } : {}),
      ...(settings.maxTokens !== null ? { max_tokens: settings.maxTokens } : {}),
    };
    const run = async (apiKey: string) => {
      const client = new OpenAI({ baseURL: info.openaiBaseUrl, apiKey, dangerouslyAllowBrowser: true, maxRetries: 0 });
      const stream = await client.chat.completions.create(body, { signal: abort.signal });
      for await (const chunk of stream) {
        if (chunk.usage) usage = chunk.usage as Usage;
        const delta = chunk.choices[0]?.delta as (OpenAI.Chat.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string }) | undefined;
        if (!delta) continue;
        const now = performance.now();
        if (delta.reasoning_content) {
          firstToken ??= now;
          firstReasoning ??= now;
          update(reply.id, (t) => ({ reasoning: t.reasoning + delta.reasoning_content, phase: "thinking" }));
        }
        if (delta.content) {
          firstToken ??= now;
          firstAnswer ??= now;
          content += delta.content;
          update(reply.id, (t) => ({ content: t.content + delta.content, phase: "writing" }));
        }
      }
    };
    try {
      try {
        await run(await consoleApi.windowKey());
      } catch (err) {
        // The window's key was revoked elsewhere: the main process makes a new one; send once more.
        if (!isKeyRefused(err) || abort.signal.aborted) throw err;
        await run(await consoleApi.windowKey());
      }
      const stats = statsOf(t0, firstToken, firstAnswer, firstReasoning, performance.now(), usage);
      // The SDK ends the iteration quietly when the request is aborted.
      update(reply.id, () => ({ status: abort.signal.aborted ? "stopped" : "done", phase: undefined, stats }));
      setAnnouncement(abort.signal.aborted ? "Stopped." : `The model answered: ${content.slice(0, 600)}`);
    } catch (err) {
      if (abort.signal.aborted) {
        update(reply.id, () => ({ status: "stopped", phase: undefined }));
        setAnnouncement("Stopped.");
      } else {
        const earlier = history.slice(0, -1).flatMap((t) => (t.status === "error" ? [] : t.attachments.filter((a) => !a.gone)));
        const problem = describeChatError(err, { text: user.content, attachments: user.attachments, earlier });
        // The user's message stays visible, marked as not answered, and is left out of what is sent next.
        setTurns((all) => all.map((t) => (t.id === reply.id ? { ...t, status: "error", phase: undefined, problem } : t.id === user.id ? { ...t, status: "error" } : t)));
        const gone = missingFileId(err);
        if (gone) markGone(gone);
        setAnnouncement(`${problem.title} ${problem.detail}`);
      }
    } finally {
      abortRef.current = null;
    }
  }

  // Files still uploading hold Send back; refused ones are left behind (their chips said why).
  const uploading = attachments.some((a) => pendingState(a) === "uploading");
  const ready = attachments.filter((a): a is PendingAttachment & { file: FileOut } => a.file !== undefined && a.file.status !== "error" && !a.error);

  function send() {
    const text = draft.trim();
    if ((!text && ready.length === 0) || uploading || streaming || !info || !modelReady) return;
    setNotice(null);
    for (const a of ready) if (a.previewUrl) previews.current.set(a.file.id, a.previewUrl);
    for (const a of attachments) releasePreview(a.previewUrl);
    const user: Turn = { id: newId(), role: "user", content: text, reasoning: "", attachments: ready.map(sentAttachment), status: "done" };
    setDraft("");
    setAttachments([]);
    void answer([...turns, user]);
  }

  const stop = useCallback(() => abortRef.current?.abort(), []);

  const newChat = useCallback(() => {
    abortRef.current?.abort();
    setTurns([]);
    setChatId(null);
    chatMeta.current = { createdAt: Date.now(), title: null };
    setDraft("");
    setAttachments((all) => {
      for (const a of all) releasePreview(a.previewUrl);
      return [];
    });
    setNotice(null);
    setListOpen(false);
    setTimeout(() => inputRef.current?.focus(), 0);
  }, [releasePreview]);

  useEffect(() => {
    if (newChatRequest > 0) newChat();
  }, [newChatRequest, newChat]);

  // Esc stops the answer being written.
  useEffect(() => {
    if (!visible) return;
    const onKey = (event: KeyboardEvent) => {
      if (event.key === "Escape" && abortRef.current) {
        event.preventDefault();
        stop();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [visible, stop]);

  function openChat(chat: SavedChat) {
    if (streaming) return;
    setChatId(chat.id);
    chatMeta.current = { createdAt: chat.createdAt, title: chat.title };
    setTurns(chat.turns.map(openedTurn));
    setListOpen(false);
  }

  /** The failed exchange ending at `answerId`: its user turn and the text to work with. */
  function failedPair(answerId: string): { user: Turn; before: Turn[] } | null {
    const index = turns.findIndex((t) => t.id === answerId);
    const user = turns[index - 1];
    if (index < 1 || !user || user.role !== "user") return null;
    return { user, before: turns.slice(0, index - 1) };
  }

  function onProblemAction(answerId: string, action: ProblemAction) {
    const pair = failedPair(answerId);
    switch (action) {
      case "open_models":
        onGo("models");
        return;
      case "new_chat":
        newChat();
        return;
      case "retry":
        if (pair) void answer([...pair.before, { ...pair.user, status: "done" }]);
        return;
      case "send_without_attachments":
        if (!pair) return;
        if (!pair.user.content) {
          setTurns(pair.before);
          return;
        }
        void answer([...pair.before, { ...pair.user, id: newId(), attachments: [], status: "done" }]);
        return;
      case "edit":
        if (!pair) return;
        setTurns(pair.before);
        setDraft(pair.user.content);
        restoreAttachments(pair.user.attachments);
        setTimeout(() => inputRef.current?.focus(), 0);
        return;
    }
  }

  function regenerate(answerId: string) {
    const index = turns.findIndex((t) => t.id === answerId);
    if (index < 1 || streaming) return;
    void answer(turns.slice(0, index));
  }

  function resendEdited(userId: string, text: string) {
    const index = turns.findIndex((t) => t.id === userId);
    if (index < 0 || streaming || !modelReady) return;
    const original = turns[index]!;
    void answer([...turns.slice(0, index), { ...original, id: newId(), content: text.trim(), status: "done" }]);
  }

  function exportConversation() {
    const data = {
      exported_at: new Date().toISOString(),
      model: "svc",
      ...(settings.systemPrompt.trim() ? { system: settings.systemPrompt.trim() } : {}),
      messages: turns.map((t) => ({
        role: t.role,
        content: t.content,
        ...(t.reasoning ? { reasoning: t.reasoning } : {}),
        ...(t.attachments.length
          ? { attachments: t.attachments.map((a) => ({ name: a.name, type: a.type, size: a.size, file_id: a.fileId, ...(a.gone ? { gone: true } : {}) })) }
          : {}),
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

  const drop = useDropTarget((files) => void attach(files));

  const lastAssistant = [...turns].reverse().find((t) => t.role === "assistant");
  const blocked = !info ? "Waiting for the server…" : modelState === "loading" ? "The model is loading…" : !modelReady ? "Get a model first (see above)." : null;
  const current = chats.find((c) => c.id === chatId);

  return (
    <section
      className={`page chat ${drop.dragging ? "dragging" : ""} ${drawerOpen ? "with-drawer" : ""} ${listOpen ? "list-open" : ""}`}
      data-testid="chat-page"
      aria-labelledby="chat-title"
      {...drop.handlers}
    >
      <ChatList
        chats={chats}
        currentId={chatId}
        busy={streaming}
        historyEnabled={settings.historyEnabled}
        storageError={storageError}
        onNew={newChat}
        onOpen={openChat}
        onRename={async (chat, title) => {
          if (chat.id === chatId) chatMeta.current.title = title;
          await saveChat({ ...chat, title });
          await refreshChats();
        }}
        onDelete={async (chat) => {
          await deleteChat(chat.id);
          if (chat.id === chatId) newChat();
          await refreshChats();
        }}
        onDeleteAll={async () => {
          await deleteAllChats();
          newChat();
          // Not read back: that would create the database again, empty, before anything is saved.
          setChats([]);
        }}
        onHistory={(enabled) => setSettings({ historyEnabled: enabled })}
      />

      <div className="chat-main">
        <header className="page-header">
          <div className="title-row">
            <button className="chats-toggle" aria-expanded={listOpen} onClick={() => setListOpen((v) => !v)}>
              Chats
            </button>
            <h1 id="chat-title">{agentMode ? "Agent" : (current?.title ?? (turns.length ? titleFor(turns) : "Chat"))}</h1>
          </div>
          <div className="toolbar">
            <label>
              Thinking{" "}
              <select data-testid="chat-effort" value={effort} onChange={(e) => setSettings({ effort: e.target.value as Effort })} disabled={streaming}>
                {EFFORTS.map((e) => (
                  <option key={e.value} value={e.value}>
                    {e.label}
                  </option>
                ))}
              </select>
            </label>
            <button data-testid="chat-settings" aria-expanded={drawerOpen} aria-controls="chat-settings-drawer" onClick={() => setDrawerOpen((v) => !v)}>
              <Settings2 size={15} aria-hidden /> Settings
            </button>
            <button data-testid="chat-agent-mode" aria-pressed={agentMode} onClick={() => setAgentMode((v) => !v)} disabled={streaming}>
              Agent
            </button>
            <button data-testid="chat-export" onClick={exportConversation} disabled={turns.length === 0}>
              Export
            </button>
          </div>
        </header>
        {settings.effort === null && status && (
          <p className="hint" data-testid="effort-hint">
            {hardware.reason}
          </p>
        )}

        {agentMode && info ? (
          <AgentPanel baseUrl={info.openaiBaseUrl} effort={effort} />
        ) : (
        <>
        <div className="turns" ref={listRef} onScroll={onScroll} data-testid="chat-turns" tabIndex={0} aria-label="Conversation">
          {turns.length === 0 && (
            <EmptyChat info={info} status={status} offer={offer} download={runningDownload} downloads={downloads} onGo={onGo} onRefresh={onRefresh} />
          )}
          {turns.map((turn) => (
            <TurnView
              key={turn.id}
              turn={turn}
              busy={streaming}
              canEdit={modelReady}
              isLastAnswer={turn.id === lastAssistant?.id}
              onRegenerate={() => regenerate(turn.id)}
              onResend={(text) => resendEdited(turn.id, text)}
              onProblemAction={(action) => onProblemAction(turn.id, action)}
              previewOf={(fileId) => previews.current.get(fileId) ?? null}
            />
          ))}
        </div>
        <div className="sr-only" aria-live="polite" data-testid="chat-announcer">
          {announcement}
        </div>

        {notice && (
          <p className="notice" role="status" data-testid="chat-notice">
            {notice}
          </p>
        )}
        {attachments.length > 0 && (
          <ul className="attachments pending" data-testid="chat-attachments" aria-label="Attachments to send">
            {attachments.map((a) => (
              <li key={a.key} data-testid="chat-attachment" data-state={pendingState(a)}>
                <PendingChip attachment={a} onRemove={() => removeAttachment(a.key)} />
              </li>
            ))}
          </ul>
        )}
        <form
          className="composer"
          onSubmit={(e) => {
            e.preventDefault();
            send();
          }}
        >
          <label htmlFor="chat-input" className="sr-only">
            Message
          </label>
          <textarea
            id="chat-input"
            ref={inputRef}
            data-testid="chat-input"
            value={draft}
            placeholder={blocked ?? "Message the local model (Enter sends, Shift+Enter for a new line, Esc stops)"}
            onChange={(e) => setDraft(e.target.value)}
            onKeyDown={(e) => {
              if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
                e.preventDefault();
                send();
              }
            }}
            rows={3}
          />
          <div className="composer-actions">
            <input
              ref={fileRef}
              type="file"
              multiple
              hidden
              accept={ATTACH_ACCEPT}
              data-testid="chat-attach"
              onChange={(e) => {
                if (e.target.files) void attach(e.target.files);
                e.target.value = "";
              }}
            />
            <button type="button" data-testid="chat-attach-button" onClick={() => fileRef.current?.click()} title={`Attach files: ${ATTACHABLE_WORDS}`}>
              <Paperclip size={15} aria-hidden /> Attach
            </button>
            {streaming ? (
              <button type="button" className="danger" data-testid="chat-stop" onClick={stop} title="Stop (Esc)">
                <Square size={14} aria-hidden /> Stop
              </button>
            ) : (
              <button
                type="submit"
                className="primary"
                data-testid="chat-send"
                disabled={blocked !== null || uploading || (!draft.trim() && ready.length === 0)}
                title={uploading ? "Waiting for the attachments to upload" : undefined}
              >
                <Send size={14} aria-hidden /> Send
              </button>
            )}
          </div>
        </form>
        {blocked && info && (
          <p className="muted small" data-testid="chat-blocked">
            {blocked}
          </p>
        )}
        </>
        )}
      </div>

      <SettingsDrawer open={drawerOpen} onClose={() => setDrawerOpen(false)} effort={effort} />
    </section>
  );
}

/** What an empty chat shows: how to get a model on a first run, its download, and when it is ready. */
function EmptyChat({
  info,
  status,
  offer,
  download,
  downloads,
  onGo,
  onRefresh,
}: {
  info: ServerInfo | null;
  status: StatusView | null;
  offer: FirstRunView | null;
  download: DownloadView | null;
  downloads: DownloadView[];
  onGo: (page: "models") => void;
  onRefresh: () => void;
}) {
  if (!info || !status) return <p className="empty">Waiting for the server…</p>;
  const state = status.model.state;
  if (download) {
    const percent = download.totalBytes > 0 ? Math.floor((download.downloadedBytes / download.totalBytes) * 100) : null;
    return (
      <div className="card first-run" data-testid="first-run-progress">
        <h2>Downloading {download.file ?? download.source}</h2>
        <progress max={100} value={percent ?? undefined} aria-label="Download progress" />
        <p className="muted">
          {percent !== null ? `${percent}% · ` : ""}
          {formatBytes(download.downloadedBytes)}
          {download.totalBytes ? ` of ${formatBytes(download.totalBytes)}` : ""}. The chat opens when it is done; you can leave this page meanwhile.
        </p>
      </div>
    );
  }
  if (state === "loading")
    return (
      <p className="empty" data-testid="model-loading">
        Loading the model… the chat opens in a few seconds.
      </p>
    );
  if (state === "ready") {
    const justDownloaded = downloads.some((d) => d.phase === "done");
    return (
      <div className="empty ready" data-testid="model-ready">
        <p>
          <strong>{status.model.name ?? status.model.file}</strong> is ready{justDownloaded ? " — the download is complete" : ""}. Ask it anything.
        </p>
        <p className="muted">Drop files here to attach them: {ATTACHABLE_WORDS}. Ctrl+N starts a new chat; Esc stops an answer.</p>
      </div>
    );
  }
  if (offer) return <FirstRunPanel offer={offer} onStarted={onRefresh} onChoose={() => onGo("models")} />;
  return (
    <div className="card" data-testid="no-model">
      <h2>No model is loaded</h2>
      <p>{status.model.error ? `The last load failed: ${status.model.error}` : "Pick a model on the Model page to start chatting."}</p>
      <button className="primary" onClick={() => onGo("models")}>
        Open the Model page
      </button>
    </div>
  );
}
