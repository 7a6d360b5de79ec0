// Files: drop or pick files to upload them to the Files API (with progress), see what the model gets from
// each (kind, status, token estimate), when it expires, and delete it (asked first, naming the saved chats
// that sent it). The list comes pushed (state/window-state.ts): the page never polls.
import { useRef, useState } from "react";
import { ATTACH_ACCEPT } from "../chat/attachments";
import { chatsUsingFile, listChats, type SavedChat } from "../chat/chat-store";
import { ConfirmInline } from "../components/confirm-inline";
import { DataTable, type Column } from "../components/data-table";
import { deleteFile, expiresIn, KIND_LABEL, uploadFile } from "../files-client";
import { formatBytes, formatTime } from "../format";
import { X } from "../icons";
import { dropFromWindow, putFileInWindow, serverInfo, useWindow } from "../state/window-state";
import { useDropTarget } from "../use-drop-target";
import type { FileOut } from "../../../server/features/console/wire";

interface Upload {
  key: number;
  name: string;
  size: number;
  progress: number;
  error: string | null;
}

/** Audio and video get a transcript only with a speech model (set up on the Models page). */
const HEARD_KINDS = new Set(["audio", "video"]);

function titles(chats: SavedChat[]): string {
  const names = chats.slice(0, 3).map((c) => `“${c.title}”`);
  return chats.length > 3 ? `${names.join(", ")} and ${chats.length - 3} more` : names.join(", ");
}

export function FilesPage({ onGo }: { onGo?: (page: "models", section: "speech") => void }) {
  const info = useWindow((s) => s.info);
  const files = useWindow((s) => s.files);
  const hasSpeechModel = useWindow((s) => (s.models ? s.models.speech.active !== null : null));
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [confirming, setConfirming] = useState<{ id: string; usedBy: SavedChat[] } | null>(null);
  const nextKey = useRef(1);
  const pickRef = useRef<HTMLInputElement>(null);

  const change = (key: number, patch: Partial<Upload>) => setUploads((all) => all.map((u) => (u.key === key ? { ...u, ...patch } : u)));

  async function upload(list: FileList | File[]) {
    const started = Array.from(list).map((file) => ({ file, key: nextKey.current++ }));
    setUploads((all) => [...all, ...started.map(({ file, key }) => ({ key, name: file.name, size: file.size, progress: 0, error: null }))]);
    for (const { file, key } of started) {
      try {
        // Dropped as the window opens, a file waits for the server's address instead of being lost.
        const { openaiBaseUrl } = await serverInfo();
        const stored = await uploadFile(openaiBaseUrl, file, (progress) => change(key, { progress }));
        setUploads((all) => all.filter((u) => u.key !== key));
        // Shown at once; the pushed list follows.
        putFileInWindow(stored);
      } catch (err) {
        change(key, { error: (err as Error).message });
      }
    }
  }

  async function askToDelete(file: FileOut) {
    setError(null);
    const usedBy = chatsUsingFile(await listChats().catch(() => []), file.id);
    setConfirming({ id: file.id, usedBy });
  }

  async function remove(file: FileOut) {
    if (!info) return;
    setConfirming(null);
    try {
      await deleteFile(info.openaiBaseUrl, file.id);
      dropFromWindow("files", file.id);
    } catch (err) {
      setError((err as Error).message);
    }
  }

  const drop = useDropTarget((list) => void upload(list));

  const columns: Array<Column<FileOut>> = [
    {
      key: "name",
      header: "Name",
      cell: (f) => (
        <>
          {f.filename}
          <div className="muted small hide-narrow">
            <code>{f.id}</code> · {f.mime_type}
          </div>
        </>
      ),
    },
    {
      key: "kind",
      header: "Kind",
      cell: (f) => (
        <>
          <span data-testid="files-kind">{KIND_LABEL[f.content_kind] ?? f.content_kind}</span>
          {HEARD_KINDS.has(f.content_kind) && f.status === "processed" && hasSpeechModel === false && (
            <div className="muted small" data-testid="files-no-transcript">
              No speech model is in use: audio and video uploaded now get no transcript.{" "}
              {onGo && (
                <button className="link" data-testid="files-get-speech-model" onClick={() => onGo("models", "speech")}>
                  Set one up
                </button>
              )}
            </div>
          )}
        </>
      ),
    },
    { key: "size", header: "Size", kind: "nowrap", cell: (f) => formatBytes(f.size), narrow: "hide" },
    {
      key: "status",
      header: "Status",
      testId: "files-status",
      cell: (f) => (
        <>
          <span className={`pill ${f.status}`}>{f.status === "uploaded" ? "reading…" : f.status === "processed" ? "ready" : "error"}</span>
          {f.status_details && <div className="error small">{f.status_details}</div>}
        </>
      ),
    },
    { key: "tokens", header: "Tokens", testId: "files-tokens", cell: (f) => (f.status === "processed" ? `≈ ${f.token_estimate.toLocaleString()}` : "—") },
    { key: "expires", header: "Expires", kind: "nowrap", cell: (f) => <span title={formatTime(f.expires_at)}>{expiresIn(f.expires_at)}</span> },
    {
      key: "actions",
      header: { hidden: "Actions" },
      kind: "actions",
      cell: (f) =>
        confirming?.id === f.id ? (
          <div className="confirm-block" data-testid="files-delete-question">
            <p className="small">
              {confirming.usedBy.length === 0
                ? "Delete this file? No saved chat sent it."
                : `Delete this file? ${confirming.usedBy.length === 1 ? "The saved chat" : `${confirming.usedBy.length} saved chats`} ${titles(confirming.usedBy)} sent it: ${confirming.usedBy.length === 1 ? "it" : "they"} will show it as deleted and stop sending it.`}
            </p>
            <ConfirmInline confirmLabel="Delete now" cancelLabel="Keep" testId="files-delete-confirm" onConfirm={() => void remove(f)} onCancel={() => setConfirming(null)} />
          </div>
        ) : (
          <button className="danger" data-testid="files-delete" onClick={() => void askToDelete(f)}>
            Delete
          </button>
        ),
    },
  ];

  return (
    <section className="page" data-testid="files-page">
      <header className="page-header">
        <h1>Files</h1>
        <span className="muted small">Uploaded files are kept 30 days; the chat can use them by id. At most 100 files, 30 uploads an hour.</span>
      </header>
      <div className={`dropzone ${drop.dragging ? "dragging" : ""}`} data-testid="files-dropzone" {...drop.handlers}>
        <p>Drop files here, or</p>
        {/* A real button, so the picker is reachable by keyboard; it offers the kinds the server reads. */}
        <button type="button" className="primary" onClick={() => pickRef.current?.click()}>
          Choose files…
        </button>
        <input
          ref={pickRef}
          type="file"
          multiple
          hidden
          accept={ATTACH_ACCEPT}
          data-testid="files-pick"
          onChange={(e) => {
            if (e.target.files) void upload(Array.from(e.target.files));
            e.target.value = "";
          }}
        />
        <p className="muted small">Text and code, PDF, images (also HEIC), audio, video up to 5 minutes, Pages/Numbers/Keynote. Up to 100 MB.</p>
      </div>

      {uploads.length > 0 && (
        <ul className="uploads" data-testid="files-uploads">
          {uploads.map((u) => (
            <li key={u.key} className={u.error ? "failed" : ""} data-testid="files-upload">
              <div className="form-row">
                <strong>{u.name}</strong>
                <span className="muted small">{formatBytes(u.size)}</span>
                {u.error ? (
                  <button className="icon" onClick={() => setUploads((all) => all.filter((x) => x.key !== u.key))} aria-label={`Dismiss ${u.name}`} title="Dismiss">
                    <X size={14} aria-hidden />
                  </button>
                ) : (
                  <span className="muted small">{u.progress < 1 ? `uploading ${Math.round(u.progress * 100)}%` : "reading…"}</span>
                )}
              </div>
              {u.error ? (
                <p className="error small" role="alert" data-testid="files-upload-error">
                  Not uploaded: {u.error}
                </p>
              ) : (
                <progress value={u.progress} max={1} aria-label={`Uploading ${u.name}`} />
              )}
            </li>
          ))}
        </ul>
      )}

      {error && <p className="error">{error}</p>}
      {files && files.length === 0 && uploads.length === 0 && <p className="empty">No files yet.</p>}
      {files && files.length > 0 && (
        <div className="card flush">
          <DataTable
            testId="files-table"
            rows={files}
            columns={columns}
            rowKey={(f) => f.id}
            rowAttributes={(f) => ({ "data-testid": "files-row", "data-file-id": f.id })}
          />
        </div>
      )}
    </section>
  );
}
