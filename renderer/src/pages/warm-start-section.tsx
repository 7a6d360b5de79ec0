// Warm start on the Server page: the switch (off by default; turning it on or off loads the model again with
// it), the prompt prefixes saved so far, and Clear. What it shows comes pushed (the warmStart topic); the
// page reads it once more when it opens, for prefixes cleared from outside the window meanwhile.
import { useEffect, useState } from "react";
import type { WarmPrefixView, WarmStartView } from "../../../server/features/console/contract";
import { ConfirmInline } from "../components/confirm-inline";
import { DataTable, type Column } from "../components/data-table";
import { consoleApi } from "../console-client";
import { formatBytes } from "../format";
import { applyToWindow, useWindow } from "../state/window-state";

const COLUMNS: Array<Column<WarmPrefixView>> = [
  { key: "id", header: "Saved prompt", cell: (p) => <code>{p.id}</code> },
  { key: "tokens", header: "Tokens", kind: "num", testId: "warm-prefix-tokens", cell: (p) => p.tokens.toLocaleString("en-US") },
  { key: "size", header: "Size", kind: "num", cell: (p) => formatBytes(p.bytes) },
  { key: "used", header: "Last used", kind: "nowrap", cell: (p) => new Date(p.lastUsed).toLocaleString() },
];

/** The limit as it is set: a whole number of gigabytes (2^30 bytes each). */
function gigabytes(bytes: number): string {
  return `${Math.round((bytes / 2 ** 30) * 10) / 10} GB`;
}

function stateLine(warm: WarmStartView, modelState: string | undefined, pending: boolean | null): string {
  if (pending !== null) return `Loading the model again with warm start ${pending ? "on" : "off"}…`;
  if (!warm.enabled) return warm.prefixes.length > 0 ? "Off: nothing more is saved. What was saved before stays until you clear it." : "Off: nothing is saved.";
  if (warm.active) return `On: system prompts of ${warm.minTokens.toLocaleString("en-US")} tokens or more are saved the first time they are read.`;
  return modelState === "loading" ? "On once the model has loaded." : "On from the next time a model loads.";
}

export function WarmStartSection() {
  const warm = useWindow((s) => s.warmStart);
  const modelState = useWindow((s) => s.status?.model.state);
  const [pending, setPending] = useState<boolean | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    consoleApi.warmStart().then((next) => applyToWindow({ warmStart: next }), () => undefined);
  }, []);

  if (!warm) return null;
  const total = warm.prefixes.reduce((sum, p) => sum + p.bytes, 0);

  const toggle = (enabled: boolean) => {
    setError(null);
    setPending(enabled);
    consoleApi
      .setWarmStart(enabled)
      .then((next) => applyToWindow({ warmStart: next }), (err: Error) => setError(err.message))
      .finally(() => setPending(null));
  };

  const clear = () => {
    setError(null);
    setBusy(true);
    consoleApi
      .clearWarmPrefixes()
      .then((next) => applyToWindow({ warmStart: next }), (err: Error) => setError(err.message))
      .finally(() => {
        setBusy(false);
        setConfirming(false);
      });
  };

  return (
    <div className="card" data-testid="warm-start">
      <h2>Warm start</h2>
      <label className="checkbox">
        <input
          type="checkbox"
          data-testid="warm-start-switch"
          checked={pending ?? warm.enabled}
          disabled={warm.forced || pending !== null}
          onChange={(e) => toggle(e.target.checked)}
        />{" "}
        Keep long system prompts ready across restarts
      </label>
      <p className="muted">
        When on, the model keeps its reading of long system prompts and tool lists (the part before the first message, never the messages or answers) on this
        computer, so the first answer after the app restarts comes sooner.
      </p>
      <p className="muted small" data-testid="warm-start-state" aria-live="polite">
        {stateLine(warm, modelState, pending)}
      </p>
      {warm.forced && (
        <p className="notice small" data-testid="warm-start-forced">
          Warm start was turned {warm.enabled ? "on" : "off"} when the app was started, so this switch does not apply until the app is started without that.
        </p>
      )}

      <h3>Saved prompts</h3>
      <DataTable
        testId="warm-prefixes"
        rows={warm.prefixes}
        columns={COLUMNS}
        rowKey={(p) => p.id}
        rowAttributes={(p) => ({ "data-testid": "warm-prefix", "data-tokens": String(p.tokens) })}
        empty={warm.enabled ? "Nothing saved yet: a long system prompt is saved the first time the model reads it." : "Nothing saved."}
      />
      <div className="toolbar">
        {confirming ? (
          <ConfirmInline
            question={`Delete the ${warm.prefixes.length === 1 ? "saved prompt" : `${warm.prefixes.length} saved prompts`}?`}
            confirmLabel="Delete"
            cancelLabel="Keep"
            testId="warm-clear-confirm"
            busy={busy}
            onConfirm={clear}
            onCancel={() => setConfirming(false)}
          />
        ) : (
          <button className="danger" data-testid="warm-clear" disabled={warm.prefixes.length === 0} onClick={() => setConfirming(true)}>
            Clear
          </button>
        )}
        <span className="muted small">
          {warm.prefixes.length > 0 ? `${formatBytes(total)} on disk; past ${gigabytes(warm.maxBytes)} the least recently used go first.` : ""}
        </span>
      </div>
      {error && (
        <p className="error" role="alert" data-testid="warm-start-error">
          {error}
        </p>
      )}
    </div>
  );
}
