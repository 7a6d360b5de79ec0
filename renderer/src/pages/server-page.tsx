// How to reach the server: base URLs, copy-paste snippets for the official clients and curl, the LAN switch
// and the server's log.
import { useState } from "react";
import type { LogLine, ServerInfo } from "../../../server/features/console/contract";
import { consoleApi } from "../console-client";
import { copyText } from "../format";
import { buildSnippets } from "../snippets";
import { usePoll } from "../use-poll";

function CopyButton({ text, testId }: { text: string; testId?: string }) {
  const [done, setDone] = useState(false);
  return (
    <button data-testid={testId} onClick={() => void copyText(text).then(setDone)}>
      {done ? "Copied" : "Copy"}
    </button>
  );
}

export function ServerPage({ info, onInfo }: { info: ServerInfo | null; onInfo: (info: ServerInfo) => void }) {
  const [lines, setLines] = useState<LogLine[]>([]);
  const [error, setError] = useState<string | null>(null);

  usePoll(async () => {
    const after = lines.at(-1)?.seq ?? 0;
    const fresh = await consoleApi.logs(after);
    if (fresh.length) setLines((all) => [...all, ...fresh].slice(-500));
  }, 1000);

  if (!info) return <section className="page">Waiting for the server…</section>;
  const snippets = buildSnippets(info.openaiBaseUrl, info.anthropicBaseUrl);

  return (
    <section className="page" data-testid="server-page">
      <header className="page-header">
        <h1>Server</h1>
      </header>
      {info.portNote && <p className="notice">{info.portNote}</p>}
      <div className="card">
        <h2>Base URLs</h2>
        <table>
          <tbody>
            <tr>
              <td>OpenAI clients (Chat Completions, Responses)</td>
              <td>
                <code data-testid="openai-base-url">{info.openaiBaseUrl}</code> <CopyButton text={info.openaiBaseUrl} />
              </td>
            </tr>
            <tr>
              <td>Anthropic clients (Messages)</td>
              <td>
                <code data-testid="anthropic-base-url">{info.anthropicBaseUrl}</code> <CopyButton text={info.anthropicBaseUrl} />
              </td>
            </tr>
          </tbody>
        </table>
        <p className="muted">
          Every request needs a key from the Keys page: set it as <code>SVC_API_KEY</code> for the examples below. Model name: <code>svc</code>. Version{" "}
          {info.version}; data in {info.dataDir}.
        </p>
      </div>

      <div className="card">
        <h2>Examples</h2>
        {snippets.map((s) => (
          <div className="snippet" key={s.id}>
            <h3>
              {s.title} <CopyButton text={s.code} testId={`snippet-copy-${s.id}`} />
            </h3>
            <pre data-testid={`snippet-${s.id}`} data-language={s.language}>
              {s.code}
            </pre>
            <p className="muted">{s.run}</p>
          </div>
        ))}
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
        {error && <p className="error">{error}</p>}
      </div>

      <div className="card">
        <h2>Log</h2>
        <pre className="log" data-testid="server-log">
          {lines.map((l) => `${new Date(l.at).toLocaleTimeString()} ${l.level.padEnd(5)} ${l.message}`).join("\n")}
        </pre>
      </div>
    </section>
  );
}
