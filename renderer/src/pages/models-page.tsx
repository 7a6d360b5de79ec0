// The model and the hardware: what is loaded, on which GPU, the files on disk, and downloads with progress.
import { useCallback, useState } from "react";
import type { DownloadView, GpuPreference, ModelsView, StatusView } from "../../../server/features/console/contract";
import { consoleApi, isDownloadRunning } from "../console-client";
import { formatBytes, formatEta } from "../format";
import { usePoll } from "../use-poll";

const GPU_CHOICES: GpuPreference[] = ["auto", "cuda", "vulkan", "metal", "cpu"];

function DownloadRow({ download, onCancel }: { download: DownloadView; onCancel: () => void }) {
  const percent = download.totalBytes > 0 ? Math.floor((download.downloadedBytes / download.totalBytes) * 100) : null;
  const running = isDownloadRunning(download);
  return (
    <li className="download" data-testid="download" data-phase={download.phase}>
      <div className="download-title">
        <strong>{download.file ?? download.source}</strong> <span className="muted">{download.phase}</span>
      </div>
      <progress max={100} value={percent ?? undefined} data-testid="download-progress" />
      <div className="muted" data-testid="download-figures">
        {percent !== null ? `${percent}% · ` : ""}
        {formatBytes(download.downloadedBytes)}
        {download.totalBytes ? ` of ${formatBytes(download.totalBytes)}` : ""}
        {download.phase === "downloading" && download.bytesPerSecond > 0
          ? ` · ${formatBytes(download.bytesPerSecond)}/s · ${formatEta(download.etaSeconds)} left`
          : ""}
      </div>
      {download.error && <div className="error">{download.error}</div>}
      {running && (
        <button data-testid="download-cancel" onClick={onCancel}>
          Cancel
        </button>
      )}
    </li>
  );
}

export function ModelsPage() {
  const [status, setStatus] = useState<StatusView | null>(null);
  const [models, setModels] = useState<ModelsView | null>(null);
  const [downloads, setDownloads] = useState<DownloadView[]>([]);
  const [source, setSource] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const refresh = useCallback(async () => {
    const [s, m, d] = await Promise.all([consoleApi.status(), consoleApi.listModels(), consoleApi.downloads()]);
    setStatus(s);
    setModels(m);
    setDownloads(d);
  }, []);
  const anyRunning = downloads.some(isDownloadRunning);
  usePoll(refresh, anyRunning ? 400 : 2000);

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
  return (
    <section className="page" data-testid="models-page">
      <header className="page-header">
        <h1>Model</h1>
      </header>

      <div className="card grid" data-testid="model-status">
        <div>
          <h2>Loaded model</h2>
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
            State: {model?.state ?? "…"}
            {model?.loadingFile ? ` · loading ${model.loadingFile}` : ""}
            {model?.contextSize ? ` · context ${model.contextSize}` : ""}
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
            {status ? `${status.cpuCores} CPU cores · ${formatBytes(status.ramFreeBytes)} of ${formatBytes(status.ramTotalBytes)} RAM free` : ""}
          </p>
        </div>
      </div>

      {error && (
        <p className="error" data-testid="models-error">
          {error}
        </p>
      )}

      <div className="card">
        <h2>Download a model</h2>
        <form
          className="form-row"
          onSubmit={(e) => {
            e.preventDefault();
            void act(async () => {
              await consoleApi.startDownload({ source: source.trim() || (models?.recommended.source ?? "") });
              setSource("");
            });
          }}
        >
          <input
            data-testid="download-source"
            className="wide"
            value={source}
            onChange={(e) => setSource(e.target.value)}
            placeholder={models ? `${models.recommended.source} (recommended: ${models.recommended.title})` : "hf:user/repo:quant or https://…/model.gguf"}
          />
          <button type="submit" className="primary" data-testid="download-start" disabled={busy}>
            Download
          </button>
        </form>
        <ul className="downloads" data-testid="downloads">
          {downloads
            .slice()
            .reverse()
            .map((d) => (
              <DownloadRow key={d.id} download={d} onCancel={() => void act(() => consoleApi.cancelDownload(d.id))} />
            ))}
        </ul>
      </div>

      <div className="card">
        <h2>Models on this machine</h2>
        <p className="muted">{models?.directory}</p>
        <table data-testid="models-table">
          <thead>
            <tr>
              <th>File</th>
              <th>Model</th>
              <th>Quantization</th>
              <th>Size</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {models?.models.map((m) => (
              <tr key={m.file} data-testid="model-row" data-file={m.file}>
                <td>
                  {m.file} {m.active && <span className="badge">active</span>}
                </td>
                <td>{m.error ? <span className="error">{m.error}</span> : `${m.name ?? "?"} (${m.architecture ?? "?"})`}</td>
                <td>{m.quantization ?? ""}</td>
                <td>{formatBytes(m.sizeBytes)}</td>
                <td>
                  {!m.active && !m.error && (
                    <button data-testid="model-use" disabled={busy} onClick={() => void act(() => consoleApi.useModel(m.file))}>
                      Use
                    </button>
                  )}{" "}
                  {!m.active && (
                    <button className="danger" disabled={busy} onClick={() => void act(() => consoleApi.removeModel(m.file))}>
                      Remove
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {models && models.models.length === 0 && <p className="empty">No model files in this folder yet: download the recommended one above.</p>}
      </div>
    </section>
  );
}
