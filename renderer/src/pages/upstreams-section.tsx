// Upstream engines on the Server page (docs/scale-out.md): llama-server or vLLM servers the app generates on
// instead of its built-in engine. The form keeps them as a setting for the next start (addresses, one key,
// the affinity), as the port is kept; while the server generates on them, the table shows each one's state
// as /health reports it (pushed with the status topic: a server drained or back shows at once).
import { useEffect, useId, useState, type KeyboardEvent } from "react";
import type { StatusView, UpstreamsSettingView } from "../../../server/features/console/contract";
import { checkUpstreamUrl, upstreamUrlProblemText } from "../../../server/core/upstream-url";
import { DataTable, type Column } from "../components/data-table";
import { consoleApi } from "../console-client";
import { applyToWindow, useWindow } from "../state/window-state";

type Replica = NonNullable<StatusView["model"]["upstreams"]>[number];

/** The model file a server names: its file name (a path on that server says nothing here). */
function fileName(path: string): string {
  return path.split(/[\\/]/).pop() || path;
}

const COLUMNS: Array<Column<Replica>> = [
  { key: "url", header: "Server", cell: (r) => <code className="wrap">{r.url}</code> },
  {
    key: "state",
    header: "State",
    testId: "upstream-replica-state",
    cell: (r) =>
      r.healthy ? (
        <span className="ok">Serving</span>
      ) : (
        <>
          <span className="error">Down</span>
          {r.error && <span className="muted small block">{sentence(r.error)}</span>}
        </>
      ),
  },
  { key: "slots", header: "Answers at once", kind: "num", testId: "upstream-replica-slots", cell: (r) => r.slots.toLocaleString("en-US") },
  { key: "context", header: "Context per answer", kind: "num", testId: "upstream-replica-context", cell: (r) => (r.contextSize > 0 ? r.contextSize.toLocaleString("en-US") : "…") },
  { key: "model", header: "Model", narrow: "hide", testId: "upstream-replica-model", cell: (r) => (r.model ? <code className="wrap">{fileName(r.model)}</code> : "…") },
];

/** The server's reason as a sentence of its own ("its /health did not answer." begins with a capital). */
function sentence(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function servers(n: number): string {
  return n === 1 ? "1 upstream server" : `${n} upstream servers`;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Whether the running server already generates the way the setting says (else it applies at the restart). */
function applied(setting: UpstreamsSettingView): boolean {
  const running = setting.running ?? [];
  if (!sameList(setting.urls, running)) return false;
  return running.length === 0 || setting.affinity === setting.runningAffinity;
}

function keyPlaceholder(setting: UpstreamsSettingView): string {
  if (setting.keys === "one") return setting.keyHint ? `Saved (ends in …${setting.keyHint}): type a new one to replace it` : "Saved: type a new one to replace it";
  if (setting.keys === "each") return "Each server has its own: type one to use it for all";
  return "None";
}

export function UpstreamsSection() {
  const setting = useWindow((s) => s.info?.upstreams);
  const replicas = useWindow((s) => s.status?.model.upstreams);
  const model = useWindow((s) => s.status?.model);
  const [urls, setUrls] = useState<string[]>([]);
  const [adding, setAdding] = useState("");
  const [addError, setAddError] = useState<string | null>(null);
  const [key, setKey] = useState("");
  const [removeKey, setRemoveKey] = useState(false);
  const [affinity, setAffinity] = useState(true);
  const [busy, setBusy] = useState(false);
  const [savedNote, setSavedNote] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const ids = useId();

  // The draft follows the saved setting (at first, and after a save).
  const savedUrls = JSON.stringify(setting?.urls ?? []);
  useEffect(() => {
    if (!setting) return;
    setUrls(setting.urls);
    setAffinity(setting.affinity);
  }, [savedUrls, setting?.affinity]); // eslint-disable-line react-hooks/exhaustive-deps

  if (!setting) return null;
  const locked = setting.fromStartup;

  /** Adds what the address field holds; false (with why, under the field) when it is not an address to add. */
  const add = (): string[] | null => {
    const checked = checkUpstreamUrl(adding);
    if ("problem" in checked) {
      setAddError(adding.trim() === "" ? "Type an address first, like http://192.168.1.20:8080." : upstreamUrlProblemText(checked.problem));
      return null;
    }
    if (urls.some((u) => u.toLowerCase() === checked.url.toLowerCase())) {
      setAddError(`${checked.url} is in the list already.`);
      return null;
    }
    const next = [...urls, checked.url];
    setUrls(next);
    setAdding("");
    setAddError(null);
    setSavedNote(null);
    return next;
  };

  const onAddKey = (e: KeyboardEvent<HTMLInputElement>) => {
    // Enter in the address field adds it (rather than saving the form).
    if (e.key === "Enter") {
      e.preventDefault();
      add();
    }
  };

  const changed = !sameList(urls, setting.urls) || key !== "" || removeKey || affinity !== setting.affinity || adding.trim() !== "";

  const save = () => {
    setError(null);
    const list = adding.trim() === "" ? urls : add();
    if (list === null) return;
    setBusy(true);
    consoleApi
      .setUpstreams({ urls: list, affinity, ...(removeKey ? { key: null } : key !== "" ? { key } : {}) })
      .then(
        (next) => {
          applyToWindow({ info: next });
          setKey("");
          setRemoveKey(false);
          setSavedNote(
            list.length === 0
              ? "Saved: from the next start the app generates on this computer."
              : `Saved: from the next start the app generates on ${list.length === 1 ? "this upstream server" : `these ${list.length} upstream servers`}.`,
          );
        },
        (err: Error) => setError(err.message),
      )
      .finally(() => setBusy(false));
  };

  const serving = replicas?.filter((r) => r.healthy).length ?? 0;
  const now = !setting.running
    ? "Now generating on this computer (the built-in engine)."
    : replicas
      ? serving === replicas.length
        ? `Now generating on ${servers(replicas.length)}.`
        : serving > 0
          ? `Now generating on ${serving} of ${servers(replicas.length)}; the others are down and checked every second.`
          : replicas.length === 1
            ? "The upstream server is down: requests are refused until it is back (it is checked every second)."
            : `All ${servers(replicas.length)} are down: requests are refused until one is back (they are checked every second).`
      : model?.state === "loading"
        ? `Starting on ${servers(setting.running.length)}…`
        : model?.error
          ? `Set to generate on ${servers(setting.running.length)}, but not generating: ${model.error}`
          : `Set to generate on ${servers(setting.running.length)}, but no model is loaded: pick the model file they serve on the Model page.`;
  const state = locked
    ? null
    : (savedNote ?? (applied(setting) ? null : "Saved for the next start: it applies when the app restarts."));

  return (
    <div className="card" data-testid="upstreams">
      <h2>Upstream engines</h2>
      <p className="muted">
        Generate on llama-server or vLLM servers your team runs, instead of on this computer; keys, files, batches and the audit log stay here. The model
        loaded here must be the one they serve: the app reads only its tokenizer and chat template.
      </p>
      <p data-testid="upstreams-now">{now}</p>
      {replicas && (
        <DataTable
          testId="upstream-replicas"
          rows={replicas}
          columns={COLUMNS}
          rowKey={(r) => r.url}
          rowAttributes={(r) => ({ "data-testid": "upstream-replica", "data-url": r.url, "data-healthy": String(r.healthy) })}
        />
      )}

      {locked && (
        <p className="notice small" data-testid="upstreams-locked">
          The app was started with upstream servers from its environment, so this setting waits until it is started without them.
        </p>
      )}

      <form
        className="upstreams-form"
        aria-labelledby={`${ids}-form`}
        onSubmit={(e) => {
          e.preventDefault();
          save();
        }}
      >
        <h3 id={`${ids}-form`}>For the next start</h3>
        <ul className="upstream-list" aria-label="Upstream servers" data-testid="upstream-list">
          {urls.map((url) => (
            <li key={url} data-testid="upstream-url-item" data-url={url}>
              <code>{url}</code>
              <button
                type="button"
                className="link"
                aria-label={`Remove ${url}`}
                data-testid="upstream-remove"
                disabled={locked || busy}
                onClick={() => {
                  setUrls(urls.filter((u) => u !== url));
                  setSavedNote(null);
                }}
              >
                Remove
              </button>
            </li>
          ))}
          {urls.length === 0 && <li className="muted">None: the app generates on this computer.</li>}
        </ul>
        <div className="form-row">
          <label htmlFor={`${ids}-url`}>Address</label>
          <input
            id={`${ids}-url`}
            className="wide"
            type="url"
            data-testid="upstream-url"
            placeholder="http://192.168.1.20:8080"
            spellCheck={false}
            autoComplete="off"
            value={adding}
            disabled={locked || busy}
            aria-invalid={addError ? true : undefined}
            aria-describedby={addError ? `${ids}-url-error` : undefined}
            onChange={(e) => {
              setAdding(e.target.value);
              setAddError(null);
            }}
            onKeyDown={onAddKey}
          />
          <button type="button" data-testid="upstream-add" disabled={locked || busy} onClick={() => add()}>
            Add
          </button>
        </div>
        {addError && (
          <p className="error small" id={`${ids}-url-error`} data-testid="upstream-url-error" role="alert">
            {addError}
          </p>
        )}
        <div className="form-row">
          <label htmlFor={`${ids}-key`}>Key</label>
          <input
            id={`${ids}-key`}
            className="wide"
            type="password"
            data-testid="upstream-key"
            autoComplete="new-password"
            spellCheck={false}
            placeholder={keyPlaceholder(setting)}
            value={key}
            disabled={locked || busy || removeKey}
            aria-describedby={`${ids}-key-hint`}
            onChange={(e) => setKey(e.target.value)}
          />
          {setting.keys !== "none" && (
            <label className="checkbox">
              <input
                type="checkbox"
                data-testid="upstream-key-remove"
                checked={removeKey}
                disabled={locked || busy}
                onChange={(e) => {
                  setRemoveKey(e.target.checked);
                  setKey("");
                }}
              />{" "}
              Remove the saved key
            </label>
          )}
        </div>
        <p className="muted small" id={`${ids}-key-hint`}>
          The API key the servers were started with, sent to every one of them. Optional; never shown again once saved.
        </p>
        <label className="checkbox">
          <input
            type="checkbox"
            data-testid="upstream-affinity"
            checked={affinity}
            disabled={locked || setting.affinityFromStartup || busy}
            aria-describedby={`${ids}-affinity-hint`}
            onChange={(e) => setAffinity(e.target.checked)}
          />{" "}
          Send each conversation back to the server that read it before
        </label>
        <p className="muted small" id={`${ids}-affinity-hint`}>
          {setting.affinityFromStartup
            ? `The app was started with this set ${setting.runningAffinity ? "on" : "off"} from its environment, so this choice waits until it is started without that.`
            : "On: a conversation's next turn goes to the server holding its start, which answers sooner. Off: the servers take turns."}
        </p>
        <div className="toolbar">
          <button type="submit" className="primary" data-testid="upstreams-save" disabled={locked || busy || !changed}>
            Save
          </button>
          <span className="muted small" data-testid="upstreams-state" aria-live="polite">
            {state}
          </span>
        </div>
      </form>
      {error && (
        <p className="error" role="alert" data-testid="upstreams-error">
          {error}
        </p>
      )}
    </div>
  );
}
