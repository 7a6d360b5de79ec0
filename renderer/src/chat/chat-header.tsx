// The chat's header: the Chats toggle (narrow windows), the chat's title (cut short, never wrapping the
// toolbar), and the toolbar: the model that answers (switching it loads the other model), the thinking level,
// the settings drawer, Agent mode and Export.
import type { ModelsView, StatusView } from "../../../server/features/console/contract";
import { Download, Settings2 } from "../icons";
import { EFFORTS, type Effort } from "../settings";

function fileName(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

type ModelStatus = Pick<StatusView, "model"> | null;

export function ModelPicker({ models, status, disabled, onPick }: { models: ModelsView | null; status: ModelStatus; disabled: boolean; onPick: (file: string) => void }) {
  const usable = models?.models.filter((m) => !m.error) ?? [];
  const loaded = usable.find((m) => m.loaded)?.file ?? (models?.loaded ? models.loaded : null);
  const elsewhere = loaded !== null && !usable.some((m) => m.file === loaded);
  if (usable.length === 0 && !elsewhere) return null;
  const state = status?.model.state;
  return (
    <label className="model-picker">
      <span className="label-text">Model</span>
      <select data-testid="chat-model" value={loaded ?? ""} disabled={disabled || state === "loading"} onChange={(e) => e.target.value && onPick(e.target.value)}>
        {loaded === null && <option value="">None loaded</option>}
        {elsewhere && <option value={loaded!}>{status?.model.name ?? fileName(loaded!)}</option>}
        {usable.map((m) => (
          <option key={m.file} value={m.file}>
            {m.name ?? m.file}
            {m.quantization ? ` (${m.quantization})` : ""}
          </option>
        ))}
      </select>
    </label>
  );
}

export function ChatHeader({
  title,
  agent,
  listOpen,
  drawerOpen,
  busy,
  effort,
  canExport,
  models,
  status,
  toggleRef,
  onToggleList,
  onEffort,
  onToggleDrawer,
  onToggleAgent,
  onExport,
  onPickModel,
}: {
  title: string;
  agent: boolean;
  listOpen: boolean;
  drawerOpen: boolean;
  busy: boolean;
  effort: Effort;
  canExport: boolean;
  models: ModelsView | null;
  status: ModelStatus;
  toggleRef: React.RefObject<HTMLButtonElement | null>;
  onToggleList: () => void;
  onEffort: (effort: Effort) => void;
  onToggleDrawer: () => void;
  onToggleAgent: () => void;
  onExport: () => void;
  onPickModel: (file: string) => void;
}) {
  return (
    <header className="page-header chat-header">
      <div className="title-row">
        <button ref={toggleRef} className="chats-toggle" data-testid="chats-toggle" aria-expanded={listOpen} aria-controls="chat-list" onClick={onToggleList}>
          Chats
        </button>
        <h1 id="chat-title" title={title} data-testid="chat-title">
          {title}
        </h1>
      </div>
      <div className="toolbar" data-testid="chat-toolbar">
        <ModelPicker models={models} status={status} disabled={busy} onPick={onPickModel} />
        <label>
          <span className="label-text">Thinking</span>{" "}
          <select data-testid="chat-effort" value={effort} onChange={(e) => onEffort(e.target.value as Effort)} disabled={busy}>
            {EFFORTS.map((e) => (
              <option key={e.value} value={e.value}>
                {e.label}
              </option>
            ))}
          </select>
        </label>
        <button data-testid="chat-settings" aria-expanded={drawerOpen} aria-controls="chat-settings-drawer" onClick={onToggleDrawer} title="Chat settings" aria-label="Chat settings">
          <Settings2 size={15} aria-hidden />
        </button>
        <button data-testid="chat-agent-mode" aria-pressed={agent} onClick={onToggleAgent} disabled={busy} title="Agent mode: the agent searches and reads your files">
          Agent
        </button>
        <button data-testid="chat-export" onClick={onExport} disabled={!canExport} title="Export this chat as JSON" aria-label="Export this chat">
          <Download size={14} aria-hidden />
        </button>
      </div>
    </header>
  );
}
