// How full the model's context would be with this message: the conversation, the message and its files,
// counted before anything is sent. Near the limit it warns; over it, Send waits and the fix that fits the
// cause is offered: a longer context (this model's setting, one click) while the model was trained on enough,
// else a shorter message or another model.
import type { ContextFill } from "./context-fit";
import { formatTokens } from "./context-fit";

export function ContextMeter({
  fill,
  trainContextSize,
  busy,
  onSetContext,
  onNewChat,
  onOpenModels,
}: {
  fill: ContextFill;
  trainContextSize: number | null;
  busy: boolean;
  onSetContext: (figure: number) => void;
  onNewChat: () => void;
  onOpenModels: () => void;
}) {
  const { tokens, contextSize, fileAlone, figure } = fill;
  const share = tokens / contextSize;
  const amount = fill.fill === "over" && share >= 1.5 ? ` (${share.toFixed(share >= 10 ? 0 : 1)} times the context)` : ` (${Math.round(share * 100)}%)`;
  return (
    <div className={`context-meter ${fill.fill}`} data-testid="context-meter" data-fill={fill.fill}>
      <div className="meter-row">
        <meter min={0} max={contextSize} low={contextSize * 0.85} high={contextSize * 0.99} optimum={0} value={Math.min(tokens, contextSize)} aria-label="Context used" />
        <span className="small" data-testid="context-figures">
          ≈ {formatTokens(tokens)} of {formatTokens(contextSize)} tokens{fill.fill !== "ok" ? amount : ""}
        </span>
      </div>
      {fill.fill !== "ok" && (
        <div className={fill.fill === "over" ? "problem small" : "notice small"} data-testid="context-advice" role={fill.fill === "over" ? "alert" : undefined}>
          <p>
            {fill.fill === "warn"
              ? `Close to the ${formatTokens(contextSize)} tokens this model reads at once: the answer has little room.`
              : fileAlone
                ? `${fileAlone.name} alone is about ${formatTokens(fileAlone.tokens)} tokens, more than the ${formatTokens(contextSize)} this model reads at once.`
                : `This message and the conversation so far are about ${formatTokens(tokens)} tokens, more than the ${formatTokens(contextSize)} this model reads at once.`}{" "}
            {figure !== null
              ? `A context of ${formatTokens(figure)} tokens takes it (this model's setting; the model reloads with it).`
              : `This model was trained on ${formatTokens(trainContextSize ?? contextSize)} tokens, so no setting lets it read more: ${fileAlone ? "remove the file or attach a shorter part" : "start a new chat"}, or pick a model trained on longer texts.`}
          </p>
          <div className="toolbar">
            {figure !== null && (
              <button type="button" className={fill.fill === "over" ? "primary" : ""} data-testid="context-set" disabled={busy} onClick={() => onSetContext(figure)}>
                Set the context to {formatTokens(figure)} tokens
              </button>
            )}
            {fill.fill === "over" && !fileAlone && (
              <button type="button" data-testid="context-new-chat" onClick={onNewChat}>
                Start a new chat
              </button>
            )}
            {figure === null && (
              <button type="button" data-testid="context-open-models" onClick={onOpenModels}>
                Open the Model page
              </button>
            )}
          </div>
        </div>
      )}
    </div>
  );
}
