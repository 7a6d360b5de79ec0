// The window: a sidebar of pages, a theme switch and a status line. Each page talks to the API over HTTP or to
// the main process through the console bridge.
import { useCallback, useEffect, useState } from "react";
import type { DownloadView, FirstRunView, ServerInfo, StatusView } from "../../server/features/console/contract";
import { consoleApi, isDownloadRunning } from "./console-client";
import { Moon, Sun, SunMoon } from "./icons";
import { AuditPage } from "./pages/audit-page";
import { BatchesPage } from "./pages/batches-page";
import { ChatPage } from "./pages/chat-page";
import { FilesPage } from "./pages/files-page";
import { KeysPage } from "./pages/keys-page";
import { ModelsPage, type ModelsSection } from "./pages/models-page";
import { ServerPage } from "./pages/server-page";
import { applyTheme, useSettings, type Theme } from "./settings";
import { modelStateLabel } from "./labels";
import { usePoll } from "./use-poll";

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

/** Pages whose APIs are still to come: what each will do, and what it waits for. */

const THEMES: Array<{ value: Theme; label: string }> = [
  { value: "system", label: "System" },
  { value: "light", label: "Light" },
  { value: "dark", label: "Dark" },
];

function pageFromHash(): PageId {
  const id = window.location.hash.replace(/^#\/?/, "").split("/")[0];
  return PAGES.some((p) => p.id === id) ? (id as PageId) : "chat";
}

/** A section of the page to open at (#/models/speech). */
function sectionFromHash(): ModelsSection | null {
  return window.location.hash.replace(/^#\/?/, "").split("/")[1] === "speech" ? "speech" : null;
}

export function App() {
  const [page, setPage] = useState<PageId>(pageFromHash);
  const [section, setSection] = useState<ModelsSection | null>(sectionFromHash);
  const [info, setInfo] = useState<ServerInfo | null>(null);
  const [status, setStatus] = useState<StatusView | null>(null);
  const [bridgeError, setBridgeError] = useState<string | null>(null);
  const [offer, setOffer] = useState<FirstRunView | null>(null);
  const [downloads, setDownloads] = useState<DownloadView[]>([]);
  const [newChatRequest, setNewChatRequest] = useState(0);
  const [settings, setSettings] = useSettings();

  useEffect(() => applyTheme(settings.theme), [settings.theme]);

  const poll = useCallback(async () => {
    try {
      const [i, s, all] = await Promise.all([consoleApi.serverInfo(), consoleApi.status(), consoleApi.downloads()]);
      // The chat and the first-run offer follow the language model's downloads, not a speech model's.
      const d = all.filter((x) => x.kind !== "speech");
      setInfo(i);
      setStatus(s);
      setDownloads(d);
      // Only while no model is loaded: offer one on a first run, unless a download is already under way.
      if (s.model.state !== "ready" && s.model.state !== "loading") {
        const first = await consoleApi.firstRun();
        setOffer(first.needsModel && !d.some(isDownloadRunning) ? first : null);
      } else setOffer(null);
      setBridgeError(null);
    } catch (err) {
      setBridgeError((err as Error).message);
    }
  }, []);
  // Faster while a model downloads or loads, so the chat says "ready" as soon as it is.
  const settling = downloads.some(isDownloadRunning) || status?.model.state === "loading";
  usePoll(poll, settling ? 800 : 3000);

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

  const model = status?.model;
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
          <div className="status" data-testid="status-line" role="status">
            <span className={`dot ${model?.state === "ready" ? "ok" : model?.state === "loading" ? "busy" : "off"}`} aria-hidden />
            {model?.state === "ready" ? (model.name ?? model.file) : model ? modelStateLabel(model.state) : "Starting…"}
            {info && <div className="muted small">{info.baseUrl.replace(/^https?:\/\//, "")}</div>}
          </div>
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
          <ChatPage
            info={info}
            status={status}
            offer={offer}
            downloads={downloads}
            visible={page === "chat"}
            newChatRequest={newChatRequest}
            onGo={go}
            onRefresh={() => void poll()}
          />
        </div>
        {page === "batches" && <BatchesPage info={info} />}
        {page === "files" && <FilesPage info={info} onGo={go} />}
        {page === "keys" && <KeysPage />}
        {page === "audit" && <AuditPage info={info} />}
        {page === "models" && <ModelsPage section={section} />}
        {page === "server" && <ServerPage info={info} status={status} onInfo={setInfo} />}
      </main>
    </div>
  );
}
