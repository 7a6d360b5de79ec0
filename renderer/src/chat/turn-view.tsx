// One message of the conversation: its text (markdown for the model's), the model's thought apart and
// collapsible, progress before the first token, live tokens and tokens per second while it is written,
// timings and token counts after (a stopped answer keeps its counts), and its actions.
import { useEffect, useState } from "react";
import { copyText } from "../format";
import { Check, Copy, Pencil, RefreshCw } from "../icons";
import { Markdown } from "../markdown";
import { EFFORTS } from "../settings";
import { SentChip } from "./attachment-chip";
import { formatTokens } from "./context-fit";
import type { ProblemAction, Turn, TurnStats } from "./types";

const ACTION_LABELS: Record<ProblemAction, string> = {
  retry: "Try again",
  edit: "Edit the message",
  send_without_attachments: "Send without the attachment",
  open_models: "Open the Model page",
  open_model_settings: "Open the model's settings",
  open_keys: "Open the Keys page",
  new_chat: "Start a new chat",
  set_context: "Set the context",
};

function seconds(ms: number): string {
  if (ms < 100) return "under 0.1 s";
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

export function statsLine(stats: TurnStats): string {
  const parts: string[] = [];
  if (stats.firstTokenMs !== null) parts.push(`first token after ${seconds(stats.firstTokenMs)}`);
  if (stats.thinkingMs !== null) parts.push(`thought for ${seconds(stats.thinkingMs)}`);
  if (stats.completionTokens !== null)
    parts.push(`${stats.counted ? "≈ " : ""}${formatTokens(stats.completionTokens)} tokens${stats.reasoningTokens ? ` (${stats.reasoningTokens} thinking)` : ""}`);
  if (stats.tokensPerSecond !== null) parts.push(`${stats.tokensPerSecond.toFixed(1)} tokens/s`);
  if (stats.promptTokens !== null) parts.push(`prompt ${formatTokens(stats.promptTokens)} tokens${stats.cachedTokens ? ` (${stats.cachedTokens} cached)` : ""}`);
  return parts.join(" · ");
}

export function Elapsed({ since }: { since: number }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 500);
    return () => clearInterval(timer);
  }, []);
  return <>{Math.max(0, Math.floor((now - since) / 1000))} s</>;
}

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      className="icon"
      data-testid="turn-copy"
      aria-label={done ? "Copied" : label}
      title={label}
      onClick={() =>
        void copyText(text).then((ok) => {
          setDone(ok);
          setTimeout(() => setDone(false), 1500);
        })
      }
    >
      {done ? <Check size={14} aria-hidden /> : <Copy size={14} aria-hidden />}
    </button>
  );
}

export interface TurnActions {
  onRegenerate: () => void;
  onContinue: () => void;
  onResend: (text: string) => void;
  onProblemAction: (action: ProblemAction) => void;
}

function UserTurn({ turn, busy, canEdit, onResend, previewOf }: { turn: Turn; busy: boolean; canEdit: boolean; onResend: (text: string) => void; previewOf: (fileId: string) => string | null }) {
  const [editing, setEditing] = useState<string | null>(null);
  return (
    <article className={`turn user ${turn.status === "error" ? "unanswered" : ""}`} data-testid="turn-user" data-status={turn.status} aria-label="Your message">
      {editing !== null ? (
        <form
          className="edit-form"
          onSubmit={(e) => {
            e.preventDefault();
            if (editing.trim()) onResend(editing);
            setEditing(null);
          }}
        >
          <label className="sr-only" htmlFor={`edit-${turn.id}`}>
            Edit your message
          </label>
          <textarea id={`edit-${turn.id}`} data-testid="turn-edit-input" value={editing} onChange={(e) => setEditing(e.target.value)} rows={3} autoFocus />
          <div className="toolbar">
            <button type="submit" className="primary" data-testid="turn-edit-send" disabled={!editing.trim() || !canEdit}>
              Send
            </button>
            <button type="button" onClick={() => setEditing(null)}>
              Cancel
            </button>
          </div>
        </form>
      ) : (
        <p data-testid="turn-content">{turn.content}</p>
      )}
      {turn.attachments.length > 0 && (
        <ul className="attachments" aria-label="Attachments">
          {turn.attachments.map((a, i) => (
            <li key={`${a.fileId}-${i}`} data-testid="turn-attachment">
              <SentChip attachment={a} previewUrl={previewOf(a.fileId)} />
            </li>
          ))}
        </ul>
      )}
      {turn.status === "error" && (
        <p className="turn-note" data-testid="turn-refused">
          Not answered; left out of the conversation.
        </p>
      )}
      {editing === null && (
        <div className="turn-actions">
          <CopyButton text={turn.content} label="Copy message" />
          <button className="icon" data-testid="turn-edit" aria-label="Edit and send again" title="Edit and send again" disabled={busy} onClick={() => setEditing(turn.content)}>
            <Pencil size={14} aria-hidden />
          </button>
        </div>
      )}
    </article>
  );
}

export function TurnView({
  turn,
  busy,
  canEdit,
  isLastAnswer,
  actions,
  previewOf = () => null,
  live,
}: {
  turn: Turn;
  busy: boolean;
  canEdit: boolean;
  isLastAnswer: boolean;
  actions?: TurnActions;
  /** A thumbnail of an attached image this window still holds, by file id. */
  previewOf?: (fileId: string) => string | null;
  /** While it is written: tokens so far and tokens per second. */
  live?: { tokens: number; tokensPerSecond: number | null };
}) {
  if (turn.role === "user") return <UserTurn turn={turn} busy={busy} canEdit={canEdit} onResend={(text) => actions?.onResend(text)} previewOf={previewOf} />;
  const streaming = turn.status === "streaming";
  const effortLabel = EFFORTS.find((e) => e.value === turn.effort)?.label;
  const canContinue = isLastAnswer && !busy && canEdit && (turn.status === "stopped" || turn.finishReason === "length");
  return (
    <article className="turn assistant" data-testid="turn-assistant" data-status={turn.status} aria-busy={streaming} aria-label="The model's answer">
      {streaming && turn.phase === "waiting" && (
        <p className="progress-note" data-testid="turn-waiting">
          <span className="spinner" aria-hidden /> Reading your message… <Elapsed since={turn.startedAt ?? Date.now()} />
        </p>
      )}
      {turn.reasoning && (
        <details className="reasoning" data-testid="turn-reasoning" open={streaming && !turn.content}>
          <summary>
            {streaming && !turn.content ? (
              <>
                <span className="spinner" aria-hidden /> Thinking… <Elapsed since={turn.startedAt ?? Date.now()} />
              </>
            ) : (
              `Thought${turn.stats?.thinkingMs ? ` for ${seconds(turn.stats.thinkingMs)}` : ""}`
            )}
          </summary>
          <div className="reasoning-text" data-testid="turn-reasoning-text">
            {turn.reasoning}
          </div>
        </details>
      )}
      {(turn.content || !streaming) && <Markdown text={turn.content} testId="turn-content" />}
      {streaming && live && live.tokens > 0 && (
        <p className="stats live" data-testid="turn-live-stats" aria-live="off">
          {formatTokens(live.tokens)} tokens{live.tokensPerSecond !== null ? ` · ${live.tokensPerSecond.toFixed(1)} tokens/s` : ""}
        </p>
      )}
      {(turn.status === "stopped" || turn.finishReason === "length") && (
        <p className="turn-note" data-testid="turn-stopped">
          {turn.status === "stopped" ? "Stopped." : "The answer reached its length limit."}
          {canContinue && (
            <>
              {" "}
              <button className="link" data-testid="turn-continue" onClick={actions?.onContinue}>
                Continue
              </button>
            </>
          )}
        </p>
      )}
      {turn.status === "error" && turn.problem && (
        <div className="problem" role="alert" data-testid="turn-error">
          <p className="problem-title">{turn.problem.title}</p>
          <p>{turn.problem.detail}</p>
          {/* Only the last exchange can be fixed in place; an earlier one is simply left out of the chat. */}
          {isLastAnswer && (
            <div className="toolbar">
              {turn.problem.actions.map((action, i) => (
                <button key={action} className={i === 0 ? "primary" : ""} data-testid={`problem-${action}`} onClick={() => actions?.onProblemAction(action)}>
                  {action === "set_context" && turn.problem?.contextFigure ? `Set the context to ${formatTokens(turn.problem.contextFigure)} tokens` : ACTION_LABELS[action]}
                </button>
              ))}
            </div>
          )}
          {turn.problem.reference && <p className="server-said">{turn.problem.reference}</p>}
        </div>
      )}
      {!streaming && turn.status !== "error" && (
        <div className="turn-footer">
          <div className="turn-actions">
            <CopyButton text={turn.content} label="Copy answer" />
            {isLastAnswer && (
              <button className="icon" data-testid="turn-regenerate" aria-label="Regenerate the answer" title="Regenerate" disabled={busy || !canEdit} onClick={actions?.onRegenerate}>
                <RefreshCw size={14} aria-hidden />
              </button>
            )}
          </div>
          {turn.stats && (
            <p className="stats" data-testid="turn-stats">
              {effortLabel ? `${effortLabel === "Off (fast)" ? "Fast" : `Thinking ${effortLabel.toLowerCase()}`} · ` : ""}
              {statsLine(turn.stats)}
            </p>
          )}
        </div>
      )}
    </article>
  );
}
