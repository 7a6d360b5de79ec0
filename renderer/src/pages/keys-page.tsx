// API keys and accounts. A new key is shown once, here, with a copy button; afterwards only its hint is known.
import { useCallback, useEffect, useState } from "react";
import type { AccountView, CreatedKeyView, KeyView } from "../../../server/features/console/contract";
import { consoleApi } from "../console-client";
import { copyText, formatTime } from "../format";
import { AccountsSection } from "./accounts-section";
import { ConfirmInline } from "../components/confirm-inline";
import { DataTable } from "../components/data-table";

export function KeysPage() {
  const [keys, setKeys] = useState<KeyView[]>([]);
  const [accounts, setAccounts] = useState<AccountView[]>([]);
  const [name, setName] = useState("");
  const [account, setAccount] = useState("");
  const [trace, setTrace] = useState(false);
  const [created, setCreated] = useState<CreatedKeyView | null>(null);
  const [copied, setCopied] = useState(false);
  const [confirming, setConfirming] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [showRevoked, setShowRevoked] = useState(false);

  const refresh = useCallback(async () => {
    // The window's own key exists before this page lists it (so it is marked, never offered for revoking);
    // while its account is disabled there is none, and the page still lists what is there (Enable fixes it).
    await consoleApi.windowKey().catch(() => undefined);
    const [k, a] = await Promise.all([consoleApi.listKeys(), consoleApi.listAccounts()]);
    setKeys(k);
    setAccounts(a);
  }, []);

  useEffect(() => {
    refresh().catch((err: Error) => setError(err.message));
  }, [refresh]);

  const act = async (fn: () => Promise<unknown>) => {
    setError(null);
    try {
      await fn();
      await refresh();
    } catch (err) {
      setError((err as Error).message);
    }
  };

  const shown = keys.filter((k) => showRevoked || k.revokedAt === null);

  return (
    <section className="page" data-testid="keys-page" aria-labelledby="keys-title">
      <header className="page-header">
        <h1 id="keys-title">Keys and accounts</h1>
      </header>

      <form
        className="card form-row"
        onSubmit={(e) => {
          e.preventDefault();
          void act(async () => {
            setCopied(false);
            setCreated(await consoleApi.createKey({ name: name || undefined, account: account || undefined, reasoningTrace: trace }));
            setName("");
          });
        }}
      >
        <h2>New key</h2>
        <label>
          Name <input data-testid="key-name" value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. my IDE" />
        </label>
        <label>
          Account{" "}
          <input data-testid="key-account" value={account} onChange={(e) => setAccount(e.target.value)} placeholder="local" list="account-names" />
          <datalist id="account-names">
            {accounts.map((a) => (
              <option key={a.id} value={a.name} />
            ))}
          </datalist>
        </label>
        <label className="checkbox">
          <input type="checkbox" data-testid="key-trace" checked={trace} onChange={(e) => setTrace(e.target.checked)} /> Reasoning trace
        </label>
        <button type="submit" className="primary" data-testid="key-create">
          Create key
        </button>
      </form>

      {created && (
        <div className="card once" data-testid="key-created">
          <p>
            <strong>Copy this key now.</strong> It is shown once and cannot be shown again.
          </p>
          <code className="secret" data-testid="key-value">
            {created.key}
          </code>{" "}
          <button data-testid="key-copy" onClick={() => void copyText(created.key).then(setCopied)}>
            {copied ? "Copied" : "Copy"}
          </button>{" "}
          <button data-testid="key-done" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}

      {error && (
        <p className="error" data-testid="keys-error">
          {error}
        </p>
      )}

      <div className="card">
        <h2>
          Keys{" "}
          <label className="checkbox small">
            <input type="checkbox" checked={showRevoked} onChange={(e) => setShowRevoked(e.target.checked)} /> show revoked
          </label>
        </h2>
        <DataTable
          testId="keys-table"
          rows={shown}
          rowKey={(k) => k.id}
          rowAttributes={(k) => ({ "data-testid": "key-row", "data-key-id": k.id, "data-revoked": String(k.revokedAt !== null) })}
          columns={[
            {
              key: "name",
              header: "Name",
              cell: (k) => (
                <>
                  {k.name ?? <em>unnamed</em>} {k.windowKey && <span className="badge alt">this window</span>}
                </>
              ),
            },
            { key: "key", header: "Key", cell: (k) => <code>{k.hint}</code> },
            { key: "account", header: "Account", cell: (k) => k.account },
            {
              key: "trace",
              header: "Reasoning trace",
              cell: (k) => (
                <input
                  type="checkbox"
                  aria-label="Reasoning trace"
                  checked={k.reasoningTrace}
                  disabled={k.revokedAt !== null}
                  onChange={(e) => void act(() => consoleApi.setKeyTrace(k.id, e.target.checked))}
                />
              ),
            },
            { key: "created", header: "Created", narrow: "hide", cell: (k) => formatTime(k.createdAt) },
            { key: "used", header: "Last used", narrow: "hide", cell: (k) => formatTime(k.lastUsedAt) },
            {
              key: "actions",
              header: { hidden: "Actions" },
              kind: "actions",
              cell: (k) =>
                k.revokedAt !== null ? (
                  <span className="muted">revoked {formatTime(k.revokedAt)}</span>
                ) : k.windowKey ? (
                  <span className="muted small wrap" data-testid="key-window-note">
                    Used by the Chat page; replaced when the app restarts.
                  </span>
                ) : confirming === k.id ? (
                  <ConfirmInline
                    confirmLabel="Revoke now"
                    testId="key-revoke-confirm"
                    onConfirm={() =>
                      void act(async () => {
                        setConfirming(null);
                        await consoleApi.revokeKey(k.id);
                      })
                    }
                    onCancel={() => setConfirming(null)}
                  />
                ) : (
                  <button data-testid="key-revoke" onClick={() => setConfirming(k.id)}>
                    Revoke
                  </button>
                ),
            },
          ]}
        />
      </div>

      <AccountsSection accounts={accounts} keys={keys} onChanged={refresh} />
    </section>
  );
}
