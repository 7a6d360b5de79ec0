// The conversation on screen and the saved chats: which chat is open (the last one again after a restart),
// its turns, its own system prompt, saving (when an answer ends, never on every token), opening, renaming
// and deleting. Chats are kept by the window in its own storage (chat-store.ts); the server keeps nothing.
import { useCallback, useEffect, useRef, useState } from "react";
import { useSettings } from "../settings";
import { deleteAllChats, deleteChat, listChats, saveChat, titleFor, type SavedChat } from "./chat-store";
import type { Turn } from "./types";

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
      setTurns(chat.turns.map(openedTurn));
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
