// Files: drop or pick files to upload them to the Files API (with progress), see what the model gets from
// each (kind, status, token estimate), when it expires, and delete it. A refused file is explained in place.
import { useCallback, useEffect, useRef, useState } from "react";
import type { ServerInfo } from "../../../server/features/console/contract";
import { ATTACH_ACCEPT } from "../chat/attachments";
import { consoleApi } from "../console-client";
import { deleteFile, expiresIn, KIND_LABEL, listFiles, uploadFile, type FileOut } from "../files-client";
import { formatBytes, formatTime } from "../format";
import { X } from "../icons";
import { useDropTarget } from "../use-drop-target";
import { usePoll } from "../use-poll";

interface Upload {
  key: number;
  name: string;
  size: number;
  progress: number;
  error: string | null;
}

/** Audio and video get a transcript only with a speech model (set up on the Models page). */
const HEARD_KINDS = new Set(["audio", "video"]);

export function FilesPage({ info, onGo }: { info: ServerInfo | null; onGo?: (page: "models", section: "speech") => void }) {
  const [files, setFiles] = useState<FileOut[] | null>(null);
  /** Whether a speech model is in use; asked only while the list holds audio or video. */
  const [hasSpeechModel, setHasSpeechModel] = useState<boolean | null>(null);
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [nextKey, setNextKey] = useState(1);
  const pickRef = useRef<HTMLInputElement>(null);

  const refresh = useCallback(async () => {
    if (!info) return;
    try {
      const list = await listFiles(info.openaiBaseUrl, await consoleApi.windowKey());
      setFiles(list);
      if (list.some((f) => HEARD_KINDS.has(f.content_kind))) setHasSpeechModel((await consoleApi.listModels()).speech.active !== null);
      setError(null);
    } catch (err) {
      setError((err as Error).message);
    }
  }, [info]);
  usePoll(refresh, 3000);
  // The server's address arrives after the first render: list at once then, not at the next poll.
  useEffect(() => {
    void refresh();
  }, [refresh]);

  const change = (key: number, patch: Partial<Upload>) => setUploads((all) => all.map((u) => (u.key === key ? { ...u, ...patch } : u)));

  async function upload(list: FileList | File[]) {
    if (!info) return;
    const apiKey = await consoleApi.windowKey();
    let key = nextKey;
    const started = Array.from(list).map((file) => ({ file, key: key++ }));
    setNextKey(key);
    setUploads((all) => [...all, ...started.map(({ file, key }) => ({ key, name: file.name, size: file.size, progress: 0, error: null }))]);
    for (const { file, key } of started) {
      try {
        await uploadFile(info.openaiBaseUrl, apiKey, file, (progress) => change(key, { progress }));
        setUploads((all) => all.filter((u) => u.key !== key));
        await refresh();
      } catch (err) {
        change(key, { error: (err as Error).message });
      }
    }
  }

  async function remove(file: FileOut) {
    if (!info) return;
    try {
      await deleteFile(info.openaiBaseUrl, await consoleApi.windowKey(), file.id);
      await refresh();
    } catch (err) {
      setError((err as Error).message);
    }
  }

  const drop = useDropTarget((files) => void upload(files));

  return (
    <section className="page" data-testid="files-page">
      <header className="page-header">
        <h1>Files</h1>
        <span className="muted small">Uploaded files are kept 30 days; the chat can use them by id. At most 100 files, 30 uploads an hour.</span>
      </header>
      <div
        className={`dropzone ${drop.dragging ? "dragging" : ""}`}
        data-testid="files-dropzone"
        {...drop.handlers}
      >
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
                <progress value={u.progress} max={1} />
              )}
            </li>
          ))}
        </ul>
      )}

      {error && <p className="error">{error}</p>}
      {files && files.length === 0 && uploads.length === 0 && <p className="empty">No files yet.</p>}
      {files && files.length > 0 && (
        <table data-testid="files-table">
          <thead>
            <tr>
              <th>Name</th>
              <th>Kind</th>
              <th>Size</th>
              <th>Status</th>
              <th>Tokens</th>
              <th>Expires</th>
              <th>
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {files.map((f) => (
              <tr key={f.id} data-testid="files-row" data-file-id={f.id}>
                <td>
                  {f.filename}
                  <div className="muted small">
                    <code>{f.id}</code> · {f.mime_type}
                  </div>
                </td>
                <td>
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
                </td>
                <td className="nowrap">{formatBytes(f.size)}</td>
                <td data-testid="files-status">
                  <span className={`pill ${f.status}`}>{f.status === "uploaded" ? "reading…" : f.status === "processed" ? "ready" : "error"}</span>
                  {f.status_details && <div className="error small">{f.status_details}</div>}
                </td>
                <td data-testid="files-tokens">{f.status === "processed" ? `≈ ${f.token_estimate.toLocaleString()}` : "—"}</td>
                <td className="nowrap" title={formatTime(f.expires_at)}>
                  {expiresIn(f.expires_at)}
                </td>
                <td>
                  <button className="danger" data-testid="files-delete" onClick={() => void remove(f)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
