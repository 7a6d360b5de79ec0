// What an empty chat shows: how to get a model on a first run, its download, and when it is ready.
import { isDownloadRunning } from "../console-client";
import { FirstRunPanel } from "../first-run";
import { formatBytes } from "../format";
import { firstRunOffer, llmDownloads, useWindow } from "../state/window-state";
import { ATTACHABLE_WORDS } from "./attachments";

export function EmptyChat({ agent, onGo }: { agent: boolean; onGo: (page: "models") => void }) {
  const info = useWindow((s) => s.info);
  const status = useWindow((s) => s.status);
  const offer = useWindow(firstRunOffer);
  const download = useWindow((s) => llmDownloads(s).find(isDownloadRunning) ?? null);
  const justDownloaded = useWindow((s) => llmDownloads(s).some((d) => d.phase === "done"));
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
  if (state === "ready")
    return (
      <div className="empty ready" data-testid="model-ready">
        <p>
          <strong>{status.model.name ?? status.model.file}</strong> is ready{justDownloaded ? " — the download is complete" : ""}.{" "}
          {agent ? "Give the agent a task: it searches and reads your files, calculates, and answers." : "Ask it anything."}
        </p>
        <p className="muted">Drop files here to attach them: {ATTACHABLE_WORDS}. Ctrl+N starts a new chat; Esc stops an answer.</p>
      </div>
    );
  if (offer) return <FirstRunPanel offer={offer} onChoose={() => onGo("models")} />;
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
