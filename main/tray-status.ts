// What the tray says: the model's state, where clients reach the server, and why the port moved if it did.
// Pure, so the wording is tested without Electron.

export interface TrayState {
  /** Null while the server is still starting. */
  model: { state: "no_model" | "loading" | "ready" | "error"; name: string | null; error: string | null } | null;
  baseUrl: string | null;
  portNote: string | null;
  lanExposed: boolean;
}

export interface TrayText {
  tooltip: string;
  /** Informational menu lines, in order (shown disabled above the actions). */
  lines: string[];
}

function modelLine(model: TrayState["model"]): string {
  if (!model) return "Starting the server…";
  switch (model.state) {
    case "ready":
      return `Model: ${model.name ?? "ready"}`;
    case "loading":
      return model.name ? `Model: loading (was ${model.name})` : "Model: loading…";
    case "error":
      return `Model: error${model.error ? ` (${truncate(model.error, 60)})` : ""}`;
    default:
      return "Model: none (open the window to choose one)";
  }
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export function trayText(state: TrayState): TrayText {
  const lines = [modelLine(state.model)];
  if (state.baseUrl) lines.push(`Base URL: ${state.baseUrl}${state.lanExposed ? " (also on the LAN)" : ""}`);
  if (state.portNote) lines.push(truncate(state.portNote, 90));
  const tooltip = ["svc-desktop", ...lines.slice(0, 2)].join("\n");
  return { tooltip, lines };
}
