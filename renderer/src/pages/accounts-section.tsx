// The accounts part of the Keys page: the operator creates an account (its temporary password and first key
// are shown once, to hand to the account holder), disables or enables it, and resets its password. Account
// holders then log in to their own console at <base URL>/v1/console.
import { useState } from "react";
import type { AccountView, CreatedAccountView, KeyView, PasswordResetView } from "../../../server/features/console/contract";
import { consoleApi } from "../console-client";
import { copyText, formatTime } from "../format";
import { useWindow } from "../state/window-state";
import { ConfirmInline } from "../components/confirm-inline";
import { DataTable } from "../components/data-table";

function Secret({ value, testId }: { value: string; testId: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <>
      <code className="secret" data-testid={testId}>
        {value}
      </code>{" "}
      <button onClick={() => void copyText(value).then(setCopied)}>{copied ? "Copied" : "Copy"}</button>
    </>
  );
}

function loginState(a: AccountView): string {
  if (!a.canLogIn) return "no console login";
  return a.mustChangePassword ? "temporary password" : "password set";
}

export function AccountsSection({ accounts, keys, onChanged }: { accounts: AccountView[]; keys: KeyView[]; onChanged: () => Promise<void> }) {
  /** The account of the window's own key ('local'). */
  const windowAccount = keys.find((k) => k.windowKey)?.account ?? "local";
  const [name, setName] = useState("");
  const [created, setCreated] = useState<CreatedAccountView | null>(null);
  const [reset, setReset] = useState<PasswordResetView | null>(null);
  const [confirming, setConfirming] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  const consoleUrl = useWindow((s) => (s.info ? `${s.info.baseUrl}/v1/console` : null));

  const act = async (fn: () => Promise<unknown>) => {
    setError(null);
    try {
      await fn();
      await onChanged();
    } catch (err) {
      setError((err as Error).message);
    }
  };

  return (
    <div className="card" data-testid="accounts-section">
      <h2>Accounts</h2>
      <form
        className="form-row"
        onSubmit={(e) => {
          e.preventDefault();
          void act(async () => {
            setReset(null);
            setCreated(await consoleApi.createAccount({ name }));
            setName("");
          });
        }}
      >
        <label>
          New account <input data-testid="account-name" value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. alice" required />
        </label>
        <button type="submit" className="primary" data-testid="account-create">
          Create account
        </button>
      </form>

      {created && (
        <div className="card once inset" data-testid="account-created">
          <p>
            <strong>Hand these to the holder of '{created.account.name}' now.</strong> They are shown once and cannot be shown again.
          </p>
          <table>
            <tbody>
              <tr>
                <td>Temporary password</td>
                <td>
                  <Secret value={created.temporaryPassword} testId="account-temp-password" />
                </td>
              </tr>
              <tr>
                <td>First API key</td>
                <td>
                  <Secret value={created.key.key} testId="account-first-key" />
                </td>
              </tr>
              {consoleUrl && (
                <tr>
                  <td>Console</td>
                  <td>
                    <code data-testid="account-console-url">{consoleUrl}</code>
                  </td>
                </tr>
              )}
            </tbody>
          </table>
          <p className="muted">The first login with the temporary password asks for a new password. In the console the holder manages their own keys.</p>
          <button data-testid="account-created-done" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}

      {reset && (
        <div className="card once inset" data-testid="account-reset">
          <p>
            <strong>New temporary password for '{reset.account.name}'.</strong> It is shown once; the next login must change it. Their console sessions have ended; their keys still
            work.
          </p>
          <Secret value={reset.temporaryPassword} testId="account-reset-password" />{" "}
          <button data-testid="account-reset-done" onClick={() => setReset(null)}>
            Done
          </button>
        </div>
      )}

      {error && (
        <p className="error" data-testid="accounts-error">
          {error}
        </p>
      )}

      <DataTable
        testId="accounts-table"
        rows={accounts}
        rowKey={(a) => a.id}
        rowAttributes={(a) => ({ "data-testid": "account-row", "data-account": a.name, "data-status": a.status })}
        columns={[
          { key: "name", header: "Account", cell: (a) => a.name },
          { key: "status", header: "Status", cell: (a) => <span className={a.status === "disabled" ? "error" : undefined}>{a.status}</span> },
          { key: "console", header: "Console", narrow: "hide", cell: (a) => loginState(a) },
          {
            key: "keys",
            header: "Active keys",
            cell: (a) => {
              const own = keys.filter((k) => k.account === a.name && k.revokedAt === null);
              return own.length === 0 ? (
                <span className="muted">none</span>
              ) : (
                own.map((k) => (
                  <div key={k.id}>
                    <code>{k.hint}</code> <span className="muted small">{k.name ?? "unnamed"}</span>
                  </div>
                ))
              );
            },
          },
          { key: "login", header: "Last login", narrow: "hide", cell: (a) => formatTime(a.lastLoginAt) },
          { key: "created", header: "Created", narrow: "hide", cell: (a) => formatTime(a.createdAt) },
          {
            key: "actions",
            header: { hidden: "Actions" },
            kind: "actions",
            cell: (a) => (
              <>
                {a.status === "disabled" ? (
                  <button data-testid="account-enable" onClick={() => void act(() => consoleApi.enableAccount(a.name))}>
                    Enable
                  </button>
                ) : a.name === windowAccount ? (
                  // Disabling it would stop the window's own pages: not offered.
                  <span className="muted small" data-testid="account-window-note">
                    Holds the window's key
                  </span>
                ) : confirming === `disable:${a.name}` ? (
                  <ConfirmInline
                    confirmLabel="Disable now"
                    testId="account-disable-confirm"
                    onConfirm={() =>
                      void act(async () => {
                        setConfirming(null);
                        await consoleApi.disableAccount(a.name);
                      })
                    }
                    onCancel={() => setConfirming(null)}
                  />
                ) : (
                  <button data-testid="account-disable" onClick={() => setConfirming(`disable:${a.name}`)}>
                    Disable
                  </button>
                )}{" "}
                <button
                  data-testid="account-reset-password-button"
                  onClick={() =>
                    void act(async () => {
                      setCreated(null);
                      setReset(await consoleApi.resetAccountPassword(a.name));
                    })
                  }
                >
                  {a.canLogIn ? "Reset password" : "Give console login"}
                </button>
              </>
            ),
          },
        ]}
      />
      <p className="muted">
        A disabled account's keys are refused at once. Account holders log in at {consoleUrl ? <code>{consoleUrl}</code> : "/v1/console"} to manage their own keys and see their
        usage.
      </p>
    </div>
  );
}
