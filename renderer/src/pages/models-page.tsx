// The model and the hardware: what is loaded, on which GPU, suggested models sized to this machine, the files
// on disk, and downloads with progress; and the speech models that transcribe audio and video uploads.
import { useCallback, useEffect, useRef, useState, type ReactNode, type RefObject } from "react";
import type { DownloadView, GpuPreference, ModelFit, ModelKind, ModelsView, StatusView, SuggestedModelView } from "../../../server/features/console/contract";
import { consoleApi, isDownloadRunning } from "../console-client";
import { formatBytes, formatEta } from "../format";
import { Download } from "../icons";
import { downloadPhaseLabel, modelStateLabel } from "../labels";
import { usePoll } from "../use-poll";
import { ConfirmInline } from "../confirm-inline";

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

/** A download from any source the server takes (a name, hf:… or a URL); the field empties once it started. */
function SourceForm(props: {
  id: string;
  label: string;
  placeholder: string;
  submitTestId: string;
  primary?: boolean;
  busy: boolean;
  onDownload: (source: string, started: () => void) => void;
}) {
  const [source, setSource] = useState("");
  return (
    <form
      className="form-row other-source"
      onSubmit={(e) => {
        e.preventDefault();
        const trimmed = source.trim();
        if (!trimmed) return;
        props.onDownload(trimmed, () => setSource(""));
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

/** The page's section a link can open it at (the Files page opens "speech"). */
export type ModelsSection = "speech";

export function ModelsPage({ section = null }: { section?: ModelsSection | null } = {}) {
  const [status, setStatus] = useState<StatusView | null>(null);
  const [models, setModels] = useState<ModelsView | null>(null);
  const [downloads, setDownloads] = useState<DownloadView[]>([]);
  // An error shows where its action was: at the top, or in the speech section.
  const [error, setError] = useState<{ message: string; place: "page" | "speech" } | null>(null);
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

  const act = async (fn: () => Promise<unknown>, place: "page" | "speech" = "page") => {
    setError(null);
    setBusy(true);
    try {
      await fn();
      await refresh();
    } catch (err) {
      setError({ message: (err as Error).message, place });
    } finally {
      setBusy(false);
    }
  };

  // Opened at the speech section (from the Files page): scroll there once the page has its content.
  const speechRef = useRef<HTMLHeadingElement>(null);
  const loaded = models !== null && status !== null;
  useEffect(() => {
    if (section !== "speech" || !loaded) return;
    speechRef.current?.scrollIntoView({ block: "start" });
    speechRef.current?.focus({ preventScroll: true });
  }, [section, loaded]);

  const kindOf = (d: DownloadView): ModelKind => d.kind ?? "llm";
  const placeOf = (kind: ModelKind) => (kind === "speech" ? "speech" : "page");
  const llmDownloads = downloads.filter((d) => kindOf(d) === "llm");
  const speechDownloads = downloads.filter((d) => kindOf(d) === "speech");
  const downloadRow = (d: DownloadView) => (
    <DownloadRow
      key={d.id}
      download={d}
      onCancel={() => void act(() => consoleApi.cancelDownload(d.id), placeOf(kindOf(d)))}
      onRetry={() => void act(() => consoleApi.startDownload({ source: d.source, kind: kindOf(d) }), placeOf(kindOf(d)))}
      onDismiss={() => void act(() => consoleApi.dismissDownload(d.id), placeOf(kindOf(d)))}
    />
  );
  const partialRow = (p: ModelsView["partial"][number]) => (
    <li key={p.file} className="muted small">
      Unfinished: {p.file}, {formatBytes(p.keptBytes)}
      {p.totalBytes ? ` of ${formatBytes(p.totalBytes)}` : ""} kept.
      {p.source && (
        <>
          {" "}
          <button className="link" disabled={busy} onClick={() => void act(() => consoleApi.startDownload({ source: p.source!, kind: p.kind }), placeOf(p.kind))}>
            Resume
          </button>
        </>
      )}
    </li>
  );
  const partials = (kind: ModelKind) => models?.partial.filter((p) => !p.downloadingNow && (p.kind ?? "llm") === kind) ?? [];

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
                {status.gpu.build === "local" && " · llama.cpp built on this machine"}
                {status.gpu.build === "prebuilt" && " · prebuilt llama.cpp"}
              </>
            ) : (
              "detecting…"
            )}
          </p>
          {status?.gpu?.buildHint && (
            <p className="muted" data-testid="engine-build-hint">
              {status.gpu.buildHint.split("`").map((part, i) => (i % 2 === 1 ? <code key={i}>{part}</code> : part))} Then restart the app.
            </p>
          )}
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

      {error?.place === "page" && (
        <p className="error" role="alert" data-testid="models-error">
          {error.message}
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
                      <ConfirmInline
                        question="Delete the file?"
                        confirmLabel="Delete"
                        cancelLabel="Keep"
                        testId="model-remove-confirm"
                        busy={busy}
                        onConfirm={() => void act(() => consoleApi.removeModel(m.file)).then(() => setConfirmRemove(null))}
                        onCancel={() => setConfirmRemove(null)}
                      />
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
        {partials("llm").length > 0 && <ul className="partials">{partials("llm").map(partialRow)}</ul>}
      </div>

      {llmDownloads.length > 0 && (
        <div className="card">
          <h2>Downloads</h2>
          <ul className="downloads" data-testid="downloads">
            {llmDownloads.slice().reverse().map(downloadRow)}
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
        <SourceForm
          id="download-source"
          label="Another model"
          placeholder="hf:user/repo:quant, hf:user/repo/file.gguf or https://…/model.gguf"
          submitTestId="download-start"
          primary
          busy={busy}
          onDownload={(source, started) =>
            void act(async () => {
              await consoleApi.startDownload({ source });
              started();
            })
          }
        />
      </div>

      <SpeechSection
        models={models}
        downloads={speechDownloads}
        partials={partials("speech")}
        busy={busy}
        headingRef={speechRef}
        act={(fn) => act(fn, "speech")}
        error={error?.place === "speech" ? error.message : null}
        downloadRow={downloadRow}
        partialRow={partialRow}
      />
    </section>
  );
}

/** whisper.cpp's size name as people know it: "base" → "Whisper base", "small.en" → "Whisper small (English)". */
function speechTitle(sizeLabel: string | null): string | null {
  if (!sizeLabel) return null;
  return sizeLabel.endsWith(".en") ? `Whisper ${sizeLabel.slice(0, -3)} (English)` : `Whisper ${sizeLabel}`;
}

/**
 * Speech models: the whisper.cpp files that turn what is said in uploaded audio and video into a transcript.
 * The same calls as the language models above (listModels, useModel, removeModel, startDownload), with kind
 * "speech".
 */
function SpeechSection({
  models,
  downloads,
  partials,
  busy,
  headingRef,
  act,
  downloadRow,
  partialRow,
  error,
}: {
  models: ModelsView | null;
  downloads: DownloadView[];
  partials: ModelsView["partial"];
  busy: boolean;
  headingRef: RefObject<HTMLHeadingElement | null>;
  act: (fn: () => Promise<unknown>) => Promise<void>;
  downloadRow: (d: DownloadView) => ReactNode;
  partialRow: (p: ModelsView["partial"][number]) => ReactNode;
  error: string | null;
}) {
  const [confirmRemove, setConfirmRemove] = useState<string | null>(null);
  const speech = models?.speech;
  const recommended = speech?.recommended;
  const recommendedRunning = downloads.some((d) => d.source === recommended?.source && isDownloadRunning(d));
  const recommendedFile = speech?.models.find((m) => m.file === recommended?.file);
  return (
    <div className="card speech" id="speech" data-testid="speech-models" aria-labelledby="speech-title">
      <h2 id="speech-title" ref={headingRef} tabIndex={-1}>
        Speech models
      </h2>
      <p className="muted small">
        For transcripts of audio and video uploads: what is said in them becomes text the model can read. In {speech?.directory}.
        {speech && speech.models.length > 0 && (
          <>
            {" "}
            <span className="badge">in use</span> is the one uploads are transcribed with.
          </>
        )}
      </p>
      {error && (
        <p className="error" role="alert" data-testid="speech-error">
          {error}
        </p>
      )}
      {speech && speech.models.length > 0 && (
        <table data-testid="speech-table">
          <thead>
            <tr>
              <th scope="col">File</th>
              <th scope="col">Model</th>
              <th scope="col">Size</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {speech.models.map((m) => (
              <tr key={m.file} data-testid="speech-row" data-file={m.file} data-active={m.active ? "true" : "false"}>
                <td>
                  {m.file} {m.active && <span className="badge">in use</span>}
                </td>
                <td>
                  {m.error ? (
                    <span className="error">{m.error}</span>
                  ) : (
                    <>
                      {speechTitle(m.sizeLabel) ?? "Whisper"}
                      {m.weights ? <span className="muted"> ({m.weights})</span> : null}
                    </>
                  )}
                </td>
                <td data-testid="speech-size">{formatBytes(m.sizeBytes)}</td>
                <td className="actions">
                  {confirmRemove === m.file ? (
                    <ConfirmInline
                      question={m.active ? "Delete the file? Uploads get no transcript until another is chosen." : "Delete the file?"}
                      confirmLabel="Delete"
                      cancelLabel="Keep"
                      testId="speech-remove-confirm"
                      busy={busy}
                      onConfirm={() => void act(() => consoleApi.removeModel(m.file, { kind: "speech", force: m.active })).then(() => setConfirmRemove(null))}
                      onCancel={() => setConfirmRemove(null)}
                    />
                  ) : (
                    <>
                      {!m.active && !m.error && (
                        <button data-testid="speech-use" disabled={busy} onClick={() => void act(() => consoleApi.useModel(m.file, { kind: "speech" }))}>
                          Use
                        </button>
                      )}{" "}
                      <button className="danger" data-testid="speech-remove" disabled={busy} onClick={() => setConfirmRemove(m.file)}>
                        Remove
                      </button>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {speech && speech.models.length === 0 && (
        <div className="empty speech-empty" data-testid="speech-empty">
          <p>
            No speech model yet, so audio and video uploads get no transcript: the model is told that what is said in them is unknown, and invents nothing.
          </p>
          <p>
            Get one below: {recommended?.title} is about {formatBytes(recommended?.approxBytes ?? 0)} and hears many languages. Text, PDFs, images and code never need
            one.
          </p>
        </div>
      )}
      {speech && speech.models.length > 0 && speech.active === null && (
        <p className="notice" data-testid="speech-none-in-use">
          No speech model is in use, so uploads get no transcript: press Use on one above.
        </p>
      )}
      {partials.length > 0 && <ul className="partials">{partials.map(partialRow)}</ul>}
      {downloads.length > 0 && (
        <ul className="downloads" data-testid="speech-downloads">
          {downloads.slice().reverse().map(downloadRow)}
        </ul>
      )}
      {recommended && (
        <div className="form-row speech-recommended" data-testid="speech-recommended">
          <span>
            <strong>{recommended.title}</strong> <span className="badge">recommended</span>
            <span className="muted small"> · about {formatBytes(recommended.approxBytes)}</span>
          </span>
          {recommendedFile ? (
            recommendedFile.active ? (
              <span className="muted small">in use</span>
            ) : (
              <button data-testid="speech-recommended-use" disabled={busy} onClick={() => void act(() => consoleApi.useModel(recommendedFile.file, { kind: "speech" }))}>
                Use
              </button>
            )
          ) : (
            <button
              className="primary"
              data-testid="speech-recommended-download"
              disabled={busy || recommendedRunning}
              onClick={() => void act(() => consoleApi.startDownload({ source: recommended.source, kind: "speech" }))}
            >
              <Download size={14} aria-hidden /> Download
            </button>
          )}
        </div>
      )}
      <SourceForm
        id="speech-source"
        label="Another speech model"
        placeholder="small, tiny, base.en, hf:user/repo/ggml-model.bin or https://…/ggml-model.bin"
        submitTestId="speech-download-start"
        busy={busy}
        onDownload={(source, started) =>
          void act(async () => {
            await consoleApi.startDownload({ source, kind: "speech" });
            started();
          })
        }
      />
    </div>
  );
}
