// Saved chats, kept by the window in its own storage (IndexedDB in the app's browser profile, which lives
// beside the server's data dir, never in it): the server stays stateless and never sees them at rest.
import { deleteDB, openDB, type IDBPDatabase } from "idb";
import type { Turn } from "./types";

export interface SavedChat {
  id: string;
  title: string;
  createdAt: number;
  updatedAt: number;
  turns: Turn[];
  /** The chat's own system prompt (chats saved before it had one use the default for new chats). */
  systemPrompt?: string;
}

const DB_NAME = "svc-chats";
const STORE = "chats";
let db: Promise<IDBPDatabase> | null = null;

function open(): Promise<IDBPDatabase> {
  db ??= openDB(DB_NAME, 1, {
    upgrade(database) {
      database.createObjectStore(STORE, { keyPath: "id" });
    },
  });
  return db;
}

export async function listChats(): Promise<SavedChat[]> {
  const all = (await (await open()).getAll(STORE)) as SavedChat[];
  return all.sort((a, b) => b.updatedAt - a.updatedAt);
}

export async function saveChat(chat: SavedChat): Promise<void> {
  await (await open()).put(STORE, chat);
}

export async function deleteChat(id: string): Promise<void> {
  await (await open()).delete(STORE, id);
}

/** Deletes every saved chat: the whole database goes, not only its records. */
export async function deleteAllChats(): Promise<void> {
  if (db) (await db).close();
  db = null;
  await deleteDB(DB_NAME);
}

/** Chats whose title or messages contain the text (case-insensitive). */
export function searchChats(chats: SavedChat[], text: string): SavedChat[] {
  const needle = text.trim().toLowerCase();
  if (!needle) return chats;
  return chats.filter((c) => c.title.toLowerCase().includes(needle) || c.turns.some((t) => t.content.toLowerCase().includes(needle)));
}

/** The saved chats that sent this file (a file about to be deleted: they will show it as gone). */
export function chatsUsingFile(chats: SavedChat[], fileId: string): SavedChat[] {
  return chats.filter((c) => c.turns.some((t) => t.attachments.some((a) => a.fileId === fileId) || t.agent?.fileIds.includes(fileId)));
}

export function titleFor(turns: Turn[]): string {
  const first = turns.find((t) => t.role === "user" && (t.content.trim() || t.attachments.length));
  if (!first) return "New chat";
  const text = first.content.trim().replace(/\s+/g, " ") || first.attachments.map((a) => a.name).join(", ");
  return text.length > 48 ? `${text.slice(0, 47)}…` : text;
}
