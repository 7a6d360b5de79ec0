// The loaded model's context setting, from the chat: saved with the model (its own settings), which loads
// again with it; what happens meanwhile, or why it did not load, is the chat's notice.
import { useCallback, useEffect, useState } from "react";
import type { ModelSettings } from "../../../server/features/console/contract";
import { consoleApi } from "../console-client";
import { applyToWindow } from "../state/window-state";

const AUTOMATIC: ModelSettings = { contextSize: null, sequences: null, gpuLayers: null, threads: null };

export function useModelContext(settings: ModelSettings | undefined) {
  const [notice, setNotice] = useState<string | null>(null);
  const setContext = useCallback(
    async (figure: number): Promise<boolean> => {
      setNotice(`Loading the model again with a context of ${figure.toLocaleString("en-US")} tokens…`);
      try {
        applyToWindow({ status: await consoleApi.setModelSettings(null, { ...(settings ?? AUTOMATIC), contextSize: figure }) });
        setNotice(null);
        return true;
      } catch (err) {
        setNotice((err as Error).message);
        return false;
      }
    },
    [settings],
  );
  return { notice, setNotice, setContext };
}

/** Esc runs `onEscape` while `active` (and nothing else took the key, such as an open overlay). */
export function useEscape(active: boolean, onEscape: () => void): void {
  useEffect(() => {
    if (!active) return;
    const onKey = (event: KeyboardEvent) => {
      if (event.key !== "Escape" || event.defaultPrevented) return;
      event.preventDefault();
      onEscape();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [active, onEscape]);
}
