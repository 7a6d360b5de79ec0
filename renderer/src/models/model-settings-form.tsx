// A model's own settings: its context (tokens per answer), answers at once, GPU layers and CPU threads, each
// automatic or a number, and the draft model speculation guesses with (another model file). Saving the loaded model's settings loads it again with them (a few seconds; running
// answers finish first); another model's apply the next time it loads.
import { useEffect, useState } from "react";
import type { ModelSettings } from "../../../server/features/console/contract";

type Field = Exclude<keyof ModelSettings, "draftModel">;

const FIELDS: Array<{ key: Field; label: string; hint: string; min: number }> = [
  { key: "contextSize", label: "Context (tokens per answer)", hint: "How much text the model reads at once: the conversation, files and the answer.", min: 512 },
  { key: "sequences", label: "Answers at once", hint: "Requests answered side by side; each needs its own context in memory.", min: 1 },
  { key: "gpuLayers", label: "GPU layers", hint: "Layers of the model on the GPU; 0 runs it on the CPU.", min: 0 },
  { key: "threads", label: "CPU threads", hint: "Threads the CPU uses for the model.", min: 1 },
];

export function ModelSettingsForm({
  file,
  settings,
  current,
  limits,
  loaded,
  busy,
  onSave,
  draftChoices = [],
}: {
  file: string;
  settings: ModelSettings;
  /** What the loaded model runs with now (automatic fields show it as their placeholder). */
  current: Partial<Record<Field, number | null>>;
  limits: { contextSize: number | null; gpuLayers: number | null; threads: number | null };
  loaded: boolean;
  busy: boolean;
  onSave: (settings: ModelSettings) => void;
  /** The other model files, any of which can be this one's draft model (it must be of the same family). */
  draftChoices?: string[];
}) {
  const text = (s: ModelSettings) => Object.fromEntries(FIELDS.map((f) => [f.key, s[f.key] === null ? "" : String(s[f.key])])) as Record<Field, string>;
  const [draft, setDraft] = useState(() => text(settings));
  const [draftModel, setDraftModel] = useState(settings.draftModel ?? "");
  useEffect(() => {
    setDraft(text(settings));
    setDraftModel(settings.draftModel ?? "");
  }, [settings]);
  const numbers = Object.fromEntries(FIELDS.map((f) => [f.key, draft[f.key].trim() === "" ? null : Number(draft[f.key])])) as Record<Field, number | null>;
  const parsed: ModelSettings = { ...numbers, draftModel: draftModel === "" ? null : draftModel };
  const invalid = FIELDS.filter((f) => numbers[f.key] !== null && (!Number.isInteger(numbers[f.key]) || numbers[f.key]! < f.min || (limits[f.key as keyof typeof limits] ?? Infinity) < numbers[f.key]!));
  const changed = FIELDS.some((f) => parsed[f.key] !== settings[f.key]) || parsed.draftModel !== (settings.draftModel ?? null);
  // A saved draft model no longer in the folder still shows (its load fails until it is changed).
  const choices = draftModel !== "" && !draftChoices.includes(draftModel) ? [...draftChoices, draftModel] : draftChoices;
  return (
    <form
      className="model-settings"
      data-testid="model-settings"
      data-file={file}
      onSubmit={(e) => {
        e.preventDefault();
        if (invalid.length === 0) onSave(parsed);
      }}
    >
      <div className="settings-grid">
        {FIELDS.map((f) => {
          const max = limits[f.key as keyof typeof limits] ?? undefined;
          return (
            <label key={f.key} className="field">
              {f.label}
              <input
                type="number"
                min={f.min}
                max={max}
                data-testid={`model-settings-${f.key}`}
                value={draft[f.key]}
                placeholder={current[f.key] != null ? `automatic (${current[f.key]})` : "automatic"}
                aria-invalid={invalid.includes(f) || undefined}
                onChange={(e) => setDraft({ ...draft, [f.key]: e.target.value })}
              />
              <span className="muted small">
                {f.hint}
                {max !== undefined ? ` At most ${max.toLocaleString("en-US")}${f.key === "contextSize" ? " (what the model was trained on)" : ""}.` : ""}
              </span>
            </label>
          );
        })}
        <label className="field">
          Draft model (speculation)
          <select data-testid="model-settings-draftModel" value={draftModel} onChange={(e) => setDraftModel(e.target.value)}>
            <option value="">None: guess from the conversation (prompt lookup)</option>
            {choices.map((c) => (
              <option key={c} value={c}>
                {c}
              </option>
            ))}
          </select>
          <span className="muted small">
            A smaller model of the same family (the same vocabulary) writes a few tokens ahead and this one checks them in one step: answers stay the
            same, and come faster where the small one guesses well.
          </span>
        </label>
      </div>
      <div className="toolbar">
        <button type="submit" className="primary" data-testid="model-settings-apply" disabled={busy || !changed || invalid.length > 0}>
          {loaded ? "Apply and reload the model" : "Save"}
        </button>
        <button type="button" data-testid="model-settings-automatic" disabled={busy || (FIELDS.every((f) => settings[f.key] === null) && !settings.draftModel)} onClick={() => onSave({ contextSize: null, sequences: null, gpuLayers: null, threads: null, draftModel: null })}>
          All automatic
        </button>
        <span className="muted small">Empty fields are automatic: sized to this computer's memory and cores when the model loads.</span>
      </div>
    </form>
  );
}
