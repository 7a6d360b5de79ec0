// The chat's settings: this chat's system prompt (each chat keeps its own; new chats start with the default),
// thinking level, temperature and the answer's length limit. They are the window's settings (kept on this
// computer) and go with every message as request fields.
import { X } from "../icons";
import { EFFORTS, useSettings, type Effort } from "../settings";

export function SettingsDrawer({
  open,
  onClose,
  effort,
  systemPrompt,
  onSystemPrompt,
}: {
  open: boolean;
  onClose: () => void;
  effort: Effort;
  systemPrompt: string;
  onSystemPrompt: (text: string) => void;
}) {
  const [settings, setSettings] = useSettings();
  if (!open) return null;
  const isDefault = systemPrompt === settings.systemPrompt;
  return (
    <aside className="drawer" id="chat-settings-drawer" aria-label="Chat settings" data-testid="chat-settings-drawer">
      <div className="drawer-head">
        <h2>Chat settings</h2>
        <button className="icon" aria-label="Close settings" onClick={onClose}>
          <X size={15} aria-hidden />
        </button>
      </div>
      <label className="field">
        System prompt of this chat
        <textarea
          data-testid="settings-system-prompt"
          rows={5}
          value={systemPrompt}
          placeholder="e.g. You are a concise assistant. Answer in English."
          onChange={(e) => onSystemPrompt(e.target.value)}
        />
        <span className="muted small" data-testid="settings-system-prompt-note">
          {isDefault ? "New chats start with this prompt too." : "Kept with this chat."}{" "}
          {!isDefault && (
            <button type="button" className="link" data-testid="settings-system-prompt-default" onClick={() => setSettings({ systemPrompt })}>
              Use it for new chats
            </button>
          )}
        </span>
      </label>
      <label className="field">
        Thinking
        <select data-testid="settings-effort" value={effort} onChange={(e) => setSettings({ effort: e.target.value as Effort })}>
          {EFFORTS.map((e) => (
            <option key={e.value} value={e.value}>
              {e.label}
            </option>
          ))}
        </select>
        <span className="muted small">Off answers at once; higher levels think longer before answering.</span>
      </label>
      <label className="field">
        Temperature {settings.temperature === null ? "(model default)" : settings.temperature.toFixed(1)}
        <input
          type="range"
          min={0}
          max={2}
          step={0.1}
          data-testid="settings-temperature"
          value={settings.temperature ?? 0.7}
          onChange={(e) => setSettings({ temperature: Number(e.target.value) })}
        />
        <span className="muted small">Lower is more focused, higher more varied.</span>
      </label>
      <label className="field">
        Maximum answer length (tokens)
        <input
          type="number"
          min={1}
          max={200000}
          data-testid="settings-max-tokens"
          value={settings.maxTokens ?? ""}
          placeholder="no limit"
          onChange={(e) => {
            const n = Number(e.target.value);
            setSettings({ maxTokens: e.target.value === "" || !Number.isInteger(n) || n < 1 ? null : Math.min(n, 200000) });
          }}
        />
        <span className="muted small">Thinking counts toward it.</span>
      </label>
      <button
        data-testid="settings-reset"
        onClick={() => {
          setSettings({ systemPrompt: "", temperature: null, maxTokens: null, effort: null });
          onSystemPrompt("");
        }}
      >
        Reset to defaults
      </button>
    </aside>
  );
}
