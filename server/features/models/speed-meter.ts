// Download speed over the last few seconds, and the time left at that speed. The library's own figure
// averages over a fixed 10-second window from the start, so it reads low for the first seconds.

export class SpeedMeter {
  private samples: Array<{ at: number; bytes: number }> = [];

  constructor(private readonly windowMs = 5_000) {}

  /** Records the bytes downloaded so far at time `at` (ms); returns the current estimate. */
  add(bytes: number, at: number): { bytesPerSecond: number; etaSeconds: (total: number) => number | null } {
    const last = this.samples.at(-1);
    // Progress that went backwards (a retried chunk) restarts the window.
    if (last && bytes < last.bytes) this.samples = [];
    this.samples.push({ at, bytes });
    while (this.samples.length > 2 && at - this.samples[1]!.at >= this.windowMs) this.samples.shift();
    const first = this.samples[0]!;
    const seconds = (at - first.at) / 1000;
    const bytesPerSecond = seconds >= 0.2 ? Math.max(0, (bytes - first.bytes) / seconds) : 0;
    return {
      bytesPerSecond,
      etaSeconds: (total) => (total > 0 && bytesPerSecond > 0 ? Math.max(0, (total - bytes) / bytesPerSecond) : null),
    };
  }
}
