// The window's model downloads: each a background pull of the models service with its progress as the window
// shows it (DownloadView), cancelled or dismissed by id. ConsoleService answers the window's download calls here.
import { AppError } from "../../core/errors.js";
import { RECOMMENDED_SPEECH_MODEL } from "../models/model-sources.js";
import type { ModelsService, PullEvent } from "../models/models-service.js";
import { kindOf } from "./console-views.js";
import type { DownloadView, ModelKind, WindowTopic } from "./contract.js";
import type { LogBuffer } from "./log-buffer.js";

interface DownloadJob {
  view: DownloadView;
  abort: AbortController;
}

function isFinished(view: DownloadView): boolean {
  return view.phase === "done" || view.phase === "failed" || view.phase === "cancelled";
}

export class ModelDownloads {
  private readonly jobs = new Map<string, DownloadJob>();
  private nextJob = 1;

  /** `touch`: the window's topics that a download's change makes stale (WindowFeed.touch). */
  constructor(
    private readonly models: ModelsService,
    private readonly logs: LogBuffer,
    private readonly touch: (...topics: WindowTopic[]) => void,
  ) {}

  /** Starts a download in the background; its progress is read with list(). */
  start(input: { source: string; sha256?: string; kind?: ModelKind }): DownloadView {
    const kind = kindOf(input);
    let source = String(input?.source ?? "").trim();
    // As `svc models pull --speech` without a source: the recommended speech model.
    if (source === "" && kind === "speech") source = RECOMMENDED_SPEECH_MODEL.source;
    if (source === "") throw new AppError("invalid_request", "Give a model source: an hf: URI or an https:// URL of a .gguf file.", { code: "invalid_model_source" });
    this.models.checkSource(source, kind);
    if ([...this.jobs.values()].some((j) => j.view.source === source && j.view.kind === kind && !isFinished(j.view)))
      throw new AppError("conflict", `${source} is already downloading.`, { code: "download_in_progress" });
    // A retry or resume replaces the ended download of the same source in the list.
    for (const [id, old] of this.jobs) if (old.view.source === source && old.view.kind === kind) this.jobs.delete(id);
    const job: DownloadJob = {
      abort: new AbortController(),
      view: {
        id: `dl_${this.nextJob++}`,
        source,
        kind,
        phase: "resolving",
        file: null,
        downloadedBytes: 0,
        totalBytes: 0,
        bytesPerSecond: 0,
        etaSeconds: null,
        error: null,
        startedAt: Date.now(),
      },
    };
    this.jobs.set(job.view.id, job);
    this.touch("downloads");
    const onEvent = (event: PullEvent) => {
      this.touch("downloads");
      // "done" is set when the pull has returned (its lock released, the line logged), not by its last event:
      // a view that says done before then raced the log line and the lock (seen in the console test).
      if (event.phase !== "done") job.view.phase = event.phase;
      if ("file" in event) job.view.file = event.file;
      if (event.phase === "downloading") {
        job.view.downloadedBytes = event.progress.downloadedBytes;
        job.view.totalBytes = event.progress.totalBytes;
        job.view.bytesPerSecond = event.progress.bytesPerSecond;
        job.view.etaSeconds = event.progress.etaSeconds;
      }
    };
    this.models.pull(source, { sha256: input.sha256, signal: job.abort.signal, onEvent, kind }).then(
      (result) => {
        job.view.phase = "done";
        job.view.file = result.file;
        job.view.downloadedBytes = job.view.totalBytes = result.sizeBytes;
        job.view.etaSeconds = 0;
        const made = kind === "speech" ? " (now the speech model)" : " (now the active model)";
        this.logs.log("info", `Downloaded ${result.file}${result.madeActive ? made : ""}.`);
        this.touch("downloads", "models", "firstRun", "status");
      },
      (err: unknown) => {
        if (job.abort.signal.aborted) job.view.phase = "cancelled";
        else {
          job.view.phase = "failed";
          job.view.error = (err as Error).message;
          this.logs.log("error", `Download of ${source} failed: ${(err as Error).message}`);
        }
        this.touch("downloads", "models");
      },
    );
    return { ...job.view };
  }

  list(): DownloadView[] {
    return [...this.jobs.values()].map((j) => ({ ...j.view }));
  }

  cancel(id: string): DownloadView {
    const job = this.jobs.get(String(id));
    if (!job) throw new AppError("not_found", `No download with id '${id}'.`, { code: "download_not_found" });
    if (!isFinished(job.view)) {
      job.abort.abort();
      job.view.phase = "cancelled";
    }
    this.touch("downloads", "models");
    return { ...job.view };
  }

  dismiss(id: string): DownloadView[] {
    const job = this.jobs.get(String(id));
    if (!job) throw new AppError("not_found", `No download with id '${id}'.`, { code: "download_not_found" });
    if (!isFinished(job.view)) throw new AppError("conflict", "The download is still running; cancel it first.", { code: "download_in_progress" });
    this.jobs.delete(job.view.id);
    this.touch("downloads");
    return this.list();
  }
}
