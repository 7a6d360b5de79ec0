// Words for the server's states, as a window user reads them (never the raw `no_model`).
export function modelStateLabel(state: string): string {
  switch (state) {
    case "ready":
      return "Ready";
    case "loading":
      return "Loading…";
    case "no_model":
      return "No model loaded";
    case "error":
      return "The model failed to load";
    default:
      return state.replace(/_/g, " ");
  }
}

export function downloadPhaseLabel(phase: string): string {
  switch (phase) {
    case "resolving":
      return "Starting…";
    case "downloading":
      return "Downloading";
    case "verifying":
      return "Checking the file…";
    case "done":
      return "Downloaded";
    case "failed":
      return "Failed";
    case "cancelled":
      return "Stopped";
    default:
      return phase;
  }
}
