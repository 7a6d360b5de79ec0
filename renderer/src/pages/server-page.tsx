// The developer tab: the server's running state and counters, base URLs, a key for the examples,
// copy-paste snippets (curl, JavaScript, Python), the port and LAN settings, upstream engines, warm start, and
// the full log.
import { useEffect, useRef, useState } from "react";
import type { CreatedKeyView, LogLine } from "../../../server/features/console/contract";
import { consoleApi } from "../console-client";
import { copyText } from "../format";
import { modelStateLabel, speculationLabel } from "../labels";
import { buildSnippets, type Snippet } from "../snippets";
import { applyToWindow, useWindow } from "../state/window-state";
import { UpstreamsSection } from "./upstreams-section";
import { WarmStartSection } from "./warm-start-section";

function CopyButton({ text, testId, label = "Copy" }: { text: string; testId?: string; label?: string }) {
  const [done, setDone] = useState(false);
  return (
    <button data-testid={testId} onClick={() => void copyText(text).then(setDone)} aria-label={done ? "Copied" : label}>
      {done ? "Copied" : "Copy"}
    </button>
  );
}

function uptime(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

const LANGUAGES: Array<{ id: Snippet["language"]; label: string }> = [
  { id: "bash", label: "curl" },
  { id: "javascript", label: "JavaScript" },
  { id: "python", label: "Python" },
];

export function ServerPage() {
  const info = useWindow((s) => s.info);
  const status = useWindow((s) => s.status);
  const logSeq = useWindow((s) => s.logSeq);
  const onInfo = (next: NonNullable<typeof info>) => applyToWindow({ info: next });
  const [lines, setLines] = useState<LogLine[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [key, setKey] = useState<CreatedKeyView | null>(null);
  const [language, setLanguage] = useState<Snippet["language"]>("bash");
  const [port, setPort] = useState("");
  const [portSaved, setPortSaved] = useState<string | null>(null);
  const logRef = useRef<HTMLPreElement>(null);
  const followLog = useRef(true);

  // New lines are read when the pushed log position moves past the last one shown.
  const lastShown = lines.at(-1)?.seq ?? 0;
  useEffect(() => {
    if (logSeq <= lastShown && lastShown !== 0) return;
    let live = true;
    consoleApi.logs(lastShown).then(
      (fresh) => live && fresh.length > 0 && setLines((all) => [...all, ...fresh.filter((l) => l.seq > (all.at(-1)?.seq ?? 0))].slice(-1000)),
      () => undefined,
    );
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [logSeq]);

  useEffect(() => {
    if (info) setPort(info.portSetting === null ? "" : String(info.portSetting));
  }, [info?.portSetting]); // eslint-disable-line react-hooks/exhaustive-deps

  useEffect(() => {
    const el = logRef.current;
    if (el && followLog.current) el.scrollTop = el.scrollHeight;
  }, [lines]);

  if (!info) return <section className="page">Waiting for the server…</section>;
  const snippets = buildSnippets(info.openaiBaseUrl, info.anthropicBaseUrl);
  const usage = status?.usage;
  const speculation = speculationLabel(status?.speculation);
  const logText = lines.map((l) => `${new Date(l.at).toLocaleTimeString()} ${l.level.padEnd(5)} ${l.message}`).join("\n");

  return (
    <section className="page" data-testid="server-page" aria-labelledby="server-title">
      <header className="page-header">
        <h1 id="server-title">Server</h1>
      </header>
      {info.portNote && <p className="notice">{info.portNote}</p>}

      <div className="card" data-testid="server-state">
        <h2>Running</h2>
        <div className="stats-grid">
          <div>
            <span className="label">Listening on</span>
            <span>
              <code>{info.baseUrl}</code> {info.lanExposed ? "(all network interfaces)" : "(this computer only)"}
            </span>
          </div>
          <div>
            <span className="label">Model</span>
            <span data-testid="server-model">{status ? `${modelStateLabel(status.model.state)}${status.model.name ? `: ${status.model.name}` : ""}` : "…"}</span>
          </div>
          {speculation && (
            <div>
              <span className="label">Speculative decoding</span>
              <span data-testid="server-speculation">{speculation}</span>
            </div>
          )}
          <div>
            <span className="label">Up for</span>
            <span>{uptime(Date.now() - info.startedAt)}</span>
          </div>
          <div>
            <span className="label">Now</span>
            <span>
              {status?.requests.active ?? 0} answering, {status?.requests.queued ?? 0} waiting
            </span>
          </div>
          <div>
            <span className="label">API requests</span>
            <span data-testid="counter-requests">
              {usage?.requests ?? 0}
              {usage?.errors ? ` (${usage.errors} with errors)` : ""}
            </span>
          </div>
          <div>
            <span className="label">Tokens in</span>
            <span data-testid="counter-prompt">
              {usage?.promptTokens ?? 0}
              {usage?.cachedTokens ? ` (${usage.cachedTokens} from cache)` : ""}
            </span>
          </div>
          <div>
            <span className="label">Tokens out</span>
            <span data-testid="counter-completion">
              {usage?.completionTokens ?? 0}
              {usage?.reasoningTokens ? ` (${usage.reasoningTokens} thinking)` : ""}
            </span>
          </div>
        </div>
      </div>

      <div className="card">
        <h2>Base URLs</h2>
        <table>
          <tbody>
            <tr>
              <th scope="row">OpenAI clients (Chat Completions, Responses)</th>
              <td>
                <code data-testid="openai-base-url">{info.openaiBaseUrl}</code> <CopyButton text={info.openaiBaseUrl} label="Copy the OpenAI base URL" />
              </td>
            </tr>
            <tr>
              <th scope="row">Anthropic clients (Messages)</th>
              <td>
                <code data-testid="anthropic-base-url">{info.anthropicBaseUrl}</code> <CopyButton text={info.anthropicBaseUrl} label="Copy the Anthropic base URL" />
              </td>
            </tr>
          </tbody>
        </table>
        <p className="muted">
          Model name: <code>svc</code>. Every request needs a key: set it as <code>SVC_API_KEY</code> for the examples below. Version {info.version}; data in{" "}
          {info.dataDir}.
        </p>
        {key ? (
          <div className="card once" data-testid="server-key">
            <p>
              <strong>Copy this key now.</strong> It is shown once.
            </p>
            <code className="secret" data-testid="server-key-export">{`export SVC_API_KEY=${key.key}`}</code> <CopyButton text={`export SVC_API_KEY=${key.key}`} />{" "}
            <button onClick={() => setKey(null)}>Done</button>
          </div>
        ) : (
          <button
            className="primary"
            data-testid="server-create-key"
            onClick={() => consoleApi.createKey({ name: "Examples" }).then(setKey, (err: Error) => setError(err.message))}
          >
            Create a key for these examples
          </button>
        )}
      </div>

      <div className="card">
        <div className="snippet-head">
          <h2>Examples</h2>
          <div className="tabs" role="tablist" aria-label="Language">
            {LANGUAGES.map((l) => (
              <button
                key={l.id}
                role="tab"
                id={`tab-${l.id}`}
                aria-selected={language === l.id}
                aria-controls="snippet-panel"
                data-testid={`snippet-tab-${l.id}`}
                className={language === l.id ? "active" : ""}
                onClick={() => setLanguage(l.id)}
              >
                {l.label}
              </button>
            ))}
          </div>
        </div>
        <div id="snippet-panel" role="tabpanel" aria-labelledby={`tab-${language}`}>
          {snippets
            .filter((s) => s.language === language)
            .map((s) => (
              <div className="snippet" key={s.id}>
                <h3>
                  {s.title} <CopyButton text={s.code} testId={`snippet-copy-${s.id}`} label={`Copy ${s.title}`} />
                </h3>
                <pre data-testid={`snippet-${s.id}`} data-language={s.language} tabIndex={0} aria-label={s.title}>
                  {s.code}
                </pre>
                <p className="muted small">{s.run}</p>
              </div>
            ))}
        </div>
      </div>

      <div className="card">
        <h2>Network</h2>
        <label className="checkbox">
          <input
            type="checkbox"
            data-testid="lan-switch"
            checked={info.lanExposure}
            onChange={(e) => {
              setError(null);
              consoleApi.setLanExposure(e.target.checked).then(onInfo, (err: Error) => setError(err.message));
            }}
          />{" "}
          Let other machines on my network use this server
        </label>
        <p className="muted" data-testid="lan-state">
          {info.lanExposed ? "Now listening on all network interfaces." : "Now listening on this machine only."}
          {info.lanExposure !== info.lanExposed ? " The change applies when the app restarts." : ""}
          {info.lanExposure ? " Anyone who can reach this machine and holds a key can use the model." : ""}
        </p>
        <form
          className="form-row"
          onSubmit={(e) => {
            e.preventDefault();
            setError(null);
            const value = port.trim() === "" ? null : Number(port);
            consoleApi.setPort(value).then(
              (next) => {
                onInfo(next);
                setPortSaved(`Saved: port ${next.portSetting ?? "8787 (the default)"} from the next start.`);
              },
              (err: Error) => setError(err.message),
            );
          }}
        >
          <label htmlFor="port-setting">Port</label>
          <input
            id="port-setting"
            data-testid="port-setting"
            inputMode="numeric"
            placeholder="8787"
            value={port}
            disabled={info.portFromEnv}
            onChange={(e) => setPort(e.target.value)}
          />
          <button type="submit" data-testid="port-save" disabled={info.portFromEnv}>
            Save
          </button>
          <span className="muted small" data-testid="port-state">
            {info.portFromEnv
              ? `The app was started with a fixed port (${info.port}) from its environment, so this setting waits until it is started without one.`
              : (portSaved ?? `Now on port ${info.port}. A new port applies when the app restarts; clients then need the new base URL.`)}
          </span>
        </form>
        {error && (
          <p className="error" role="alert">
            {error}
          </p>
        )}
      </div>

      <UpstreamsSection />

      <WarmStartSection />

      <div className="card">
        <div className="snippet-head">
          <h2>Log</h2>
          <CopyButton text={logText} label="Copy the log" />
        </div>
        <pre
          className="log"
          data-testid="server-log"
          ref={logRef}
          tabIndex={0}
          role="log"
          aria-label="Server log"
          onScroll={(e) => {
            const el = e.currentTarget;
            followLog.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
          }}
        >
          {lines.map((l) => (
            <span key={l.seq} className={`log-line ${l.level}`}>
              {`${new Date(l.at).toLocaleTimeString()} ${l.level.padEnd(5)} ${l.message}\n`}
            </span>
          ))}
        </pre>
      </div>
    </section>
  );
}
