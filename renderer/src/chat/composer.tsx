// The message box: the files attached to it (with what the model gets from each, or why not), how full the
// context would be, the text, Attach, and Send (Run in Agent mode) or Stop. Enter sends, Shift+Enter makes a
// new line, Esc stops.
import { useRef, type ReactNode, type RefObject } from "react";
import { Paperclip, Send, Square } from "../icons";
import { PendingChip, pendingState } from "./attachment-chip";
import { ATTACH_ACCEPT, ATTACHABLE_WORDS } from "./attachments";
import type { Attachments } from "./use-attachments";

export function Composer({
  agent,
  draft,
  onDraft,
  inputRef,
  attachments,
  contextSize,
  meter,
  blocked,
  busy,
  canSend,
  onSend,
  onStop,
  options,
}: {
  agent: boolean;
  draft: string;
  onDraft: (text: string) => void;
  inputRef: RefObject<HTMLTextAreaElement | null>;
  attachments: Attachments;
  contextSize: number | null;
  meter: ReactNode;
  blocked: string | null;
  busy: boolean;
  canSend: boolean;
  onSend: () => void;
  onStop: () => void;
  /** Agent mode's choices (files, first step, steps), above the box. */
  options?: ReactNode;
}) {
  const fileRef = useRef<HTMLInputElement>(null);
  const id = agent ? "agent-input" : "chat-input";
  return (
    <>
      {options}
      {attachments.notice && (
        <p className="notice" role="status" data-testid="chat-notice">
          {attachments.notice}
        </p>
      )}
      {attachments.pending.length > 0 && (
        <ul className="attachments pending" data-testid="chat-attachments" aria-label="Attachments to send">
          {attachments.pending.map((a) => (
            <li key={a.key} data-testid="chat-attachment" data-state={pendingState(a)}>
              <PendingChip attachment={a} contextSize={agent ? null : contextSize} onRemove={() => attachments.remove(a.key)} />
            </li>
          ))}
        </ul>
      )}
      {meter}
      <form
        className="composer"
        onSubmit={(e) => {
          e.preventDefault();
          onSend();
        }}
      >
        <label htmlFor={id} className="sr-only">
          {agent ? "Task" : "Message"}
        </label>
        <textarea
          id={id}
          ref={inputRef}
          data-testid={id}
          value={draft}
          placeholder={blocked ?? (agent ? "A task for the agent, e.g. When do the backups run?" : "Message the local model (Enter sends, Shift+Enter for a new line, Esc stops)")}
          onChange={(e) => onDraft(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
              e.preventDefault();
              onSend();
            }
          }}
          rows={3}
        />
        <div className="composer-actions">
          <input
            ref={fileRef}
            type="file"
            multiple
            hidden
            accept={ATTACH_ACCEPT}
            data-testid="chat-attach"
            onChange={(e) => {
              if (e.target.files) void attachments.attach(e.target.files);
              e.target.value = "";
            }}
          />
          <button type="button" data-testid="chat-attach-button" onClick={() => fileRef.current?.click()} title={`Attach files: ${ATTACHABLE_WORDS}`}>
            <Paperclip size={15} aria-hidden /> Attach
          </button>
          {busy ? (
            <button type="button" className="danger" data-testid={agent ? "agent-cancel" : "chat-stop"} onClick={onStop} title="Stop (Esc)">
              <Square size={14} aria-hidden /> {agent ? "Cancel" : "Stop"}
            </button>
          ) : (
            <button
              type="submit"
              className="primary"
              data-testid={agent ? "agent-run" : "chat-send"}
              disabled={!canSend}
              title={attachments.uploading ? "Waiting for the attachments to upload" : undefined}
            >
              <Send size={14} aria-hidden /> {agent ? "Run" : "Send"}
            </button>
          )}
        </div>
      </form>
      {blocked && (
        <p className="muted small" data-testid="chat-blocked">
          {blocked}
        </p>
      )}
    </>
  );
}

/** Whether anything would be sent: text, or at least one file that is ready. */
export function hasContent(draft: string, attachments: Attachments): boolean {
  return draft.trim() !== "" || attachments.ready.length > 0;
}

export function composerReady(attachments: Attachments): boolean {
  return !attachments.pending.some((a) => pendingState(a) === "uploading");
}
