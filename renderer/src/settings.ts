// The window's own settings, kept in this window's storage (localStorage of the app's profile, never the
// server's data dir): theme, chat history on or off, the last chat, new chats' system prompt and the sampling
// settings.
import { useCallback, useSyncExternalStore } from "react";

export type Theme = "system" | "light" | "dark";
/** reasoning_effort as the chat surface takes it: none answers at once, the others think first. */
export type Effort = "none" | "low" | "medium" | "high" | "xhigh" | "max";
export const EFFORTS: ReadonlyArray<{ value: Effort; label: string }> = [
  { value: "none", label: "Off (fast)" },
  { value: "low", label: "Low" },
  { value: "medium", label: "Medium" },
  { value: "high", label: "High" },
  { value: "xhigh", label: "Extra high" },
  { value: "max", label: "Max" },
];

export interface WindowSettings {
  theme: Theme;
  historyEnabled: boolean;
  /** The system prompt a new chat starts with (each chat keeps its own). */
  systemPrompt: string;
  /** The chat open when the window closed: opened again at the next start. */
  lastChatId: string | null;
  /** null: the server's default. */
  temperature: number | null;
  maxTokens: number | null;
  /** null until the user picks one: then the default comes from the hardware (see defaultEffort). */
  effort: Effort | null;
}

const KEY = "svc.window.settings";
const DEFAULTS: WindowSettings = { theme: "system", historyEnabled: true, systemPrompt: "", lastChatId: null, temperature: null, maxTokens: null, effort: null };

let current: WindowSettings = load();
const listeners = new Set<() => void>();

function load(): WindowSettings {
  try {
    const raw = localStorage.getItem(KEY);
    return raw ? { ...DEFAULTS, ...(JSON.parse(raw) as Partial<WindowSettings>) } : { ...DEFAULTS };
  } catch {
    return { ...DEFAULTS };
  }
}

export function getSettings(): WindowSettings {
  return current;
}

export function updateSettings(change: Partial<WindowSettings>): void {
  current = { ...current, ...change };
  try {
    localStorage.setItem(KEY, JSON.stringify(current));
  } catch {
    // storage full or off: the settings still hold for this session
  }
  for (const listener of listeners) listener();
}

export function useSettings(): [WindowSettings, (change: Partial<WindowSettings>) => void] {
  const value = useSyncExternalStore(
    useCallback((listener: () => void) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    }, []),
    getSettings,
  );
  return [value, updateSettings];
}

/** Applies the theme to the page: "system" follows the operating system's light or dark setting. */
export function applyTheme(theme: Theme): void {
  const root = document.documentElement;
  if (theme === "system") delete root.dataset.theme;
  else root.dataset.theme = theme;
}

/**
 * The thinking level to start with on this machine: on a CPU, thinking can mean minutes of silence before
 * the answer, so answers come at once (fast) unless the user asks for thinking; on a GPU, medium.
 */
export function defaultEffort(gpuBackend: string | null | undefined): { effort: Effort; reason: string } {
  if (!gpuBackend || gpuBackend === "cpu")
    return {
      effort: "none",
      reason: "Fast answers by default: this computer runs the model on its CPU, where thinking first can take minutes. Pick a Thinking level for harder questions.",
    };
  return { effort: "medium", reason: `Thinking (medium) by default: the model runs on your GPU (${gpuBackend.toUpperCase()}).` };
}
