// The window: a sidebar of pages and a status line. Each page talks to the API over HTTP or to the main
// process through the console bridge.
import { useCallback, useState } from "react";
import type { FirstRunView, ServerInfo, StatusView } from "../../server/features/console/contract";
import { FirstRunPanel } from "./first-run";
import { consoleApi, isDownloadRunning } from "./console-client";
import { ChatPage } from "./pages/chat-page";
import { FilesPage } from "./pages/files-page";
import { KeysPage } from "./pages/keys-page";
import { ModelsPage } from "./pages/models-page";
import { PendingPage } from "./pages/pending-page";
import { ServerPage } from "./pages/server-page";
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
const PENDING = {
  batches: {
    title: "Batches",
    purpose: "Create a message batch from a JSONL file or from the chat, watch it run to the end and download the results.",
    waitsFor: "the Message Batches API",
  },
  audit: {
    title: "Audit",
    purpose: "Browse the audit records of requests with filters, see statistics as a chart, and erase a record.",
    waitsFor: "the audit API",
  },
} as const;

function pageFromHash(): PageId {
  const id = window.location.hash.replace(/^#\/?/, "");
  return PAGES.some((p) => p.id === id) ? (id as PageId) : "chat";
}

export function App() {
  const [page, setPage] = useState<PageId>(pageFromHash);
  const [info, setInfo] = useState<ServerInfo | null>(null);
  const [status, setStatus] = useState<StatusView | null>(null);
  const [bridgeError, setBridgeError] = useState<string | null>(null);
  const [offer, setOffer] = useState<FirstRunView | null>(null);

  const poll = useCallback(async () => {
    try {
      const [i, s] = await Promise.all([consoleApi.serverInfo(), consoleApi.status()]);
      setInfo(i);
      setStatus(s);
      // Only while no model is loaded: offer one on a first run, unless a download is already under way.
      if (s.model.state === "no_model") {
        const [first, downloads] = await Promise.all([consoleApi.firstRun(), consoleApi.downloads()]);
        setOffer(first.needsModel && !downloads.some(isDownloadRunning) ? first : null);
      } else setOffer(null);
      setBridgeError(null);
    } catch (err) {
      setBridgeError((err as Error).message);
    }
  }, []);
  usePoll(poll, 3000);

  const go = (id: PageId) => {
    setPage(id);
    window.history.replaceState(null, "", `#/${id}`);
  };

  const model = status?.model;
  return (
    <div className="app">
      <nav className="sidebar">
        <div className="brand">svc</div>
        {PAGES.map((p) => (
          <button key={p.id} className={page === p.id ? "active" : ""} data-testid={`nav-${p.id}`} onClick={() => go(p.id)}>
            {p.label}
          </button>
        ))}
        <div className="status" data-testid="status-line">
          <span className={`dot ${model?.state === "ready" ? "ok" : model?.state === "loading" ? "busy" : "off"}`} />
          {model?.file ? model.file : model?.state === "loading" ? "loading…" : "no model"}
          {info && <div className="muted small">{info.baseUrl.replace(/^https?:\/\//, "")}</div>}
        </div>
      </nav>
      <main className="content">
        {bridgeError && <p className="error banner">{bridgeError}</p>}
        {offer && (
          <div className="banner">
            <FirstRunPanel
              offer={offer}
              onStarted={() => {
                setOffer(null);
                go("models");
              }}
              onChoose={() => go("models")}
            />
          </div>
        )}
        {/* Chat stays mounted so a conversation survives a look at another page. */}
        <div hidden={page !== "chat"}>
          <ChatPage info={info} />
        </div>
        {page in PENDING && <PendingPage id={page} {...PENDING[page as keyof typeof PENDING]} />}
        {page === "files" && <FilesPage info={info} />}
        {page === "keys" && <KeysPage />}
        {page === "models" && <ModelsPage />}
        {page === "server" && <ServerPage info={info} onInfo={setInfo} />}
      </main>
    </div>
  );
}
