// The window: a sidebar of pages, a theme switch and a status line. What it shows of the server comes pushed
// from the main process into one store (state/window-state.ts); pages subscribe to their part of it and talk
// to the API over HTTP (or to the main process through the console bridge) only when the user acts.
import { useCallback, useEffect, useState } from "react";
import { Moon, Sun, SunMoon } from "./icons";
import { modelStateLabel } from "./labels";
import { AuditPage } from "./pages/audit-page";
import { BatchesPage } from "./pages/batches-page";
import { ChatPage } from "./pages/chat-page";
import { FilesPage } from "./pages/files-page";
import { KeysPage } from "./pages/keys-page";
import { ModelsPage, type ModelsSection } from "./pages/models-page";
import { ServerPage } from "./pages/server-page";
import { applyTheme, useSettings, type Theme } from "./settings";
import { useWindow } from "./state/window-state";

const PAGES = [
  { id: "chat", label: "Chat" },
  { id: "files", label: "Files" },
  { id: "batches", label: "Batches" },
  { id: "keys", label: "Keys" },
  { id: "audit", label: "Audit" },
  { id: "models", label: "Model" },
  { id: "server", label: "Server" },
] as const;
type PageId = (typeof PAGES)[number]["id"];

const THEMES: Array<{ value: Theme; label: string }> = [
  { value: "system", label: "System" },
  { value: "light", label: "Light" },
  { value: "dark", label: "Dark" },
];

function pageFromHash(): PageId {
  const id = window.location.hash.replace(/^#\/?/, "").split("/")[0];
  return PAGES.some((p) => p.id === id) ? (id as PageId) : "chat";
}

/** A section of the page to open at (#/models/speech, #/models/settings). */
function sectionFromHash(): ModelsSection | null {
  const section = window.location.hash.replace(/^#\/?/, "").split("/")[1];
  return section === "speech" || section === "settings" ? section : null;
}

function StatusLine() {
  const model = useWindow((s) => s.status?.model ?? null);
  const address = useWindow((s) => s.info?.baseUrl.replace(/^https?:\/\//, "") ?? null);
  return (
    <div className="status" data-testid="status-line" role="status">
      <span className="status-model">
        <span className={`dot ${model?.state === "ready" ? "ok" : model?.state === "loading" ? "busy" : "off"}`} aria-hidden />
        {model?.state === "ready" ? (model.name ?? model.file) : model ? modelStateLabel(model.state) : "Starting…"}
      </span>
      {address && (
        <span className="muted small status-address" data-testid="status-address" title={address}>
          {address}
        </span>
      )}
    </div>
  );
}

export function App() {
  const [page, setPage] = useState<PageId>(pageFromHash);
  const [section, setSection] = useState<ModelsSection | null>(sectionFromHash);
  const [newChatRequest, setNewChatRequest] = useState(0);
  const [settings, setSettings] = useSettings();
  const bridgeError = useWindow((s) => s.bridgeError);

  useEffect(() => applyTheme(settings.theme), [settings.theme]);

  const go = useCallback((id: PageId, at: ModelsSection | null = null) => {
    setPage(id);
    setSection(at);
    window.history.replaceState(null, "", at ? `#/${id}/${at}` : `#/${id}`);
  }, []);

  // Ctrl+N (Cmd+N): a new chat, from any page.
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if ((event.ctrlKey || event.metaKey) && !event.shiftKey && !event.altKey && event.key.toLowerCase() === "n") {
        event.preventDefault();
        go("chat");
        setNewChatRequest((n) => n + 1);
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [go]);

  const ThemeIcon = settings.theme === "dark" ? Moon : settings.theme === "light" ? Sun : SunMoon;
  return (
    <div className="app">
      <nav className="sidebar" aria-label="Pages">
        <div className="brand">svc</div>
        {PAGES.map((p) => (
          <button
            key={p.id}
            className={page === p.id ? "active" : ""}
            aria-current={page === p.id ? "page" : undefined}
            data-testid={`nav-${p.id}`}
            onClick={() => go(p.id)}
          >
            {p.label}
          </button>
        ))}
        <div className="sidebar-foot">
          <label className="theme-switch">
            <ThemeIcon size={14} aria-hidden />
            <span className="sr-only">Theme</span>
            <select data-testid="theme-switch" value={settings.theme} onChange={(e) => setSettings({ theme: e.target.value as Theme })}>
              {THEMES.map((t) => (
                <option key={t.value} value={t.value}>
                  {t.label}
                </option>
              ))}
            </select>
          </label>
          <StatusLine />
        </div>
      </nav>
      <main className="content">
        {bridgeError && (
          <p className="error banner" role="alert">
            {bridgeError}
          </p>
        )}
        {/* Chat stays mounted so a conversation survives a look at another page. */}
        <div className="chat-host" hidden={page !== "chat"}>
          <ChatPage visible={page === "chat"} newChatRequest={newChatRequest} onGo={(id, at) => go(id, at ?? null)} />
        </div>
        {page === "batches" && <BatchesPage />}
        {page === "files" && <FilesPage onGo={go} />}
        {page === "keys" && <KeysPage />}
        {page === "audit" && <AuditPage />}
        {page === "models" && <ModelsPage section={section} />}
        {page === "server" && <ServerPage />}
      </main>
    </div>
  );
}
