// The window's one event stream: what it shows that changes without the window asking (the model's state,
// downloads, the models on disk, the window account's files and batches, the log), pushed to it by the main
// process. The window calls watch(version) over the console bridge; the call returns at once with what
// changed since that version, or waits until something does (a long poll over IPC: no timer in the window,
// and no HTTP request, so nothing of it lands in the audit trail).
//
// Topics are read again when something says they may have changed (touch): a load or switch, a download's
// progress, a request to the API ending, a log line. Where the server has no event for a change (a batch's
// counts as its worker goes, a file's extraction ending), the feed reads those topics once a second, in this
// process, while such work is under way and someone is watching.
import type { WindowState, WindowTopic, WindowUpdate } from "./contract.js";

export type TopicReaders = { [K in WindowTopic]: () => Promise<WindowState[K]> };

export interface WindowFeedOptions {
  /** True while work is under way that changes topics without an event (returns the topics to read). */
  backgroundWork?: () => WindowTopic[];
  /** How long a watch waits for a change before it returns empty-handed. Default 25 s. */
  maxWaitMs?: number;
  /** How long touches are gathered before the topics are read. Default 60 ms. */
  settleMs?: number;
  /** How often background work is looked at while someone watches. Default 1 s. */
  backgroundMs?: number;
  /**
   * How long one topic's read may take before the feed goes on without it (the window keeps what it showed of
   * that topic, and the topic is read again once the slow read settles). Default 5 s. Reads are one at a time,
   * so without a bound one read that never settles would stop every topic for good.
   */
  readTimeoutMs?: number;
  onError?: (topic: WindowTopic, err: unknown) => void;
}

interface TopicState {
  version: number;
  json: string;
  value: unknown;
}

const LATE = Symbol("late");

export class WindowFeed {
  private version = 0;
  private readonly topics = new Map<WindowTopic, TopicState>();
  private readonly dirty = new Set<WindowTopic>();
  private flushTimer: NodeJS.Timeout | null = null;
  private chain: Promise<void> = Promise.resolve();
  private backgroundTimer: NodeJS.Timeout | null = null;
  private waiters = new Set<() => void>();
  /** A topic's read still under way (one at a time: a slow one is waited on again, not started again). */
  private readonly reading = new Map<WindowTopic, Promise<unknown>>();
  private started: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly readers: TopicReaders,
    private readonly options: WindowFeedOptions = {},
  ) {}

  /** Says these topics may have changed: they are read again shortly (touches close together are read once). */
  touch(...topics: WindowTopic[]): void {
    if (this.closed || this.started === null) return;
    for (const topic of topics) this.dirty.add(topic);
    this.flushTimer ??= setTimeout(() => {
      this.flushTimer = null;
      void this.flush();
    }, this.options.settleMs ?? 60);
  }

  /** What changed after `since` (everything for 0), at once, or when it changes, or empty after a while. */
  async watch(since: number): Promise<WindowUpdate> {
    this.started ??= this.readAll();
    await this.started;
    if (since <= 0 || since > this.version) return this.collect(0);
    const ready = this.collect(since);
    if (Object.keys(ready.changed).length > 0 || this.closed) return ready;
    await new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, this.options.maxWaitMs ?? 25_000);
      timer.unref?.();
      this.waiters.add(wake);
      this.updateBackground();
    });
    return this.collect(since);
  }

  close(): void {
    this.closed = true;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    if (this.backgroundTimer) clearInterval(this.backgroundTimer);
    for (const wake of [...this.waiters]) wake();
  }

  private collect(since: number): WindowUpdate {
    const changed: Record<string, unknown> = {};
    for (const [topic, state] of this.topics) if (state.version > since) changed[topic] = state.value;
    return { version: this.version, changed: changed as WindowUpdate["changed"] };
  }

  private async readAll(): Promise<void> {
    for (const topic of Object.keys(this.readers) as WindowTopic[]) this.dirty.add(topic);
    await this.flush();
  }

  private flush(): Promise<void> {
    // One read at a time; touches that come meanwhile are read by the next.
    const run = this.chain.then(async () => {
      const topics = [...this.dirty];
      this.dirty.clear();
      let changed = false;
      for (const topic of topics) {
        let value: unknown;
        try {
          value = await this.read(topic);
        } catch (err) {
          this.options.onError?.(topic, err);
          continue;
        }
        const json = JSON.stringify(value);
        if (this.topics.get(topic)?.json === json) continue;
        this.topics.set(topic, { version: ++this.version, json, value });
        changed = true;
      }
      if (changed) for (const wake of [...this.waiters]) wake();
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** A topic's value, or an error once its read has taken readTimeoutMs (it is read again when that read settles). */
  private async read(topic: WindowTopic): Promise<unknown> {
    let pending = this.reading.get(topic);
    if (pending === undefined) {
      const started = this.readers[topic]();
      pending = started;
      this.reading.set(topic, started);
      const done = () => {
        if (this.reading.get(topic) === started) this.reading.delete(topic);
      };
      started.then(done, done);
    }
    const ms = this.options.readTimeoutMs ?? 5000;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<typeof LATE>((resolve) => {
      timer = setTimeout(() => resolve(LATE), ms);
      timer.unref?.();
    });
    try {
      const outcome = await Promise.race([pending, late]);
      if (outcome !== LATE) return outcome;
      const again = () => this.touch(topic);
      pending.then(again, again);
      throw new Error(`Reading it took more than ${ms} ms; the window keeps what it showed until the read ends.`);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Reads the topics of work under way once a second, while someone waits for a change. */
  private updateBackground(): void {
    if (this.backgroundTimer !== null || this.closed || this.options.backgroundWork === undefined) return;
    this.backgroundTimer = setInterval(() => {
      if (this.waiters.size === 0) return;
      const topics = this.options.backgroundWork?.() ?? [];
      if (topics.length > 0) this.touch(...topics);
    }, this.options.backgroundMs ?? 1000);
    this.backgroundTimer.unref?.();
  }
}
