// Downloads of models (language or speech) with their progress, and the form that starts one from any source
// the server takes (a name, hf:… or a URL).
import { useState } from "react";
import type { DownloadView, ModelKind, ModelsView } from "../../../server/features/console/contract";
import { consoleApi, isDownloadRunning } from "../console-client";
import { formatBytes, formatEta } from "../format";
import { downloadPhaseLabel } from "../labels";

export type Act = (fn: () => Promise<unknown>) => Promise<void>;

export function DownloadRow({ download, act }: { download: DownloadView; act: Act }) {
  const percent = download.totalBytes > 0 ? Math.floor((download.downloadedBytes / download.totalBytes) * 100) : null;
  const running = isDownloadRunning(download);
  const kind: ModelKind = download.kind ?? "llm";
  return (
    <li className={`download ${download.phase}`} data-testid="download" data-phase={download.phase}>
      <div className="download-title">
        <strong>{download.file ?? download.source}</strong> <span className="muted">{downloadPhaseLabel(download.phase)}</span>
      </div>
      {running || download.phase === "done" ? (
        <progress max={100} value={download.phase === "done" ? 100 : (percent ?? undefined)} data-testid="download-progress" aria-label={`Download of ${download.file ?? download.source}`} />
      ) : null}
      <div className="muted" data-testid="download-figures">
        {percent !== null ? `${percent}% · ` : ""}
        {formatBytes(download.downloadedBytes)}
        {download.totalBytes ? ` of ${formatBytes(download.totalBytes)}` : ""}
        {download.phase === "downloading" && download.bytesPerSecond > 0 ? ` · ${formatBytes(download.bytesPerSecond)}/s · ${formatEta(download.etaSeconds)} left` : ""}
      </div>
      {download.error && (
        <p className="error" data-testid="download-error">
          {download.error}
        </p>
      )}
      <div className="toolbar">
        {running && (
          <button data-testid="download-cancel" onClick={() => void act(() => consoleApi.cancelDownload(download.id))}>
            Stop
          </button>
        )}
        {(download.phase === "failed" || download.phase === "cancelled") && (
          <button className="primary" data-testid="download-retry" onClick={() => void act(() => consoleApi.startDownload({ source: download.source, kind }))}>
            {download.phase === "failed" ? "Retry" : "Resume"}
          </button>
        )}
        {!running && (
          <button data-testid="download-dismiss" onClick={() => void act(() => consoleApi.dismissDownload(download.id))}>
            Dismiss
          </button>
        )}
      </div>
    </li>
  );
}

export function Downloads({ downloads, act, testId }: { downloads: DownloadView[]; act: Act; testId: string }) {
  if (downloads.length === 0) return null;
  return (
    <ul className="downloads" data-testid={testId}>
      {downloads
        .slice()
        .reverse()
        .map((d) => (
          <DownloadRow key={d.id} download={d} act={act} />
        ))}
    </ul>
  );
}

/** Unfinished downloads of this kind that no download is resuming now: what a resumed download keeps. */
export function Partials({ models, kind, busy, act }: { models: ModelsView | null; kind: ModelKind; busy: boolean; act: Act }) {
  const partials = models?.partial.filter((p) => !p.downloadingNow && (p.kind ?? "llm") === kind) ?? [];
  if (partials.length === 0) return null;
  return (
    <ul className="partials">
      {partials.map((p) => (
        <li key={p.file} className="muted small">
          Unfinished: {p.file}, {formatBytes(p.keptBytes)}
          {p.totalBytes ? ` of ${formatBytes(p.totalBytes)}` : ""} kept.
          {p.source && (
            <>
              {" "}
              <button className="link" disabled={busy} onClick={() => void act(() => consoleApi.startDownload({ source: p.source!, kind: p.kind }))}>
                Resume
              </button>
            </>
          )}
        </li>
      ))}
    </ul>
  );
}

/** A download from any source the server takes; the field empties once it started. */
export function SourceForm(props: { id: string; label: string; placeholder: string; submitTestId: string; primary?: boolean; busy: boolean; kind: ModelKind; act: Act }) {
  const [source, setSource] = useState("");
  return (
    <form
      className="form-row other-source"
      onSubmit={(e) => {
        e.preventDefault();
        const trimmed = source.trim();
        if (!trimmed) return;
        void props.act(async () => {
          await consoleApi.startDownload({ source: trimmed, kind: props.kind });
          setSource("");
        });
      }}
    >
      <label htmlFor={props.id}>{props.label}</label>
      <input id={props.id} data-testid={props.id} className="wide" value={source} onChange={(e) => setSource(e.target.value)} placeholder={props.placeholder} />
      <button type="submit" className={props.primary ? "primary" : undefined} data-testid={props.submitTestId} disabled={props.busy || !source.trim()}>
        Download
      </button>
    </form>
  );
}
