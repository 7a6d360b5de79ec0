// A new batch, from the keyboard or the mouse: write prompts (one per line) with a system prompt and a
// length limit, or choose a JSONL file (a real button; dropping the file on the page works too). Either way
// the requests are shown before the batch is created.
import { useRef, useState } from "react";
import { formatBytes } from "../format";
import { draftFromPrompts, MAX_FILE_BYTES, parseJsonl, type Draft, type Written } from "./batch-draft";

export function BatchBuilder({ draft, busy, canCreate, onDraft, onError, onCreate }: {
  draft: Draft | null;
  busy: boolean;
  canCreate: boolean;
  onDraft: (draft: Draft | null) => void;
  onError: (message: string | null) => void;
  onCreate: (draft: Draft) => void;
}) {
  const pickRef = useRef<HTMLInputElement>(null);
  const [written, setWritten] = useState<Written>({ prompts: "", system: "", maxTokens: 512, thinking: false });
  const [writing, setWriting] = useState(false);

  async function readFile(file: File) {
    onError(null);
    if (file.size > MAX_FILE_BYTES) {
      onDraft(null);
      onError(`${file.name} is ${formatBytes(file.size)}; a batch is limited to 256 MiB.`);
      return;
    }
    onDraft(parseJsonl(file.name, file.size, await file.text()));
  }

  return (
    <div className="card drop-zone" data-testid="batch-drop">
      <h2>New batch</h2>
      <p className="muted">
        Write prompts below, or choose (or drop here) a JSONL file: one request per line,{" "}
        <code>{'{"custom_id": "a1", "params": {"model": "svc", "max_tokens": 256, "messages": [...]}}'}</code>. Up to 100,000 requests or 256 MiB. The requests and their
        results are stored on this machine until you delete the batch (results are kept 29 days).
      </p>
      <div className="toolbar">
        <button type="button" data-testid="batch-write" aria-expanded={writing} onClick={() => setWriting((v) => !v)}>
          Write prompts…
        </button>
        <button type="button" data-testid="batch-choose" onClick={() => pickRef.current?.click()}>
          Choose a file…
        </button>
        <input
          ref={pickRef}
          type="file"
          accept=".jsonl,.ndjson,.json,.txt"
          hidden
          data-testid="batch-file"
          onChange={(e) => {
            if (e.target.files?.[0]) void readFile(e.target.files[0]);
            e.target.value = "";
          }}
        />
      </div>
      {writing && (
        <form
          className="batch-writer"
          data-testid="batch-writer"
          onSubmit={(e) => {
            e.preventDefault();
            onError(null);
            onDraft(draftFromPrompts(written));
          }}
        >
          <label className="field">
            Prompts, one per line
            <textarea data-testid="batch-prompts" rows={5} value={written.prompts} onChange={(e) => setWritten({ ...written, prompts: e.target.value })} />
          </label>
          <label className="field">
            System prompt (for every request)
            <input data-testid="batch-system" value={written.system} onChange={(e) => setWritten({ ...written, system: e.target.value })} />
          </label>
          <div className="form-row">
            <label>
              Answer length (tokens){" "}
              <input
                type="number"
                min={1}
                max={200000}
                data-testid="batch-max-tokens"
                value={written.maxTokens}
                onChange={(e) => setWritten({ ...written, maxTokens: Math.min(200000, Math.max(1, Number(e.target.value) || 1)) })}
              />
            </label>
            <label className="checkbox">
              <input type="checkbox" data-testid="batch-thinking" checked={written.thinking} onChange={(e) => setWritten({ ...written, thinking: e.target.checked })} /> Think first
            </label>
            <button type="submit" data-testid="batch-prepare">
              Prepare the requests
            </button>
          </div>
        </form>
      )}
      {draft && (
        <div className="draft" data-testid="batch-draft">
          <p>
            <strong>{draft.file}</strong> <span className="muted">({formatBytes(draft.size)})</span>: {draft.requests.length} request{draft.requests.length === 1 ? "" : "s"}
          </p>
          {draft.problems.length > 0 && (
            <ul className="error" data-testid="batch-draft-problems">
              {draft.problems.map((p) => (
                <li key={p}>{p}</li>
              ))}
            </ul>
          )}
          <div className="toolbar">
            <button className="primary" data-testid="batch-create" disabled={busy || draft.problems.length > 0 || !canCreate} onClick={() => onCreate(draft)}>
              Create batch
            </button>
            <button onClick={() => onDraft(null)}>Discard</button>
          </div>
        </div>
      )}
    </div>
  );
}


