// The conversation on screen and the saved chats: which chat is open (the last one again after a restart),
// its turns, its own system prompt, saving (when an answer ends, never on every token), opening, renaming
// and deleting. Chats are kept by the window in its own storage (chat-store.ts); the server keeps nothing.
import { useCallback, useEffect, useRef, useState } from "react";
import { useSettings } from "../settings";
import { useWindow, windowStore } from "../state/window-state";
import { deleteAllChats, deleteChat, listChats, saveChat, titleFor, type SavedChat } from "./chat-store";
import type { Turn } from "./types";

/** The turns with these files marked gone (shown as such, never sent again). */
function withGone(turns: Turn[], gone: ReadonlySet<string>): Turn[] {
  if (gone.size === 0) return turns;
  let changed = false;
  const next = turns.map((t) => {
    if (!t.attachments.some((a) => gone.has(a.fileId) && !a.gone)) return t;
    changed = true;
    return { ...t, attachments: t.attachments.map((a) => (gone.has(a.fileId) ? { ...a, gone: true } : a)) };
  });
  return changed ? next : turns;
}

/** Files a chat sent that the window account no longer has (its file list is whole: at most 100 are kept). */
function missingFrom(turns: Turn[], present: ReadonlySet<string>): Set<string> {
  return new Set(turns.flatMap((t) => t.attachments.filter((a) => a.fileId && !a.gone && !present.has(a.fileId)).map((a) => a.fileId)));
}

/** Chats saved before attachments went through the Files API hold no file id (and may hold the bytes): never sent. */
function openedTurn(t: Turn): Turn {
  const attachments = t.attachments.map((a) => (a.fileId ? a : { name: a.name, type: a.type, size: a.size, fileId: "", gone: true }));
  return { ...t, attachments, status: t.status === "streaming" ? "stopped" : t.status };
}

export function useChatSession(busy: boolean) {
  const [settings, setSettings] = useSettings();
  const [chats, setChats] = useState<SavedChat[]>([]);
  const [chatId, setChatId] = useState<string | null>(null);
  const [turns, setTurns] = useState<Turn[]>([]);
  const [systemPrompt, setSystemPrompt] = useState(settings.systemPrompt);
  const [storageError, setStorageError] = useState<string | null>(null);
  const meta = useRef<{ createdAt: number; title: string | null }>({ createdAt: Date.now(), title: null });

  const refresh = useCallback(async () => {
    try {
      const all = await listChats();
      setChats(all);
      setStorageError(null);
      return all;
    } catch (err) {
      setStorageError(`Saved chats are unavailable: ${(err as Error).message}`);
      return [];
    }
  }, []);

  const open = useCallback(
    (chat: SavedChat) => {
      setChatId(chat.id);
      meta.current = { createdAt: chat.createdAt, title: chat.title };
      const turns = chat.turns.map(openedTurn);
      // A file deleted or expired since the chat was saved shows as gone at once (not at the next send).
      const files = windowStore.get().files;
      setTurns(files ? withGone(turns, missingFrom(turns, new Set(files.map((f) => f.id)))) : turns);
      setSystemPrompt(chat.systemPrompt ?? settings.systemPrompt);
      setSettings({ lastChatId: chat.id });
    },
    [settings.systemPrompt, setSettings],
  );

  // The chat open when the window last closed comes back.
  const reopened = useRef(false);
  useEffect(() => {
    void refresh().then((all) => {
      if (reopened.current) return;
      reopened.current = true;
      const last = all.find((c) => c.id === settings.lastChatId);
      if (last) open(last);
    });
    // Once, at start.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  // A file of this chat deleted meanwhile (Files page, another client, expiry) shows as gone at once: the
  // pushed list of the window account's files lost it.
  const fileIds = useWindow((state) => (state.files ? state.files.map((f) => f.id).join(" ") : null));
  const seenIds = useRef(new Set<string>());
  useEffect(() => {
    if (fileIds === null) return;
    const present = new Set(fileIds ? fileIds.split(" ") : []);
    const vanished = new Set([...seenIds.current].filter((id) => !present.has(id)));
    seenIds.current = present;
    setTurns((all) => withGone(all, vanished));
  }, [fileIds]);

  // Saved when an answer ends (not on every token), and after edits.
  useEffect(() => {
    if (busy || !chatId || turns.length === 0 || !settings.historyEnabled) return;
    const chat: SavedChat = {
      id: chatId,
      title: meta.current.title ?? titleFor(turns),
      createdAt: meta.current.createdAt,
      updatedAt: Date.now(),
      turns: turns.map(({ phase: _phase, ...rest }) => rest),
      systemPrompt,
    };
    saveChat(chat).then(
      () => {
        void refresh();
        if (settings.lastChatId !== chatId) setSettings({ lastChatId: chatId });
      },
      (err: Error) => setStorageError(`This chat could not be saved: ${err.message}`),
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [turns, busy, chatId, settings.historyEnabled, systemPrompt, refresh]);

  /** The open chat's id, made when its first message is sent. */
  const ensureId = useCallback(() => {
    if (chatId) return chatId;
    const id = crypto.randomUUID();
    setChatId(id);
    meta.current = { createdAt: Date.now(), title: null };
    return id;
  }, [chatId]);

  const reset = useCallback(() => {
    setTurns([]);
    setChatId(null);
    meta.current = { createdAt: Date.now(), title: null };
    setSystemPrompt(settings.systemPrompt);
    setSettings({ lastChatId: null });
  }, [settings.systemPrompt, setSettings]);

  const rename = async (chat: SavedChat, title: string) => {
    if (chat.id === chatId) meta.current.title = title;
    await saveChat({ ...chat, title });
    await refresh();
  };

  const remove = async (chat: SavedChat) => {
    await deleteChat(chat.id);
    if (chat.id === chatId) reset();
    await refresh();
  };

  const removeAll = async () => {
    await deleteAllChats();
    reset();
    // Not read back: that would create the database again, empty, before anything is saved.
    setChats([]);
  };

  /** The server no longer has this file: every message keeps it on its chip, and none sends it again. */
  const markGone = useCallback((fileId: string) => {
    setTurns((all) =>
      all.map((t) => (t.attachments.some((a) => a.fileId === fileId) ? { ...t, attachments: t.attachments.map((a) => (a.fileId === fileId ? { ...a, gone: true } : a)) } : t)),
    );
  }, []);

  const current = chats.find((c) => c.id === chatId);
  const title = current?.title ?? meta.current.title ?? (turns.length ? titleFor(turns) : null);
  return { chats, chatId, turns, setTurns, systemPrompt, setSystemPrompt, storageError, title, open, reset, ensureId, rename, remove, removeAll, markGone };
}

export type ChatSession = ReturnType<typeof useChatSession>;
