// Speech models: the whisper.cpp files that turn what is said in uploaded audio and video into a transcript.
// The same calls as the language models (listModels, useModel, removeModel, startDownload), with kind "speech".
import { useState, type RefObject } from "react";
import type { DownloadView, ModelsView, SpeechModelView } from "../../../server/features/console/contract";
import { ConfirmInline } from "../components/confirm-inline";
import { DataTable } from "../components/data-table";
import { consoleApi, isDownloadRunning } from "../console-client";
import { formatBytes } from "../format";
import { Download } from "../icons";
import { Downloads, Partials, SourceForm, type Act } from "./downloads";

/** whisper.cpp's size name as people know it: "base" → "Whisper base", "small.en" → "Whisper small (English)". */
function speechTitle(sizeLabel: string | null): string | null {
  if (!sizeLabel) return null;
  return sizeLabel.endsWith(".en") ? `Whisper ${sizeLabel.slice(0, -3)} (English)` : `Whisper ${sizeLabel}`;
}

export function SpeechSection({
  models,
  downloads,
  busy,
  headingRef,
  act,
  error,
}: {
  models: ModelsView | null;
  downloads: DownloadView[];
  busy: boolean;
  headingRef: RefObject<HTMLHeadingElement | null>;
  act: Act;
  error: string | null;
}) {
  const [confirmRemove, setConfirmRemove] = useState<string | null>(null);
  const speech = models?.speech;
  const recommended = speech?.recommended;
  const recommendedRunning = downloads.some((d) => d.source === recommended?.source && isDownloadRunning(d));
  const recommendedFile = speech?.models.find((m) => m.file === recommended?.file);
  const actions = (m: SpeechModelView) =>
    confirmRemove === m.file ? (
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
    );
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
        <DataTable
          testId="speech-table"
          rows={speech.models}
          rowKey={(m) => m.file}
          rowAttributes={(m) => ({ "data-testid": "speech-row", "data-file": m.file, "data-active": m.active ? "true" : "false" })}
          columns={[
            { key: "file", header: "File", cell: (m) => <>{m.file} {m.active && <span className="badge">in use</span>}</> },
            {
              key: "model",
              header: "Model",
              cell: (m) =>
                m.error ? (
                  <span className="error">{m.error}</span>
                ) : (
                  <>
                    {speechTitle(m.sizeLabel) ?? "Whisper"}
                    {m.weights ? <span className="muted"> ({m.weights})</span> : null}
                  </>
                ),
            },
            { key: "size", header: "Size", testId: "speech-size", cell: (m) => formatBytes(m.sizeBytes) },
            { key: "actions", header: { hidden: "Actions" }, kind: "actions", cell: actions },
          ]}
        />
      )}
      {speech && speech.models.length === 0 && (
        <div className="empty speech-empty" data-testid="speech-empty">
          <p>No speech model yet, so audio and video uploads get no transcript: the model is told that what is said in them is unknown, and invents nothing.</p>
          <p>
            Get one below: {recommended?.title} is about {formatBytes(recommended?.approxBytes ?? 0)} and hears many languages. Text, PDFs, images and code never need one.
          </p>
        </div>
      )}
      {speech && speech.models.length > 0 && speech.active === null && (
        <p className="notice" data-testid="speech-none-in-use">
          No speech model is in use, so uploads get no transcript: press Use on one above.
        </p>
      )}
      <Partials models={models} kind="speech" busy={busy} act={act} />
      <Downloads downloads={downloads} act={act} testId="speech-downloads" />
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
        kind="speech"
        act={act}
      />
    </div>
  );
}
