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

/** A speculation mode as words: "prompt-lookup" is "Prompt lookup"; one not known yet, its own name. */
export function speculationModeLabel(mode: string): string {
  if (mode === "prompt-lookup") return "Prompt lookup";
  if (mode === "draft-model") return "Draft model";
  if (mode === "off") return "Off";
  const words = mode.replace(/[-_]/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/**
 * The Server page's line on speculative decoding (issue 44), or null where there is nothing to say: no model
 * loaded, a model served upstream, or a server that does not report it. "Prompt lookup, 73% of 1,234 drafted
 * tokens accepted"; "Draft model Qwen2.5 0.5B, 61% of 980 drafted tokens accepted"; "Prompt lookup, no drafts
 * yet"; "Off".
 */
export function speculationLabel(
  spec: { mode: string; draftModel?: string | null; draftedTokens: number; acceptedTokens: number; acceptanceRate?: number | null } | null | undefined,
): string | null {
  if (!spec) return null;
  const mode = `${speculationModeLabel(spec.mode)}${spec.mode === "draft-model" && spec.draftModel ? ` ${spec.draftModel}` : ""}`;
  if (spec.mode === "off") return mode;
  const rate = typeof spec.acceptanceRate === "number" ? spec.acceptanceRate : spec.draftedTokens > 0 ? spec.acceptedTokens / spec.draftedTokens : null;
  if (rate === null || !(spec.draftedTokens > 0)) return `${mode}, no drafts yet`;
  const drafted = spec.draftedTokens.toLocaleString("en-US");
  // Rounded, but never to 100% while some were rejected, nor to 0% while some were accepted.
  const percent = rate > 0 && rate < 0.01 ? "under 1" : String(Math.min(Math.round(rate * 100), rate < 1 ? 99 : 100));
  return `${mode}, ${percent}% of ${drafted} drafted token${spec.draftedTokens === 1 ? "" : "s"} accepted`;
}
