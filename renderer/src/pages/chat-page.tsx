// Chat with the local model over the Chat Completions API, as any OpenAI client does, or give a task to the
// agent (Agent mode): both land in the same conversation, saved by the window (chat-store.ts). The work is in
// hooks, one per job: the answer being streamed (useChatStream), the agent run (useAgentRun), the attached
// files (useAttachments) and the chat on screen (useChatSession); this page wires them to the views.
import { useCallback, useEffect, useRef, useState } from "react";
import { AgentOptions, type AgentChoices } from "../chat/agent-options";
import { agentAnswer, toApiMessages } from "../chat/api-messages";
import { describeChatError, missingFileId } from "../chat/chat-errors";
import { ChatHeader } from "../chat/chat-header";
import { ChatList } from "../chat/chat-list";
import { Composer, hasContent } from "../chat/composer";
import { contextFill } from "../chat/context-fit";
import { ContextMeter } from "../chat/context-meter";
import { Conversation } from "../chat/conversation";
import { EmptyChat } from "../chat/empty-chat";
import { exportChat } from "../chat/export";
import { SettingsDrawer } from "../chat/settings-drawer";
import type { ProblemAction, Turn } from "../chat/types";
import { sentAttachment, useAttachments } from "../chat/use-attachments";
import { useAgentRun } from "../chat/use-agent-run";
import { useChatSession } from "../chat/use-chat-session";
import { useChatStream } from "../chat/use-chat-stream";
import { useEscape, useModelContext } from "../chat/use-model-context";
import { consoleApi } from "../console-client";
import { defaultEffort, useSettings, type Effort } from "../settings";
import { sameJson } from "../state/store";
import { applyToWindow, useWindow } from "../state/window-state";
import { useDropTarget } from "../use-drop-target";

const newId = () => crypto.randomUUID();

export type ChatGo = (page: "models" | "keys", section?: "settings") => void;

export function ChatPage({ visible, newChatRequest, onGo }: { visible: boolean; newChatRequest: number; onGo: ChatGo }) {
  const [settings, setSettings] = useSettings();
  const info = useWindow((s) => s.info);
  // The parts the chat shows (the status also carries counters and free memory, which change all the time).
  const status = useWindow((s) => (s.status ? { model: s.status.model, gpu: s.status.gpu } : null), sameJson);
  const models = useWindow((s) => s.models);
  const stream = useChatStream();
  const agentRun = useAgentRun(info?.openaiBaseUrl ?? null);
  const busy = stream.streaming || agentRun.running;
  const session = useChatSession(busy);
  const [announcement, setAnnouncement] = useState("");
  const attachments = useAttachments(info?.openaiBaseUrl ?? null, setAnnouncement);
  const [draft, setDraft] = useState("");
  const [drawerOpen, setDrawerOpen] = useState(false);
  const [agentMode, setAgentMode] = useState(false);
  const [listOpen, setListOpen] = useState(false);
  const [choices, setChoices] = useState<AgentChoices>({ picked: new Set(), firstStep: "auto", maxSteps: 8 });
  const inputRef = useRef<HTMLTextAreaElement>(null);
  const toggleRef = useRef<HTMLButtonElement>(null);
  const { turns, setTurns } = session;

  const hardware = defaultEffort(status?.gpu?.backend);
  const effort: Effort = settings.effort ?? hardware.effort;
  const model = status?.model;
  const { notice, setNotice, setContext } = useModelContext(model?.settings);
  const modelReady = model?.state === "ready";
  const blocked = !info ? "Waiting for the server…" : model?.state === "loading" ? "The model is loading…" : !modelReady ? "Get a model first (see above)." : null;
  const contextSize = modelReady ? (model?.contextSize ?? null) : null;
  const fill =
    contextSize && !agentMode
      ? contextFill({
          turns,
          systemPrompt: session.systemPrompt,
          draft,
          attachments: attachments.ready.filter((a) => a.file.status === "processed").map((a) => ({ name: a.name, tokens: a.file.token_estimate })),
          contextSize,
          trainContextSize: model?.trainContextSize ?? null,
        })
      : null;

  /** Streams an answer to `history`; `continued`: a stopped answer that the model writes on after. */
  async function answer(history: Turn[], continued?: Turn) {
    if (!info) return;
    const user = [...history].reverse().find((t) => t.role === "user");
    session.ensureId();
    setAnnouncement("");
    setNotice(null);
    setTurns(continued ? history : history.map((t) => (t.id === user?.id ? { ...t, status: "done" as const, problem: undefined } : t)));
    const reply: Turn = continued ?? { id: newId(), role: "assistant", content: "", reasoning: "", attachments: [], status: "streaming", effort };
    const body = {
      model: "svc",
      messages: toApiMessages(continued ? [...history, continued] : history, session.systemPrompt),
      stream: true as const,
      reasoning_effort: effort,
      ...(settings.temperature !== null ? { temperature: settings.temperature } : {}),
      ...(settings.maxTokens !== null ? { max_tokens: settings.maxTokens } : {}),
    };
    await stream.start(info.openaiBaseUrl, body, reply, ({ turn, error }) => {
      if (error === undefined) {
        setTurns((all) => [...all, turn]);
        setAnnouncement(turn.status === "stopped" ? "Stopped." : `The model answered: ${turn.content.slice(0, 600)}`);
        return;
      }
      const earlier = history.slice(0, -1).flatMap((t) => (t.status === "error" ? [] : t.attachments.filter((a) => !a.gone)));
      const problem = describeChatError(error, { text: user?.content ?? "", attachments: user?.attachments ?? [], earlier }, { contextSize: model?.contextSize ?? null, trainContextSize: model?.trainContextSize ?? null });
      // The user's message stays visible, marked as not answered, and is left out of what is sent next.
      setTurns((all) => [...all.map((t) => (t.id === user?.id && !continued ? { ...t, status: "error" as const } : t)), { ...turn, status: "error", problem }]);
      const gone = missingFileId(error);
      if (gone) session.markGone(gone);
      setAnnouncement(`${problem.title} ${problem.detail}`);
    });
  }

  async function runAgent(task: string) {
    if (!info) return;
    const fileIds = [...new Set([...choices.picked, ...attachments.ready.map((a) => a.file.id)])];
    const user: Turn = { id: newId(), role: "user", content: task, reasoning: "", attachments: attachments.ready.map(sentAttachment), status: "done" };
    session.ensureId();
    setTurns((all) => [...all, user]);
    await agentRun.start({ task, fileIds, effort, firstStep: choices.firstStep, maxSteps: choices.maxSteps }, (run, error) => {
      const problem = error ? describeChatError(error, { text: task, attachments: user.attachments }) : undefined;
      setTurns((all) => [...all, { id: newId(), role: "agent", content: agentAnswer(run.steps), reasoning: "", attachments: [], status: error ? "error" : "done", agent: run, problem }]);
    });
  }

  const canSend = blocked === null && !attachments.uploading && hasContent(draft, attachments) && fill?.fill !== "over";
  function send() {
    const text = draft.trim();
    if (!canSend || busy) return;
    const sent = attachments.ready;
    setDraft("");
    attachments.clear(sent);
    if (agentMode) return void runAgent(text);
    const user: Turn = { id: newId(), role: "user", content: text, reasoning: "", attachments: sent.map(sentAttachment), status: "done" };
    void answer([...turns, user]);
  }

  const stop = useCallback(() => (agentRun.running ? void agentRun.cancel() : stream.stop()), [agentRun, stream]);

  const newChat = useCallback(() => {
    stream.stop();
    session.reset();
    setDraft("");
    attachments.clear();
    setNotice(null);
    setListOpen(false);
    setTimeout(() => inputRef.current?.focus(), 0);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [stream, session.reset, attachments.clear]);

  useEffect(() => {
    if (newChatRequest > 0) newChat();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [newChatRequest]);

  // Esc stops the answer (or the agent run) being written.
  useEscape(visible && busy, stop);

  function onProblemAction(answerId: string, action: ProblemAction) {
    const index = turns.findIndex((t) => t.id === answerId);
    const user = turns[index - 1];
    const pair = index >= 1 && user?.role === "user" ? { user, before: turns.slice(0, index - 1) } : null;
    const retry = () => pair && void answer([...pair.before, { ...pair.user, status: "done" }]);
    if (action === "open_models") onGo("models");
    else if (action === "open_model_settings") onGo("models", "settings");
    else if (action === "open_keys") onGo("keys");
    else if (action === "new_chat") newChat();
    else if (action === "retry") retry();
    else if (action === "set_context") {
      const figure = turns[index]?.problem?.contextFigure;
      if (figure) void setContext(figure).then((ok) => ok && retry());
    } else if (action === "send_without_attachments" && pair) {
      if (!pair.user.content) setTurns(pair.before);
      else void answer([...pair.before, { ...pair.user, id: newId(), attachments: [], status: "done" }]);
    } else if (action === "edit" && pair) {
      setTurns(pair.before);
      setDraft(pair.user.content);
      attachments.restore(pair.user.attachments);
      setTimeout(() => inputRef.current?.focus(), 0);
    }
  }

  const actionsFor = (turn: Turn) => ({
    onRegenerate: () => {
      const index = turns.findIndex((t) => t.id === turn.id);
      if (index >= 1 && !busy) void answer(turns.slice(0, index));
    },
    onContinue: () => {
      const index = turns.findIndex((t) => t.id === turn.id);
      if (index >= 1 && !busy) void answer(turns.slice(0, index), { ...turn, status: "streaming", finishReason: null });
    },
    onResend: (text: string) => {
      const index = turns.findIndex((t) => t.id === turn.id);
      if (index >= 0 && !busy && modelReady) void answer([...turns.slice(0, index), { ...turn, id: newId(), content: text.trim(), status: "done" }]);
    },
    onProblemAction: (action: ProblemAction) => onProblemAction(turn.id, action),
  });

  const drop = useDropTarget((files) => void attachments.attach(files));
  const closeList = useCallback(() => setListOpen(false), []);

  return (
    <section
      className={`page chat ${drop.dragging ? "dragging" : ""} ${drawerOpen ? "with-drawer" : ""} ${listOpen ? "list-open" : ""}`}
      data-testid="chat-page"
      aria-labelledby="chat-title"
      {...drop.handlers}
    >
      <ChatList
        chats={session.chats}
        currentId={session.chatId}
        busy={busy}
        historyEnabled={settings.historyEnabled}
        storageError={session.storageError}
        onNew={newChat}
        onOpen={(chat) => {
          if (busy) return;
          session.open(chat);
          setListOpen(false);
        }}
        onRename={session.rename}
        onDelete={session.remove}
        onDeleteAll={session.removeAll}
        onHistory={(enabled) => setSettings({ historyEnabled: enabled })}
        overlay={listOpen}
        toggleRef={toggleRef}
        onClose={closeList}
      />

      <div className="chat-main">
        <ChatHeader
          title={session.title ?? (agentMode ? "Agent" : "Chat")}
          agent={agentMode}
          listOpen={listOpen}
          drawerOpen={drawerOpen}
          busy={busy}
          effort={effort}
          canExport={turns.length > 0}
          models={models}
          status={status}
          toggleRef={toggleRef}
          onToggleList={() => setListOpen((v) => !v)}
          onEffort={(e) => setSettings({ effort: e })}
          onToggleDrawer={() => setDrawerOpen((v) => !v)}
          onToggleAgent={() => setAgentMode((v) => !v)}
          onExport={() => exportChat(session.title ?? "Chat", session.systemPrompt, turns)}
          onPickModel={(file) => void consoleApi.useModel(file).then((m) => applyToWindow({ models: m }), (err: Error) => setNotice(err.message))}
        />
        {settings.effort === null && status && (
          <p className="hint" data-testid="effort-hint">
            {hardware.reason}
          </p>
        )}
        <Conversation
          turns={turns}
          busy={busy}
          canEdit={modelReady}
          liveAnswer={stream.live}
          liveRun={agentRun.live}
          actionsFor={actionsFor}
          previewOf={attachments.previewOf}
          empty={<EmptyChat agent={agentMode} onGo={onGo} />}
        />
        <div className="sr-only" aria-live="polite" data-testid="chat-announcer">
          {announcement}
        </div>
        {notice && (
          <p className="notice" role="status" data-testid="chat-model-notice">
            {notice}
          </p>
        )}
        <Composer
          agent={agentMode}
          draft={draft}
          onDraft={setDraft}
          inputRef={inputRef}
          attachments={attachments}
          contextSize={contextSize}
          blocked={blocked}
          busy={busy}
          canSend={canSend}
          onSend={send}
          onStop={stop}
          options={agentMode ? <AgentOptions choices={choices} onChange={setChoices} disabled={busy} /> : undefined}
          meter={
            fill && (
              <ContextMeter
                fill={fill}
                trainContextSize={model?.trainContextSize ?? null}
                busy={busy || model?.state !== "ready"}
                onSetContext={(figure) => void setContext(figure)}
                onNewChat={newChat}
                onOpenModels={() => onGo("models")}
              />
            )
          }
        />
      </div>

      <SettingsDrawer open={drawerOpen} onClose={() => setDrawerOpen(false)} effort={effort} systemPrompt={session.systemPrompt} onSystemPrompt={session.setSystemPrompt} />
    </section>
  );
}
