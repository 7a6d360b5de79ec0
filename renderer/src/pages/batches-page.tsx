// Message batches over the Messages Batches API, as any client uses it: drop a JSONL file (one
// {"custom_id", "params"} per line, the format the Anthropic console takes) to create a batch, watch each
// batch's counts, cancel it, download its results as JSONL, delete it.
import { useCallback, useState } from "react";
import type { ServerInfo } from "../../../server/features/console/contract";
import { consoleApi } from "../console-client";
import { formatBytes } from "../format";
import { usePoll } from "../use-poll";
import { ConfirmInline } from "../confirm-inline";
import { useDropTarget } from "../use-drop-target";

interface RequestCounts {
  processing: number;
  succeeded: number;
  errored: number;
  canceled: number;
  expired: number;
}

interface MessageBatch {
  id: string;
  processing_status: "in_progress" | "canceling" | "ended";
  request_counts: RequestCounts;
  created_at: string;
  ended_at: string | null;
  expires_at: string;
  archived_at: string | null;
  results_url: string | null;
}

interface ApiErrorBody {
  error?: { message?: string; details?: { errors?: Array<{ index: number; param: string; message: string }> } };
}

/** A JSONL file read in the window: the requests, and for each the line it came from. */
interface Draft {
  file: string;
  size: number;
  requests: unknown[];
  lineOf: number[];
  problems: string[];
}

/** Batches are limited to 256 MiB; the window reads the file itself, so it says so before sending. */
const MAX_FILE_BYTES = 256 * 1024 * 1024;

export function parseJsonl(file: string, size: number, text: string): Draft {
  const draft: Draft = { file, size, requests: [], lineOf: [], problems: [] };
  text.split(/\r?\n/).forEach((line, i) => {
    if (line.trim() === "") return;
    try {
      draft.requests.push(JSON.parse(line));
      draft.lineOf.push(i + 1);
    } catch {
      if (draft.problems.length < 20) draft.problems.push(`line ${i + 1}: not valid JSON`);
    }
  });
  if (draft.requests.length === 0 && draft.problems.length === 0) draft.problems.push("the file has no requests (one JSON object per line)");
  return draft;
}

const total = (c: RequestCounts) => c.processing + c.succeeded + c.errored + c.canceled + c.expired;

function Progress({ batch }: { batch: MessageBatch }) {
  const c = batch.request_counts;
  const done = total(c) - c.processing;
  return (
    <div className="batch-progress">
      <progress max={Math.max(1, total(c))} value={done} data-testid="batch-progress" />
      <div className="muted small" data-testid="batch-counts">
        {done} of {total(c)} done · {c.succeeded} succeeded · {c.errored} errored · {c.canceled} canceled · {c.expired} expired
      </div>
    </div>
  );
}

export function BatchesPage({ info }: { info: ServerInfo | null }) {
  const [batches, setBatches] = useState<MessageBatch[] | null>(null);
  const [draft, setDraft] = useState<Draft | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [problems, setProblems] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const [confirming, setConfirming] = useState<string | null>(null);

  const api = useCallback(
    async (path: string, init: RequestInit = {}): Promise<Response> => {
      if (!info) throw new Error("The server is not reachable yet.");
      const key = await consoleApi.windowKey();
      const url = path.startsWith("http") ? path : `${info.anthropicBaseUrl}${path}`;
      return fetch(url, { ...init, headers: { "x-api-key": key, "anthropic-version": "2023-06-01", ...init.headers } });
    },
    [info],
  );

  const failure = async (res: Response): Promise<Error> => {
    const body = (await res.json().catch(() => ({}))) as ApiErrorBody;
    return new Error(body.error?.message ?? `The server answered ${res.status}.`);
  };

  const refresh = useCallback(async () => {
    if (!info) return;
    const res = await api("/v1/messages/batches?limit=100");
    if (!res.ok) throw await failure(res);
    setBatches(((await res.json()) as { data: MessageBatch[] }).data);
  }, [api, info]);
  const running = batches?.some((b) => b.processing_status !== "ended") ?? false;
  usePoll(() => refresh().catch((err: Error) => setError(err.message)), running ? 1000 : 4000, info !== null);

  const act = async (fn: () => Promise<void>) => {
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

  async function readFile(file: File) {
    setError(null);
    setProblems([]);
    if (file.size > MAX_FILE_BYTES) {
      setDraft(null);
      setError(`${file.name} is ${formatBytes(file.size)}; a batch is limited to 256 MiB.`);
      return;
    }
    setDraft(parseJsonl(file.name, file.size, await file.text()));
  }

  const drop = useDropTarget((files) => void readFile(files[0]!));

  const create = (d: Draft) =>
    act(async () => {
      setProblems([]);
      // One key per creation: should the answer be lost, sending again cannot make a second batch.
      const res = await api("/v1/messages/batches", {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": crypto.randomUUID() },
        body: JSON.stringify({ requests: d.requests }),
      });
      if (!res.ok) {
        const body = (await res.json().catch(() => ({}))) as ApiErrorBody;
        const listed = body.error?.details?.errors ?? [];
        // The server counts requests; the file counts lines.
        const line = (index: number) => `line ${d.lineOf[index] ?? "?"}`;
        const inLines = (text: string) => text.replace(/'requests\[\d+\]\./g, "'").replace(/requests\[(\d+)\]/g, (_m, i: string) => line(Number(i)));
        setProblems(listed.map((p) => `${line(p.index)}: ${inLines(p.message)}`));
        const message = body.error?.message ?? `The server answered ${res.status}.`;
        // With the lines listed below, the summary's first sentence says enough.
        throw new Error(listed.length > 0 ? `${message.split(". ")[0]}.` : message);
      }
      setDraft(null);
    });

  const download = (batch: MessageBatch) =>
    act(async () => {
      if (!batch.results_url) throw new Error("This batch has no results to download.");
      const res = await api(batch.results_url);
      if (!res.ok) throw await failure(res);
      const url = URL.createObjectURL(await res.blob());
      const link = document.createElement("a");
      link.href = url;
      link.download = `${batch.id}_results.jsonl`;
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });

  return (
    <section
      className={`page ${drop.dragging ? "dragging" : ""}`}
      data-testid="batches-page"
      {...drop.handlers}
    >
      <header className="page-header">
        <h1>Batches</h1>
      </header>

      <div className="card drop-zone" data-testid="batch-drop">
        <h2>New batch</h2>
        <p className="muted">
          Drop a JSONL file here: one request per line, <code>{'{"custom_id": "a1", "params": {"model": "svc", "max_tokens": 256, "messages": [...]}}'}</code>. Up to
          100,000 requests or 256 MiB. The requests and their results are stored on this machine until you delete the batch (results are kept 29 days).
        </p>
        <label className="button">
          Choose a file…
          <input type="file" accept=".jsonl,.ndjson,.json,.txt" hidden data-testid="batch-file" onChange={(e) => e.target.files?.[0] && void readFile(e.target.files[0])} />
        </label>
        {draft && (
          <div className="draft" data-testid="batch-draft">
            <p>
              <strong>{draft.file}</strong> <span className="muted">({formatBytes(draft.size)})</span>: {draft.requests.length} request
              {draft.requests.length === 1 ? "" : "s"}
            </p>
            {draft.problems.length > 0 && (
              <ul className="error" data-testid="batch-draft-problems">
                {draft.problems.map((p) => (
                  <li key={p}>{p}</li>
                ))}
              </ul>
            )}
            <div className="toolbar">
              <button className="primary" data-testid="batch-create" disabled={busy || draft.problems.length > 0 || !info} onClick={() => void create(draft)}>
                Create batch
              </button>
              <button onClick={() => setDraft(null)}>Discard</button>
            </div>
          </div>
        )}
      </div>

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
          <table data-testid="batches-table">
            <thead>
              <tr>
                <th>Batch</th>
                <th>Status</th>
                <th>Progress</th>
                <th>Created</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {batches.map((b) => (
                <tr key={b.id} data-testid="batch-row" data-batch-id={b.id} data-status={b.processing_status}>
                  <td>
                    <code title={b.id}>{b.id}</code>
                  </td>
                  <td data-testid="batch-status">
                    {b.processing_status.replace("_", " ")}
                    {b.archived_at && <div className="muted small">results erased</div>}
                  </td>
                  <td>
                    <Progress batch={b} />
                  </td>
                  <td>
                    {new Date(b.created_at).toLocaleString()}
                    {b.ended_at && <div className="muted small">ended {new Date(b.ended_at).toLocaleTimeString()}</div>}
                  </td>
                  <td className="actions">
                    {b.processing_status === "in_progress" && (
                      <button data-testid="batch-cancel" disabled={busy} onClick={() => void act(async () => {
                        const res = await api(`/v1/messages/batches/${b.id}/cancel`, { method: "POST" });
                        if (!res.ok) throw await failure(res);
                      })}>
                        Cancel
                      </button>
                    )}
                    {b.results_url && (
                      <button data-testid="batch-download" disabled={busy} onClick={() => void download(b)}>
                        Download results
                      </button>
                    )}
                    {b.processing_status === "ended" &&
                      (confirming === b.id ? (
                        <ConfirmInline
                          confirmLabel="Delete now"
                          cancelLabel="Keep"
                          testId="batch-delete-confirm"
                          onConfirm={() => void act(async () => {
                            setConfirming(null);
                            const res = await api(`/v1/messages/batches/${b.id}`, { method: "DELETE" });
                            if (!res.ok) throw await failure(res);
                          })}
                          onCancel={() => setConfirming(null)}
                        />
                      ) : (
                        <button data-testid="batch-delete" onClick={() => setConfirming(b.id)}>
                          Delete
                        </button>
                      ))}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
    </section>
  );
}
