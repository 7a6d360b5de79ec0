// Download progress for a terminal: a bar redrawn in place on a TTY, plain lines (every 10% and at least
// every 30 s) when the output is a file or a pipe. The formatting is pure; the renderer only decides when.
import { formatBytes } from "../../core/format.js";
import type { DownloadProgress } from "../../engine/model-downloader.js";

export { formatBytes };

export function formatDuration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) return "--";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

export function percentOf(progress: DownloadProgress): number | null {
  if (progress.totalBytes <= 0) return null;
  return Math.min(100, Math.floor((progress.downloadedBytes / progress.totalBytes) * 100));
}

/** "1.25 GB / 2.50 GB  12.3 MB/s  ETA 1m 42s" (sizes only when the total is unknown). */
export function formatProgressFigures(progress: DownloadProgress): string {
  const size =
    progress.totalBytes > 0 ? `${formatBytes(progress.downloadedBytes)} / ${formatBytes(progress.totalBytes)}` : formatBytes(progress.downloadedBytes);
  const speed = progress.bytesPerSecond > 0 ? `${formatBytes(progress.bytesPerSecond)}/s` : "-- /s";
  return `${size}  ${speed}  ETA ${formatDuration(progress.etaSeconds)}`;
}

/** A bar of `width` cells: "[#########-----------]". */
export function formatBar(percent: number | null, width: number): string {
  const cells = Math.max(1, width);
  const filled = percent === null ? 0 : Math.round((percent / 100) * cells);
  return `[${"#".repeat(filled)}${"-".repeat(cells - filled)}]`;
}

/** The whole progress line; the bar shrinks to fit the terminal and disappears when it cannot. */
export function formatProgressLine(progress: DownloadProgress, columns = 80): string {
  const percent = percentOf(progress);
  const text = `${percent === null ? " ?" : String(percent).padStart(3)}%  ${formatProgressFigures(progress)}`;
  const room = columns - text.length - 2;
  if (room < 10) return text;
  return `${formatBar(percent, Math.min(30, room - 1))} ${text}`;
}

export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export class ProgressRenderer {
  private lastDraw = 0;
  private lastLine = "";
  private lastPercentStep = -1;
  private drawn = false;

  constructor(
    private readonly stream: ProgressStream,
    private readonly options: { now?: () => number; redrawMs?: number; plainEveryMs?: number } = {},
  ) {}

  update(progress: DownloadProgress): void {
    const now = (this.options.now ?? Date.now)();
    if (this.stream.isTTY) {
      if (now - this.lastDraw < (this.options.redrawMs ?? 100)) return;
      this.lastDraw = now;
      const line = formatProgressLine(progress, this.stream.columns || 80);
      this.stream.write(`\r${line}\x1b[K`);
      this.drawn = true;
      return;
    }
    const percent = percentOf(progress);
    const step = percent === null ? -1 : Math.floor(percent / 10);
    const due = now - this.lastDraw >= (this.options.plainEveryMs ?? 30_000);
    if (step <= this.lastPercentStep && !due) return;
    const line = `  ${percent === null ? "?" : percent}%  ${formatProgressFigures(progress)}`;
    if (line === this.lastLine) return;
    this.lastPercentStep = Math.max(step, this.lastPercentStep);
    this.lastDraw = now;
    this.lastLine = line;
    this.stream.write(`${line}\n`);
  }

  /** Ends the bar's line so what follows starts on a fresh one. */
  end(): void {
    if (this.drawn) this.stream.write("\n");
    this.drawn = false;
  }
}
