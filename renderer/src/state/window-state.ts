// The window's one store of what the main process pushes (console-service's watch: the model's state,
// downloads, models, the window account's files and batches, warm start, the log's position). Pages subscribe
// to the part they show by selector; nothing in the window polls.
import type { DownloadView, FirstRunView, ModelsView, ServerInfo, StatusView, WarmStartView } from "../../../server/features/console/contract";
import type { FileOut, MessageBatch } from "../../../server/features/console/wire";
import { consoleApi, isDownloadRunning } from "../console-client";
import { batchStage, fileStage, putFirst } from "./racing-answers";
import { createStore, useStore } from "./store";

export interface WindowStoreState {
  info: ServerInfo | null;
  status: StatusView | null;
  downloads: DownloadView[];
  firstRun: FirstRunView | null;
  models: ModelsView | null;
  files: FileOut[] | null;
  batches: MessageBatch[] | null;
  warmStart: WarmStartView | null;
  logSeq: number;
  /** Why the window has lost its main process, while it has. */
  bridgeError: string | null;
}

export const windowStore = createStore<WindowStoreState>({
  info: null,
  status: null,
  downloads: [],
  firstRun: null,
  models: null,
  files: null,
  batches: null,
  warmStart: null,
  logSeq: 0,
  bridgeError: null,
});

export function useWindow<S>(select: (state: WindowStoreState) => S, equal?: (a: S, b: S) => boolean): S {
  return useStore(windowStore, select, equal);
}

let running = false;

/** Follows the main process's event stream for as long as the window is open (once per window). */
export function startWindowFeed(): void {
  if (running) return;
  running = true;
  void (async () => {
    let version = 0;
    let wait = 500;
    for (;;) {
      try {
        const update = await consoleApi.watch(version);
        windowStore.set({ ...update.changed, bridgeError: null });
        version = update.version;
        wait = 500;
      } catch (err) {
        windowStore.set({ bridgeError: (err as Error).message });
        await new Promise((resolve) => setTimeout(resolve, wait));
        wait = Math.min(wait * 2, 10_000);
      }
    }
  })();
}

/** The server's addresses, once the stream has brought them (a file may be dropped as the window opens). */
export function serverInfo(): Promise<ServerInfo> {
  const known = windowStore.get().info;
  if (known) return Promise.resolve(known);
  return new Promise((resolve) => {
    const stop = windowStore.subscribe(() => {
      const info = windowStore.get().info;
      if (!info) return;
      stop();
      resolve(info);
    });
  });
}

/** Puts what an action returned into the store at once (the stream brings it too, a moment later). */
export function applyToWindow(patch: Partial<Omit<WindowStoreState, "bridgeError">>): void {
  windowStore.set(patch);
}

/** An uploaded file, first in the window's list (unless the stream already has it further along). */
export function putFileInWindow(file: FileOut): void {
  windowStore.set((s) => ({ files: putFirst(s.files, file, fileStage) }));
}

/** A created or canceled batch, first in the window's list (unless the stream already has it further along). */
export function putBatchInWindow(batch: MessageBatch): void {
  windowStore.set((s) => ({ batches: putFirst(s.batches, batch, batchStage) }));
}

/** Takes a deleted file or batch out of the window's list at once. */
export function dropFromWindow(list: "files" | "batches", id: string): void {
  windowStore.set((s) => (list === "files" ? { files: (s.files ?? []).filter((f) => f.id !== id) } : { batches: (s.batches ?? []).filter((b) => b.id !== id) }));
}

/** The language model's downloads (the chat and the first-run offer follow those, not a speech model's). */
export function llmDownloads(state: WindowStoreState): DownloadView[] {
  return state.downloads.filter((d) => d.kind !== "speech");
}

/** The first-run offer: only while no model is loaded or loading, and no download is under way. */
export function firstRunOffer(state: WindowStoreState): FirstRunView | null {
  const model = state.status?.model.state;
  if (!state.firstRun?.needsModel || model === "ready" || model === "loading") return null;
  return llmDownloads(state).some(isDownloadRunning) ? null : state.firstRun;
}
