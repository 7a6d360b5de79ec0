// Agent mode's choices above the message box: which files the agent may use (files attached to the task
// join them), what it does first, and at most how many steps it takes.
import { useWindow } from "../state/window-state";
import type { FirstStep } from "./use-agent-run";

export interface AgentChoices {
  picked: Set<string>;
  firstStep: FirstStep;
  maxSteps: number;
}

export function AgentOptions({ choices, onChange, disabled }: { choices: AgentChoices; onChange: (next: AgentChoices) => void; disabled: boolean }) {
  const files = useWindow((s) => s.files);
  const usable = files?.filter((f) => f.status !== "error") ?? null;
  const toggle = (id: string, on: boolean) => {
    const picked = new Set(choices.picked);
    if (on) picked.add(id);
    else picked.delete(id);
    onChange({ ...choices, picked });
  };
  return (
    <div className="agent-options" data-testid="agent-panel">
      <fieldset className="agent-files" data-testid="agent-files">
        <legend>Files the agent may use</legend>
        {usable === null ? (
          <p className="hint">Loading your files…</p>
        ) : usable.length === 0 ? (
          <p className="hint">No files yet: attach some to the task, or upload them on the Files page.</p>
        ) : (
          <>
            <p className="hint">{choices.picked.size === 0 ? "None picked: the agent may use all of them." : `${choices.picked.size} picked.`}</p>
            <ul>
              {usable.map((f) => (
                <li key={f.id}>
                  <label>
                    <input
                      type="checkbox"
                      data-testid="agent-file"
                      data-file-id={f.id}
                      checked={choices.picked.has(f.id)}
                      disabled={disabled}
                      onChange={(e) => toggle(f.id, e.target.checked)}
                    />{" "}
                    {f.filename}
                  </label>
                </li>
              ))}
            </ul>
          </>
        )}
      </fieldset>
      <div className="toolbar small">
        <label>
          First step{" "}
          <select data-testid="agent-first-step" value={choices.firstStep} disabled={disabled} onChange={(e) => onChange({ ...choices, firstStep: e.target.value as FirstStep })}>
            <option value="auto">Model decides</option>
            <option value="file_search">Search the files</option>
            <option value="list_files">List the files</option>
          </select>
        </label>
        <label>
          Max steps{" "}
          <input
            type="number"
            min={1}
            max={64}
            data-testid="agent-max-steps"
            value={choices.maxSteps}
            disabled={disabled}
            onChange={(e) => onChange({ ...choices, maxSteps: Math.min(64, Math.max(1, Number(e.target.value) || 1)) })}
          />
        </label>
      </div>
    </div>
  );
}
