// Message batches over the Messages Batches API, as any client uses it: write prompts or drop a JSONL file to
// create a batch, watch each batch's counts (pushed: the page never polls), cancel it, read its results here
// or download them as JSONL, delete it.
import { useState } from "react";
import type { BatchResultLine, MessageBatch } from "../../../server/features/console/wire";
import { BatchBuilder } from "../batches/batch-builder";
import { parseJsonl, type Draft } from "../batches/batch-draft";
import { BatchResults } from "../batches/batch-results";
import { cancelBatch, createBatch, deleteBatch, fetchResults, InvalidRequestsError, parseResults } from "../batches/batches-api";
import { ConfirmInline } from "../components/confirm-inline";
import { DataTable, type Column } from "../components/data-table";
import { formatBytes } from "../format";
import { dropFromWindow, putBatchInWindow, useWindow } from "../state/window-state";
import { useDropTarget } from "../use-drop-target";

const total = (c: MessageBatch["request_counts"]) => c.processing + c.succeeded + c.errored + c.canceled + c.expired;

function Progress({ batch }: { batch: MessageBatch }) {
  const c = batch.request_counts;
  const done = total(c) - c.processing;
  return (
    <div className="batch-progress">
      <progress max={Math.max(1, total(c))} value={done} data-testid="batch-progress" aria-label={`Progress of ${batch.id}`} />
      <div className="muted small" data-testid="batch-counts">
        {done} of {total(c)} done · {c.succeeded} succeeded · {c.errored} errored · {c.canceled} canceled · {c.expired} expired
      </div>
    </div>
  );
}

export function BatchesPage() {
  const info = useWindow((s) => s.info);
  const batches = useWindow((s) => s.batches);
  const [draft, setDraft] = useState<Draft | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [problems, setProblems] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const [confirming, setConfirming] = useState<string | null>(null);
  const [results, setResults] = useState<{ id: string; lines: BatchResultLine[] } | null>(null);

  const act = async (fn: () => Promise<void>) => {
    setError(null);
    setBusy(true);
    try {
      await fn();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  const create = (d: Draft) =>
    act(async () => {
      if (!info) return;
      setProblems([]);
      try {
        putBatchInWindow(await createBatch(info.anthropicBaseUrl, d.requests));
        setDraft(null);
      } catch (err) {
        if (!(err instanceof InvalidRequestsError)) throw err;
        // The server counts requests; the file counts lines.
        const line = (index: number) => `line ${d.lineOf[index] ?? "?"}`;
        const inLines = (text: string) => text.replace(/'requests\[\d+\]\./g, "'").replace(/requests\[(\d+)\]/g, (_m, i: string) => line(Number(i)));
        setProblems(err.problems.map((p) => `${line(p.index)}: ${inLines(p.message)}`));
        // With the lines listed below, the summary's first sentence says enough.
        throw new Error(`${err.message.split(". ")[0]}.`);
      }
    });

  async function showResults(batch: MessageBatch) {
    setError(null);
    try {
      if (!batch.results_url) throw new Error("This batch has no results yet.");
      setResults({ id: batch.id, lines: parseResults(await fetchResults(batch.results_url)) });
    } catch (err) {
      setError((err as Error).message);
    }
  }

  const download = (batch: MessageBatch) =>
    act(async () => {
      if (!batch.results_url) throw new Error("This batch has no results to download.");
      const url = URL.createObjectURL(new Blob([await fetchResults(batch.results_url)], { type: "application/x-ndjson" }));
      const link = document.createElement("a");
      link.href = url;
      link.download = `${batch.id}_results.jsonl`;
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });

  const drop = useDropTarget((files) => {
    const file = files[0]!;
    setError(null);
    if (file.size > 256 * 1024 * 1024) return setError(`${file.name} is ${formatBytes(file.size)}; a batch is limited to 256 MiB.`);
    void file.text().then((text) => setDraft(parseJsonl(file.name, file.size, text)));
  });

  const columns: Array<Column<MessageBatch>> = [
    { key: "id", header: "Batch", cell: (b) => <code title={b.id}>{b.id}</code> },
    {
      key: "status",
      header: "Status",
      testId: "batch-status",
      cell: (b) => (
        <>
          {b.processing_status.replace("_", " ")}
          {b.archived_at && <div className="muted small">results erased</div>}
        </>
      ),
    },
    { key: "progress", header: "Progress", cell: (b) => <Progress batch={b} /> },
    {
      key: "created",
      header: "Created",
      narrow: "hide",
      cell: (b) => (
        <>
          {new Date(b.created_at).toLocaleString()}
          {b.ended_at && <div className="muted small">ended {new Date(b.ended_at).toLocaleTimeString()}</div>}
        </>
      ),
    },
    {
      key: "actions",
      header: { hidden: "Actions" },
      kind: "actions",
      cell: (b) => (
        <>
          {b.processing_status === "in_progress" && (
            <button data-testid="batch-cancel" disabled={busy} onClick={() => void act(async () => putBatchInWindow(await cancelBatch(info!.anthropicBaseUrl, b.id)))}>
              Cancel
            </button>
          )}
          {b.results_url && (
            <>
              <button data-testid="batch-view" disabled={busy} onClick={() => void showResults(b)}>
                View results
              </button>
              <button data-testid="batch-download" disabled={busy} onClick={() => void download(b)}>
                Download
              </button>
            </>
          )}
          {b.processing_status === "ended" &&
            (confirming === b.id ? (
              <ConfirmInline
                confirmLabel="Delete now"
                cancelLabel="Keep"
                testId="batch-delete-confirm"
                onConfirm={() =>
                  void act(async () => {
                    setConfirming(null);
                    await deleteBatch(info!.anthropicBaseUrl, b.id);
                    dropFromWindow("batches", b.id);
                    if (results?.id === b.id) setResults(null);
                  })
                }
                onCancel={() => setConfirming(null)}
              />
            ) : (
              <button data-testid="batch-delete" onClick={() => setConfirming(b.id)}>
                Delete
              </button>
            ))}
        </>
      ),
    },
  ];

  return (
    <section className={`page ${drop.dragging ? "dragging" : ""}`} data-testid="batches-page" {...drop.handlers}>
      <header className="page-header">
        <h1>Batches</h1>
      </header>

      <BatchBuilder draft={draft} busy={busy} canCreate={info !== null} onDraft={setDraft} onError={setError} onCreate={(d) => void create(d)} />

      {error && (
        <div className="error" data-testid="batches-error">
          <p>{error}</p>
          {problems.length > 0 && (
            <ul data-testid="batch-problems">
              {problems.map((p, i) => (
                <li key={i}>{p}</li>
              ))}
            </ul>
          )}
        </div>
      )}

      <div className="card">
        <h2>Your batches</h2>
        {batches === null ? (
          <p className="muted">Loading…</p>
        ) : batches.length === 0 ? (
          <p className="empty">No batches yet.</p>
        ) : (
          <DataTable
            testId="batches-table"
            rows={batches}
            columns={columns}
            rowKey={(b) => b.id}
            rowAttributes={(b) => ({ "data-testid": "batch-row", "data-batch-id": b.id, "data-status": b.processing_status })}
          />
        )}
      </div>

      {results && <BatchResults batchId={results.id} lines={results.lines} onClose={() => setResults(null)} />}
    </section>
  );
}
