// Whether coding agents (Claude Code, Codex) fit the loaded model's context, in the window's words and with
// the button that fixes it: the server's facts (status.model.contextRemedy), never its command-line advice.
import type { StatusView } from "../../../server/features/console/contract";
import { formatTokens } from "../chat/context-fit";

export function ContextNote({ model, busy, onSetContext }: { model: StatusView["model"]; busy: boolean; onSetContext: (contextSize: number, sequences?: number) => void }) {
  const remedy = model.contextRemedy;
  if (!remedy || !model.contextSize) return null;
  const need = `Coding agents such as Claude Code and Codex send about ${formatTokens(model.agentContextSize ?? remedy.figure)} tokens before their first answer; this model's context is ${formatTokens(model.contextSize)} tokens, so they would be refused.`;
  const fix = (() => {
    switch (remedy.reason) {
      case "training":
        return `The model was trained on ${formatTokens(model.trainContextSize ?? model.contextSize)} tokens, so no setting makes room: a model trained on longer texts can (Suggested models, below).`;
      case "memory":
        return `The free memory holds at most ${formatTokens(remedy.room)} tokens of context with this model: close other programs, or pick a smaller model below. A context of ${formatTokens(remedy.figure)} tokens can be tried (the model stays on its settings if it does not load).`;
      case "sequences":
        return `The free memory holds ${remedy.sequences} answer${remedy.sequences === 1 ? "" : "s"} at once with a context of ${formatTokens(remedy.figure)} tokens.`;
      default:
        return `A context of ${formatTokens(remedy.figure)} tokens takes them${remedy.automatic ? `; automatic would size it to ${formatTokens(remedy.automatic)}` : ""}.`;
    }
  })();
  return (
    <div className="notice" data-testid="model-context-note">
      <p>
        {need} {fix}
      </p>
      {remedy.reason !== "training" && (
        <button
          className="primary"
          data-testid="model-context-fix"
          disabled={busy}
          onClick={() => onSetContext(remedy.figure, remedy.reason === "sequences" ? remedy.sequences : undefined)}
        >
          Set the context to {formatTokens(remedy.figure)} tokens
          {remedy.reason === "sequences" ? ` and ${remedy.sequences} answer${remedy.sequences === 1 ? "" : "s"} at once` : ""}
        </button>
      )}
    </div>
  );
}
