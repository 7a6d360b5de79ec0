// The model answering now and the hardware: its state and settings in use, whether coding agents fit its
// context (and the button that makes them fit), its own settings, and the GPU choice.
import type { GpuPreference, ModelSettings, StatusView } from "../../../server/features/console/contract";
import { consoleApi } from "../console-client";
import { formatBytes } from "../format";
import { modelStateLabel } from "../labels";
import { ContextNote } from "./context-note";
import type { Act } from "./downloads";
import { ModelSettingsForm } from "./model-settings-form";

const GPU_CHOICES: GpuPreference[] = ["auto", "cuda", "vulkan", "metal", "cpu"];

export function ModelStatusCard({
  status,
  busy,
  act,
  onSaveSettings,
  modelFiles = [],
}: {
  status: StatusView | null;
  busy: boolean;
  act: Act;
  onSaveSettings: (file: string | null, settings: ModelSettings) => void;
  /** The models folder's files (the loaded model's draft model is one of the others). */
  modelFiles?: string[];
}) {
  const model = status?.model;
  return (
    <div className="card grid" data-testid="model-status">
      <div>
        <h2>Loaded now</h2>
        <p data-testid="model-loaded">
          {model?.file ? (
            <>
              <strong>{model.name ?? model.file}</strong> <span className="muted">({model.file})</span>
            </>
          ) : (
            <em>none</em>
          )}
        </p>
        <p className="muted" data-testid="model-state">
          {model ? modelStateLabel(model.state) : "…"}
          {model?.loadingFile ? ` · loading ${model.loadingFile}` : ""}
          {model?.contextSize ? ` · context ${model.contextSize} tokens` : ""}
          {model?.sequences && model.sequences > 1 ? ` · ${model.sequences} answers at once` : ""}
          {model?.threads ? ` · ${model.threads} thread${model.threads > 1 ? "s" : ""}` : ""}
          {model?.gpuLayers !== null && model?.gpuLayers !== undefined ? ` · ${model.gpuLayers} layers on the GPU` : ""}
        </p>
        {model?.vision && (
          <p className="muted" data-testid="model-vision-process">
            Sees images: its vision process runs{" "}
            {model.vision.devices.join(", ") === "CPU" ? "on the CPU" : `on ${model.vision.devices.join(", ")} with ${model.vision.gpuLayers} layers of the model`}
            {model.vision.note ? ` (${model.vision.note})` : ""}.
          </p>
        )}
        {model && <ContextNote model={model} busy={busy || model.state !== "ready"} onSetContext={(contextSize, sequences) => onSaveSettings(null, { ...model.settings, contextSize, ...(sequences ? { sequences } : {}) })} />}
        {model?.error && <p className="error">{model.error}</p>}
      </div>
      <div>
        <h2>GPU</h2>
        <p data-testid="gpu-backend">
          {status?.gpu ? (
            <>
              <strong>{status.gpu.backend === "cpu" ? "CPU only" : status.gpu.backend.toUpperCase()}</strong>
              {status.gpu.devices.length > 0 && ` · ${status.gpu.devices.join(", ")}`}
              {status.gpu.vramTotalBytes > 0 && ` · ${formatBytes(status.gpu.vramFreeBytes)} free of ${formatBytes(status.gpu.vramTotalBytes)}`}
              {status.gpu.build === "local" && (status.gpu.localBuild === "addon" ? " · prebuilt llama.cpp with svc's addon built on this machine" : " · llama.cpp built on this machine")}
              {status.gpu.build === "prebuilt" && " · prebuilt llama.cpp"}
            </>
          ) : (
            "detecting…"
          )}
        </p>
        <label>
          Use{" "}
          <select
            data-testid="gpu-choice"
            value={status?.gpuPreference ?? "auto"}
            disabled={busy || !status}
            onChange={(e) => void act(() => consoleApi.setGpuPreference(e.target.value as GpuPreference))}
          >
            {GPU_CHOICES.map((g) => (
              <option key={g} value={g}>
                {g === "auto" ? "Best available (auto)" : g === "cpu" ? "CPU only" : g.toUpperCase()}
              </option>
            ))}
          </select>
        </label>
        <p className="muted">{status ? `${status.cpuCores} CPU cores · ${formatBytes(status.ramFreeBytes)} of ${formatBytes(status.ramTotalBytes)} memory free` : ""}</p>
      </div>
      {model?.file && model.state === "ready" && (
        <details className="settings-panel" id="model-settings" data-testid="loaded-model-settings" open={Object.values(model.settings).some((v) => v !== null) || undefined}>
          <summary>Settings of {model.name ?? model.file}</summary>
          <ModelSettingsForm
            file={model.file}
            settings={model.settings}
            current={{ contextSize: model.contextSize, sequences: model.sequences, gpuLayers: model.gpuLayers, threads: model.threads }}
            limits={{ contextSize: model.trainContextSize, gpuLayers: model.totalLayers, threads: null }}
            loaded
            busy={busy}
            draftChoices={modelFiles.filter((f) => f !== model.file)}
            onSave={(settings) => onSaveSettings(null, settings)}
          />
        </details>
      )}
    </div>
  );
}
