// The ingest worker thread: runs extractions so PDF parsing, rendering and OCR stay off the server's event loop.
import { parentPort } from "node:worker_threads";
import { AppError } from "../core/errors.js";
import { extractContent } from "./registry.js";
import type { IngestOptions, IngestSource } from "./types.js";

export interface WorkerTask {
  id: number;
  source: IngestSource;
  options: IngestOptions;
}

export type WorkerReply =
  | { id: number; ok: true; result: Awaited<ReturnType<typeof extractContent>>; maxRssBytes: number }
  | { id: number; ok: false; error: { kind: string; message: string; code?: string; app: boolean } };

parentPort?.on("message", (task: WorkerTask) => {
  extractContent(task.source, task.options).then(
    (result) => parentPort!.postMessage({ id: task.id, ok: true, result, maxRssBytes: process.resourceUsage().maxRSS * 1024 } satisfies WorkerReply),
    (err: unknown) => {
      const app = err instanceof AppError;
      parentPort!.postMessage({
        id: task.id,
        ok: false,
        error: { kind: app ? err.kind : "internal", message: (err as Error)?.message ?? String(err), code: app ? err.code : undefined, app },
      } satisfies WorkerReply);
    },
  );
});
