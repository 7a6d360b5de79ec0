// The model and the hardware: what is loaded and with which settings, on which GPU, the files on disk (each
// with its own settings), suggested models sized to this machine, downloads with progress, and the speech
// models that transcribe audio and video uploads. Everything shown comes pushed (state/window-state.ts).
import { useEffect, useRef, useState } from "react";
import type { ModelFileView, ModelFit, ModelSettings, SuggestedModelView } from "../../../server/features/console/contract";
import { ConfirmInline } from "../components/confirm-inline";
import { DataTable, type Column } from "../components/data-table";
import { consoleApi, isDownloadRunning } from "../console-client";
import { formatBytes } from "../format";
import { Download } from "../icons";
import { Downloads, Partials, SourceForm } from "../models/downloads";
import { ModelSettingsForm } from "../models/model-settings-form";
import { ModelStatusCard } from "../models/model-status-card";
import { SpeechSection } from "../models/speech-section";
import { applyToWindow, useWindow } from "../state/window-state";

const FIT_LABELS: Record<ModelFit, string> = {
  fits_gpu: "Runs on your GPU",
  fits: "Fits this computer",
  tight: "Tight: close other apps",
  too_big: "Too big for this computer",
};

function fileName(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

/** The page's section a link can open it at (the Files page opens "speech"; the chat "settings"). */
export type ModelsSection = "speech" | "settings";

export function ModelsPage({ section = null }: { section?: ModelsSection | null } = {}) {
  const status = useWindow((s) => s.status);
  const models = useWindow((s) => s.models);
  const downloads = useWindow((s) => s.downloads);
  // An error shows where its action was: at the top, or in the speech section.
  const [error, setError] = useState<{ message: string; place: "page" | "speech" } | null>(null);
  const [busy, setBusy] = useState(false);
  const [confirmRemove, setConfirmRemove] = useState<string | null>(null);
  const [settingsOf, setSettingsOf] = useState<string | null>(null);

  const actIn = (place: "page" | "speech") => async (fn: () => Promise<unknown>) => {
    setError(null);
    setBusy(true);
    try {
      await fn();
    } catch (err) {
      setError({ message: (err as Error).message, place });
    } finally {
      setBusy(false);
    }
  };
  const act = actIn("page");
  const saveSettings = (file: string | null, settings: ModelSettings) => void act(async () => applyToWindow({ status: await consoleApi.setModelSettings(file, settings) }));

  // Opened at a section (from the Files page, or the chat): scroll there once the page has its content.
  const speechRef = useRef<HTMLHeadingElement>(null);
  const loaded = models !== null && status !== null;
  useEffect(() => {
    if (!loaded) return;
    if (section === "speech") {
      speechRef.current?.scrollIntoView({ block: "start" });
      speechRef.current?.focus({ preventScroll: true });
    } else if (section === "settings") {
      const panel = document.getElementById("model-settings") as HTMLDetailsElement | null;
      if (panel) {
        panel.open = true;
        panel.scrollIntoView({ block: "start" });
        panel.querySelector("input")?.focus({ preventScroll: true });
      }
    }
  }, [section, loaded]);

  const loadedElsewhere = models?.loaded && !models.models.some((m) => m.loaded) ? models.loaded : null;
  // The model serving now: another file of the folder can be its draft model (speculation).
  const serving = status?.model?.file && status.model.state === "ready" ? status.model : null;
  const modelColumns: Array<Column<ModelFileView>> = [
    { key: "file", header: "File", cell: (m) => <>{m.file} {m.loaded && <span className="badge">loaded</span>} {m.active && <span className="badge alt">default</span>}{" "}
        {m.vision && (
          <span className="badge" data-testid="model-vision" title="A vision projector lies beside this model: it sees images">
            vision
          </span>
        )}
      </> },
    { key: "model", header: "Model", cell: (m) => (m.error ? <span className="error">{m.error}</span> : `${m.name ?? "?"} (${m.architecture ?? "?"})`) },
    { key: "quant", header: "Quantization", narrow: "hide", cell: (m) => m.quantization ?? "" },
    { key: "size", header: "Size", testId: "model-size", cell: (m) => formatBytes(m.sizeBytes) },
    {
      key: "actions",
      header: { hidden: "Actions" },
      kind: "actions",
      cell: (m) =>
        confirmRemove === m.file ? (
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
            {!m.loaded && !m.error && serving && serving.settings.draftModel !== m.file && (
              <button
                data-testid="model-use-as-draft"
                disabled={busy}
                title={`${m.file} writes a few tokens ahead for ${serving.name ?? serving.file}, which checks them: the same answers, faster where it guesses well (a smaller model of the same family)`}
                onClick={() => saveSettings(null, { ...serving.settings, draftModel: m.file })}
              >
                Use as draft
              </button>
            )}{" "}
            {!m.error && (
              <button data-testid="model-settings-open" aria-expanded={settingsOf === m.file} onClick={() => setSettingsOf(settingsOf === m.file ? null : m.file)}>
                Settings
              </button>
            )}{" "}
            {!m.active && !m.loaded && (
              <button className="danger" data-testid="model-remove" disabled={busy} onClick={() => setConfirmRemove(m.file)}>
                Remove
              </button>
            )}
          </>
        ),
    },
  ];
  const suggestedColumns: Array<Column<SuggestedModelView>> = [
    {
      key: "model",
      header: "Model",
      cell: (m) => (
        <>
          <strong>{m.title}</strong>
          {m.recommended && <span className="badge">recommended</span>}
          {m.vision && (
            <span className="badge" data-testid="suggested-vision" title="Its vision projector comes with it: it sees images">
              vision
            </span>
          )}
          <div className="muted small">{m.description}</div>
        </>
      ),
    },
    { key: "download", header: "Download", kind: "nowrap", cell: (m) => formatBytes(m.approxBytes) },
    { key: "needs", header: "Needs", kind: "nowrap", narrow: "hide", cell: (m) => formatBytes(m.needsBytes) },
    { key: "fit", header: "On this computer", cell: (m) => <span className={`fit ${m.fit}`}>{FIT_LABELS[m.fit]}{m.fit === "too_big" ? ` (${formatBytes(status?.ramTotalBytes ?? 0)} of memory)` : ""}</span> },
    {
      key: "actions",
      header: { hidden: "Actions" },
      kind: "actions",
      cell: (m) =>
        m.downloaded ? (
          <button data-testid="suggested-use" disabled={busy} onClick={() => void act(() => consoleApi.useModel(m.file))}>
            Use
          </button>
        ) : (
          <button data-testid="suggested-download" disabled={busy || m.fit === "too_big" || downloads.some((d) => d.source === m.source && isDownloadRunning(d))} onClick={() => void act(() => consoleApi.startDownload({ source: m.source }))}>
            <Download size={14} aria-hidden /> Download
          </button>
        ),
    },
  ];
  const editing = models?.models.find((m) => m.file === settingsOf);
  const llm = downloads.filter((d) => (d.kind ?? "llm") === "llm");

  return (
    <section className="page" data-testid="models-page" aria-labelledby="models-title">
      <header className="page-header">
        <h1 id="models-title">Model</h1>
      </header>

      <ModelStatusCard status={status} busy={busy} act={act} onSaveSettings={saveSettings} modelFiles={models?.models.map((m) => m.file)} />

      {status?.model.upstreams && (
        <p className="notice" data-testid="models-upstreams">
          Generating on {status.model.upstreams.length} upstream server{status.model.upstreams.length === 1 ? "" : "s"} (
          {status.model.upstreams.map((u) => `${u.url}${u.healthy ? "" : ", down"}`).join("; ")}). Switching the model is theirs to do: restart
          them with another model. The file loaded here gives only the tokenizer and chat template.
        </p>
      )}

      {error?.place === "page" && (
        <p className="error" role="alert" data-testid="models-error">
          {error.message}
        </p>
      )}

      <div className="card">
        <h2>Models on this computer</h2>
        <p className="muted small">
          In {models?.directory}. <span className="badge">loaded</span> is the model answering now; <span className="badge alt">default</span> is the one the app loads at start; <span className="badge">vision</span> marks a model that sees images (its projector lies beside it as its name with .mmproj.gguf).
          Each model keeps its own settings (Settings).
        </p>
        {loadedElsewhere && (
          <p className="notice" data-testid="model-elsewhere">
            The loaded model, {fileName(loadedElsewhere)}, is not in this folder: it was given at start ({loadedElsewhere}).
          </p>
        )}
        {models && models.models.length > 0 && (
          <DataTable testId="models-table" rows={models.models} columns={modelColumns} rowKey={(m) => m.file} rowAttributes={(m) => ({ "data-testid": "model-row", "data-file": m.file })} />
        )}
        {editing && (
          <div className="card inset" data-testid="model-row-settings">
            <h3>Settings of {editing.name ?? editing.file}</h3>
            <ModelSettingsForm
              file={editing.file}
              settings={editing.settings}
              current={{}}
              limits={{ contextSize: editing.contextLength, gpuLayers: null, threads: null }}
              loaded={editing.loaded}
              busy={busy}
              draftChoices={models!.models.filter((m) => m.file !== editing.file).map((m) => m.file)}
              onSave={(settings) => void act(async () => {
                applyToWindow({ status: await consoleApi.setModelSettings(editing.file, settings) });
                setSettingsOf(null);
              })}
            />
          </div>
        )}
        {models && models.models.length === 0 && !models.loaded && (
          <p className="empty" data-testid="models-empty">
            No model files here yet: download one of the suggested models below.
          </p>
        )}
        <Partials models={models} kind="llm" busy={busy} act={act} />
      </div>

      {llm.length > 0 && (
        <div className="card">
          <h2>Downloads</h2>
          <Downloads downloads={llm} act={act} testId="downloads" />
        </div>
      )}

      <div className="card">
        <h2>Suggested models for this computer</h2>
        <p className="muted small">
          Sized to its {status ? formatBytes(status.ramTotalBytes) : "…"} of memory{status?.gpu && status.gpu.vramTotalBytes > 0 ? ` and ${formatBytes(status.gpu.vramTotalBytes)} of GPU memory` : ""}.
          All answer fast or thinking and call tools.
        </p>
        <DataTable testId="suggested-models" rows={models?.suggested ?? []} columns={suggestedColumns} rowKey={(m) => m.source} rowAttributes={(m) => ({ "data-testid": "suggested-model", "data-source": m.source, "data-fit": m.fit })} />
        <SourceForm id="download-source" label="Another model" placeholder="hf:user/repo:quant, hf:user/repo/file.gguf or https://…/model.gguf" submitTestId="download-start" primary busy={busy} kind="llm" act={act} />
      </div>

      <SpeechSection
        models={models}
        downloads={downloads.filter((d) => d.kind === "speech")}
        busy={busy}
        headingRef={speechRef}
        act={actIn("speech")}
        error={error?.place === "speech" ? error.message : null}
      />
    </section>
  );
}
