// The server's recent log lines, kept for the desktop window's log view, while still passing each line on.
import type { Log } from "../../core/log.js";
import type { LogLine } from "./contract.js";

export class LogBuffer {
  private readonly lines: LogLine[] = [];
  private seq = 0;
  private readonly listeners = new Set<(line: LogLine) => void>();

  constructor(
    private readonly next: Log = () => undefined,
    private readonly capacity = 1000,
  ) {}

  readonly log: Log = (level, message, inWindow) => {
    // The window shows its own words for a line that names a command or flag; the next log gets the line.
    this.lines.push({ seq: ++this.seq, at: Date.now(), level, message: inWindow ?? message });
    if (this.lines.length > this.capacity) this.lines.splice(0, this.lines.length - this.capacity);
    this.next(level, message);
    for (const listener of this.listeners) listener(this.lines.at(-1)!);
  };

  /** Calls `listener` with each new line; returns the function that stops it. */
  onLine(listener: (line: LogLine) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The newest line's seq (0 before the first). */
  lastSeq(): number {
    return this.seq;
  }

  /** The lines after `afterSeq` (all kept lines without it), oldest first. */
  since(afterSeq = 0): LogLine[] {
    return this.lines.filter((line) => line.seq > afterSeq);
  }
}
