// The saved chats: new, open, rename, delete, search; history on or off; delete all. In a narrow window the
// list slides over the conversation: Esc or a click outside it closes it (and gives focus back to its toggle).
import { useEffect, useRef, useState, type RefObject } from "react";
import { MessageSquarePlus, Pencil, Search, Trash2 } from "../icons";
import { searchChats, type SavedChat } from "./chat-store";

export function ChatList({
  chats,
  currentId,
  busy,
  historyEnabled,
  storageError,
  onNew,
  onOpen,
  onRename,
  onDelete,
  onDeleteAll,
  onHistory,
  overlay,
  toggleRef,
  onClose,
}: {
  chats: SavedChat[];
  currentId: string | null;
  busy: boolean;
  historyEnabled: boolean;
  storageError: string | null;
  onNew: () => void;
  onOpen: (chat: SavedChat) => void;
  onRename: (chat: SavedChat, title: string) => Promise<void>;
  onDelete: (chat: SavedChat) => Promise<void>;
  onDeleteAll: () => Promise<void>;
  onHistory: (enabled: boolean) => void;
  /** Shown over the conversation (a narrow window's open list). */
  overlay: boolean;
  toggleRef: RefObject<HTMLButtonElement | null>;
  onClose: () => void;
}) {
  const ref = useRef<HTMLElement>(null);
  useEffect(() => {
    if (!overlay) return;
    const onKey = (event: KeyboardEvent) => {
      if (event.key !== "Escape" || event.defaultPrevented) return;
      event.preventDefault();
      onClose();
      toggleRef.current?.focus();
    };
    const onDown = (event: PointerEvent) => {
      const target = event.target as Node;
      if (ref.current?.contains(target) || toggleRef.current?.contains(target)) return;
      onClose();
    };
    window.addEventListener("keydown", onKey);
    document.addEventListener("pointerdown", onDown);
    return () => {
      window.removeEventListener("keydown", onKey);
      document.removeEventListener("pointerdown", onDown);
    };
  }, [overlay, onClose, toggleRef]);
  const [query, setQuery] = useState("");
  const [renaming, setRenaming] = useState<{ id: string; title: string } | null>(null);
  const [confirming, setConfirming] = useState<string | null>(null);
  const shown = searchChats(chats, query);

  return (
    <aside ref={ref} id="chat-list" className="chat-list" aria-label="Saved chats" data-testid="chat-list">
      <button className="primary new-chat" data-testid="chat-new" onClick={onNew} title="New chat (Ctrl+N)">
        <MessageSquarePlus size={15} aria-hidden /> New chat
      </button>
      <div className="search">
        <Search size={14} aria-hidden />
        <input type="search" aria-label="Search chats" placeholder="Search chats" data-testid="chat-search" value={query} onChange={(e) => setQuery(e.target.value)} />
      </div>
      <ul className="chats">
        {shown.map((chat) => (
          <li key={chat.id} className={chat.id === currentId ? "current" : ""} data-testid="chat-item" data-chat-id={chat.id}>
            {renaming?.id === chat.id ? (
              <form
                className="rename"
                onSubmit={(e) => {
                  e.preventDefault();
                  const title = renaming.title.trim();
                  setRenaming(null);
                  if (title) void onRename(chat, title);
                }}
              >
                <input
                  aria-label="Chat name"
                  data-testid="chat-rename-input"
                  value={renaming.title}
                  autoFocus
                  onChange={(e) => setRenaming({ id: chat.id, title: e.target.value })}
                  onKeyDown={(e) => e.key === "Escape" && setRenaming(null)}
                />
              </form>
            ) : confirming === chat.id ? (
              <div className="confirm">
                <span>Delete this chat?</span>
                <button className="danger" data-testid="chat-delete-confirm" onClick={() => void onDelete(chat).then(() => setConfirming(null))}>
                  Delete
                </button>
                <button onClick={() => setConfirming(null)}>Keep</button>
              </div>
            ) : (
              <>
                <button className="chat-open" data-testid="chat-open" aria-current={chat.id === currentId ? "true" : undefined} disabled={busy} onClick={() => onOpen(chat)} title={chat.title}>
                  {chat.title}
                </button>
                <button className="icon" aria-label={`Rename ${chat.title}`} data-testid="chat-rename" onClick={() => setRenaming({ id: chat.id, title: chat.title })}>
                  <Pencil size={13} aria-hidden />
                </button>
                <button className="icon" aria-label={`Delete ${chat.title}`} data-testid="chat-delete" onClick={() => setConfirming(chat.id)}>
                  <Trash2 size={13} aria-hidden />
                </button>
              </>
            )}
          </li>
        ))}
        {chats.length > 0 && shown.length === 0 && <li className="muted small">No chat matches.</li>}
        {chats.length === 0 && <li className="muted small">{historyEnabled ? "Your chats are saved here, on this computer." : "History is off."}</li>}
      </ul>
      <div className="history">
        {storageError && <p className="error small">{storageError}</p>}
        <label className="checkbox small">
          <input type="checkbox" data-testid="chat-history" checked={historyEnabled} onChange={(e) => onHistory(e.target.checked)} /> Save chats on this computer
        </label>
        {confirming === "all" ? (
          <div className="confirm">
            <span className="small">Delete all {chats.length} chats?</span>
            <button className="danger" data-testid="chat-delete-all-confirm" onClick={() => void onDeleteAll().then(() => setConfirming(null))}>
              Delete all
            </button>
            <button onClick={() => setConfirming(null)}>Keep</button>
          </div>
        ) : (
          <button className="link small" data-testid="chat-delete-all" disabled={chats.length === 0} onClick={() => setConfirming("all")}>
            Delete all chats…
          </button>
        )}
      </div>
    </aside>
  );
}
