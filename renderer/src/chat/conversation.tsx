// The conversation: the turns, the answer or agent run being written (each follows its own live store, so a
// token re-renders only that turn), and what an empty chat shows. Follows the answer while the user is at
// the bottom; leaves the view alone once they scroll up to read.
import { useEffect, useRef, type ReactNode } from "react";
import { useStore, type Store } from "../state/store";
import { AgentTurnView } from "./agent-turn-view";
import type { LiveAnswer } from "./use-chat-stream";
import { TurnView, type TurnActions } from "./turn-view";
import type { AgentRunRecord, Turn } from "./types";

function LiveAnswerView({ live }: { live: Store<{ answer: LiveAnswer | null }> }) {
  const answer = useStore(live, (s) => s.answer);
  if (!answer) return null;
  return <TurnView turn={answer.turn} busy canEdit={false} isLastAnswer={false} live={answer} />;
}

function LiveRunView({ live }: { live: Store<{ run: AgentRunRecord | null }> }) {
  const run = useStore(live, (s) => s.run);
  return run ? <AgentTurnView run={run} running /> : null;
}

export function Conversation({
  turns,
  busy,
  canEdit,
  liveAnswer,
  liveRun,
  actionsFor,
  previewOf,
  empty,
}: {
  turns: Turn[];
  busy: boolean;
  canEdit: boolean;
  liveAnswer: Store<{ answer: LiveAnswer | null }>;
  liveRun: Store<{ run: AgentRunRecord | null }>;
  actionsFor: (turn: Turn) => TurnActions;
  previewOf: (fileId: string) => string | null;
  empty: ReactNode;
}) {
  const listRef = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const lastAnswer = [...turns].reverse().find((t) => t.role !== "user");

  // Follow new content while at the bottom (turns, and the live answer's growth).
  useEffect(() => {
    const el = listRef.current;
    if (!el) return;
    const follow = () => {
      if (stick.current) el.scrollTop = el.scrollHeight;
    };
    follow();
    const observer = new MutationObserver(follow);
    observer.observe(el, { childList: true, subtree: true, characterData: true });
    return () => observer.disconnect();
  }, []);
  useEffect(() => {
    if (busy) stick.current = true;
  }, [busy]);

  return (
    <div
      className="turns"
      ref={listRef}
      onScroll={() => {
        const el = listRef.current;
        if (el) stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 48;
      }}
      data-testid="chat-turns"
      tabIndex={0}
      aria-label="Conversation"
    >
      {turns.length === 0 && !busy && empty}
      {turns.map((turn) =>
        turn.role === "agent" && turn.agent ? (
          <AgentTurnView key={turn.id} run={turn.agent} problem={turn.problem} running={false} />
        ) : (
          <TurnView
            key={turn.id}
            turn={turn}
            busy={busy}
            canEdit={canEdit}
            isLastAnswer={turn.id === lastAnswer?.id}
            actions={actionsFor(turn)}
            previewOf={previewOf}
          />
        ),
      )}
      <LiveAnswerView live={liveAnswer} />
      <LiveRunView live={liveRun} />
    </div>
  );
}
