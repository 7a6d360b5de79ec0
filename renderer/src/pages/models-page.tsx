// The model and the hardware: what is loaded, on which GPU, suggested models sized to this machine, the files
// on disk, and downloads with progress.
import { useCallback, useState } from "react";
import type { DownloadView, GpuPreference, ModelFit, ModelsView, StatusView, SuggestedModelView } from "../../../server/features/console/contract";
import { consoleApi, isDownloadRunning } from "../console-client";
import { formatBytes, formatEta } from "../format";
import { Download } from "../icons";
import { downloadPhaseLabel, modelStateLabel } from "../labels";
import { usePoll } from "../use-poll";

const GPU_CHOICES: GpuPreference[] = ["auto", "cuda", "vulkan", "metal", "cpu"];

const FIT_LABELS: Record<ModelFit, string> = {
  fits_gpu: "Runs on your GPU",
  fits: "Fits this computer",
  tight: "Tight: close other apps",
  too_big: "Too big for this computer",
};

function fileName(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

function DownloadRow({ download, onCancel, onRetry, onDismiss }: { download: DownloadView; onCancel: () => void; onRetry: () => void; onDismiss: () => void }) {
  const percent = download.totalBytes > 0 ? Math.floor((download.downloadedBytes / download.totalBytes) * 100) : null;
  const running = isDownloadRunning(download);
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
          <button data-testid="download-cancel" onClick={onCancel}>
            Stop
          </button>
        )}
        {(download.phase === "failed" || download.phase === "cancelled") && (
          <button className="primary" data-testid="download-retry" onClick={onRetry}>
            {download.phase === "failed" ? "Retry" : "Resume"}
          </button>
        )}
        {!running && (
          <button data-testid="download-dismiss" onClick={onDismiss}>
            Dismiss
          </button>
        )}
      </div>
    </li>
  );
}

function SuggestedRow({ model, busy, ramTotal, onDownload, onUse }: { model: SuggestedModelView; busy: boolean; ramTotal: number; onDownload: () => void; onUse: () => void }) {
  return (
    <tr data-testid="suggested-model" data-source={model.source} data-fit={model.fit}>
      <td>
        <strong>{model.title}</strong>
        {model.recommended && <span className="badge">recommended</span>}
        <div className="muted small">{model.description}</div>
      </td>
      <td>{formatBytes(model.approxBytes)}</td>
      <td>{formatBytes(model.needsBytes)}</td>
      <td className={`fit ${model.fit}`}>
        {FIT_LABELS[model.fit]}
        {model.fit === "too_big" ? ` (${formatBytes(ramTotal)} of memory)` : ""}
      </td>
      <td>
        {model.downloaded ? (
          <button data-testid="suggested-use" disabled={busy} onClick={onUse}>
            Use
          </button>
        ) : (
          <button data-testid="suggested-download" disabled={busy || model.fit === "too_big"} onClick={onDownload}>
            <Download size={14} aria-hidden /> Download
          </button>
        )}
      </td>
    </tr>
  );
}

export function ModelsPage() {
  const [status, setStatus] = useState<StatusView | null>(null);
  const [models, setModels] = useState<ModelsView | null>(null);
  const [downloads, setDownloads] = useState<DownloadView[]>([]);
  const [source, setSource] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [confirmRemove, setConfirmRemove] = useState<string | null>(null);

  const refresh = useCallback(async () => {
    const [s, m, d] = await Promise.all([consoleApi.status(), consoleApi.listModels(), consoleApi.downloads()]);
    setStatus(s);
    setModels(m);
    setDownloads(d);
  }, []);
  const anyRunning = downloads.some(isDownloadRunning);
  usePoll(refresh, anyRunning || status?.model.state === "loading" ? 400 : 2000);

  const act = async (fn: () => Promise<unknown>) => {
    setError(null);
    setBusy(true);
    try {
      await fn();
      await refresh();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  const model = status?.model;
  const loadedElsewhere = models?.loaded && !models.models.some((m) => m.loaded) ? models.loaded : null;
  return (
    <section className="page" data-testid="models-page" aria-labelledby="models-title">
      <header className="page-header">
        <h1 id="models-title">Model</h1>
      </header>

      <div className="card grid" data-testid="model-status">
        <div>
          <h2>Loaded now</h2>
          <p data-testid="model-loaded">
            {model?.file ? (
              <>
                <strong>{model.name ?? model.file}</strong> <span className="muted">({model.file})</span>
              </>
            ) : (
              <em>none</em>
            )}
          </p>
          <p className="muted" data-testid="model-state">
            {model ? modelStateLabel(model.state) : "…"}
            {model?.loadingFile ? ` · loading ${model.loadingFile}` : ""}
            {model?.contextSize ? ` · context ${model.contextSize} tokens` : ""}
            {model?.threads ? ` · ${model.threads} thread${model.threads > 1 ? "s" : ""}` : ""}
            {model?.gpuLayers !== null && model?.gpuLayers !== undefined ? ` · ${model.gpuLayers} layers on the GPU` : ""}
          </p>
          {model?.contextNote && (
            <p className="notice" data-testid="model-context-note">
              {model.contextNote}
            </p>
          )}
          {model?.error && <p className="error">{model.error}</p>}
        </div>
        <div>
          <h2>GPU</h2>
          <p data-testid="gpu-backend">
            {status?.gpu ? (
              <>
                <strong>{status.gpu.backend === "cpu" ? "CPU only" : status.gpu.backend.toUpperCase()}</strong>
                {status.gpu.devices.length > 0 && ` · ${status.gpu.devices.join(", ")}`}
                {status.gpu.vramTotalBytes > 0 && ` · ${formatBytes(status.gpu.vramFreeBytes)} free of ${formatBytes(status.gpu.vramTotalBytes)}`}
              </>
            ) : (
              "detecting…"
            )}
          </p>
          <label>
            Use{" "}
            <select
              data-testid="gpu-choice"
              value={status?.gpuPreference ?? "auto"}
              disabled={busy || !status}
              onChange={(e) => void act(() => consoleApi.setGpuPreference(e.target.value as GpuPreference))}
            >
              {GPU_CHOICES.map((g) => (
                <option key={g} value={g}>
                  {g === "auto" ? "Best available (auto)" : g === "cpu" ? "CPU only" : g.toUpperCase()}
                </option>
              ))}
            </select>
          </label>
          <p className="muted">
            {status ? `${status.cpuCores} CPU cores · ${formatBytes(status.ramFreeBytes)} of ${formatBytes(status.ramTotalBytes)} memory free` : ""}
          </p>
        </div>
      </div>

      {error && (
        <p className="error" role="alert" data-testid="models-error">
          {error}
        </p>
      )}

      <div className="card">
        <h2>Models on this computer</h2>
        <p className="muted small">
          In {models?.directory}. <span className="badge">loaded</span> is the model answering now; <span className="badge alt">default</span> is the one the
          app and <code>svc serve</code> load at start.
        </p>
        {loadedElsewhere && (
          <p className="notice" data-testid="model-elsewhere">
            The loaded model, {fileName(loadedElsewhere)}, is not in this folder: it was given at start ({loadedElsewhere}).
          </p>
        )}
        {models && models.models.length > 0 && (
          <table data-testid="models-table">
            <thead>
              <tr>
                <th scope="col">File</th>
                <th scope="col">Model</th>
                <th scope="col">Quantization</th>
                <th scope="col">Size</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {models.models.map((m) => (
                <tr key={m.file} data-testid="model-row" data-file={m.file}>
                  <td>
                    {m.file} {m.loaded && <span className="badge">loaded</span>} {m.active && <span className="badge alt">default</span>}
                  </td>
                  <td>{m.error ? <span className="error">{m.error}</span> : `${m.name ?? "?"} (${m.architecture ?? "?"})`}</td>
                  <td>{m.quantization ?? ""}</td>
                  <td data-testid="model-size">{formatBytes(m.sizeBytes)}</td>
                  <td className="actions">
                    {confirmRemove === m.file ? (
                      <>
                        <span className="small">Delete the file?</span>{" "}
                        <button
                          className="danger"
                          data-testid="model-remove-confirm"
                          disabled={busy}
                          onClick={() => void act(() => consoleApi.removeModel(m.file)).then(() => setConfirmRemove(null))}
                        >
                          Delete
                        </button>{" "}
                        <button onClick={() => setConfirmRemove(null)}>Keep</button>
                      </>
                    ) : (
                      <>
                        {!m.loaded && !m.error && (
                          <button data-testid="model-use" disabled={busy} onClick={() => void act(() => consoleApi.useModel(m.file))}>
                            Use
                          </button>
                        )}{" "}
                        {!m.active && !m.loaded && (
                          <button className="danger" data-testid="model-remove" disabled={busy} onClick={() => setConfirmRemove(m.file)}>
                            Remove
                          </button>
                        )}
                      </>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {models && models.models.length === 0 && !models.loaded && (
          <p className="empty" data-testid="models-empty">
            No model files here yet: download one of the suggested models below.
          </p>
        )}
        {models && models.partial.length > 0 && (
          <ul className="partials">
            {models.partial
              .filter((p) => !p.downloadingNow)
              .map((p) => (
                <li key={p.file} className="muted small">
                  Unfinished: {p.file}, {formatBytes(p.keptBytes)}
                  {p.totalBytes ? ` of ${formatBytes(p.totalBytes)}` : ""} kept.
                  {p.source && (
                    <>
                      {" "}
                      <button className="link" disabled={busy} onClick={() => void act(() => consoleApi.startDownload({ source: p.source! }))}>
                        Resume
                      </button>
                    </>
                  )}
                </li>
              ))}
          </ul>
        )}
      </div>

      {downloads.length > 0 && (
        <div className="card">
          <h2>Downloads</h2>
          <ul className="downloads" data-testid="downloads">
            {downloads
              .slice()
              .reverse()
              .map((d) => (
                <DownloadRow
                  key={d.id}
                  download={d}
                  onCancel={() => void act(() => consoleApi.cancelDownload(d.id))}
                  onRetry={() => void act(() => consoleApi.startDownload({ source: d.source }))}
                  onDismiss={() => void act(() => consoleApi.dismissDownload(d.id))}
                />
              ))}
          </ul>
        </div>
      )}

      <div className="card">
        <h2>Suggested models for this computer</h2>
        <p className="muted small">
          Sized to its {status ? formatBytes(status.ramTotalBytes) : "…"} of memory{status?.gpu && status.gpu.vramTotalBytes > 0 ? ` and ${formatBytes(status.gpu.vramTotalBytes)} of GPU memory` : ""}.
          All answer fast or thinking and call tools.
        </p>
        <table data-testid="suggested-models">
          <thead>
            <tr>
              <th scope="col">Model</th>
              <th scope="col">Download</th>
              <th scope="col">Needs</th>
              <th scope="col">On this computer</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {models?.suggested.map((m) => (
              <SuggestedRow
                key={m.source}
                model={m}
                busy={busy || downloads.some((d) => d.source === m.source && isDownloadRunning(d))}
                ramTotal={status?.ramTotalBytes ?? 0}
                onDownload={() => void act(() => consoleApi.startDownload({ source: m.source }))}
                onUse={() => void act(() => consoleApi.useModel(m.file))}
              />
            ))}
          </tbody>
        </table>
        <form
          className="form-row other-source"
          onSubmit={(e) => {
            e.preventDefault();
            if (!source.trim()) return;
            void act(async () => {
              await consoleApi.startDownload({ source: source.trim() });
              setSource("");
            });
          }}
        >
          <label htmlFor="download-source">Another model</label>
          <input
            id="download-source"
            data-testid="download-source"
            className="wide"
            value={source}
            onChange={(e) => setSource(e.target.value)}
            placeholder="hf:user/repo:quant, hf:user/repo/file.gguf or https://…/model.gguf"
          />
          <button type="submit" className="primary" data-testid="download-start" disabled={busy || !source.trim()}>
            Download
          </button>
        </form>
      </div>
    </section>
  );
}
