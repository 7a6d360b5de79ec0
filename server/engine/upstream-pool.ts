// The upstream replicas and their slots, and which slot a generation runs on.
//
// Each replica has as many slots as it says (/props total_slots): that is its concurrency. A generation
// leases one slot (id_slot on every request), so the prompt cache it builds stays where the next turn looks
// for it. Prefix affinity: a request goes to the free slot the local engine's rule picks (sequence-pool.ts's
// pickSlot: its session's slot, else the least prompt to read plus cache erased), over all replicas' slots.
// Round-robin (affinity off) is kept for the bench's comparison.
//
// Health: a replica that fails a request (or its periodic /health) is drained: its generations in flight end
// with a clean 503 (their signals abort), new ones go to the others, and it is probed every second until its
// /health answers again, when its slots come back (re-read from /props).
import { AppError } from "../core/errors.js";
import { pickSlot } from "./sequence-pool.js";
import { UpstreamClient, type UpstreamTarget } from "./upstream-client.js";

export interface Replica {
  client: UpstreamClient;
  slots: number;
  contextSize: number;
  modelPath: string;
  healthy: boolean;
  /** Why it is drained, while it is. */
  error: string | null;
  /** Generations running on it: aborted when it is drained. */
  running: Set<AbortController>;
}

interface Slot {
  replica: Replica;
  id: number;
  busy: boolean;
  /** The tokens the slot held after its last generation. */
  tokens: readonly number[];
  /** How many of them were that generation's prompt. */
  promptLength: number;
  session: string | undefined;
  lastUsed: number;
}

export interface SlotLease {
  replica: Replica;
  slot: number;
  /** Aborted when the replica is drained. */
  signal: AbortSignal;
  /** Frees the slot; `tokens`: what it holds now (for the next request's affinity). */
  release(tokens: readonly number[]): void;
}

const HEALTH_INTERVAL_MS = 5000;
const PROBE_INTERVAL_MS = 1000;

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

export class ReplicaPool {
  readonly replicas: Replica[] = [];
  private slots: Slot[] = [];
  private waiters: Array<() => void> = [];
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private turn = 0;
  private clock = 0;
  private readonly listeners = new Set<() => void>();

  constructor(
    targets: UpstreamTarget[],
    private readonly options: { affinity?: boolean; log?: (level: "info" | "warn" | "error", message: string) => void } = {},
  ) {
    for (const target of targets)
      this.replicas.push({ client: new UpstreamClient(target), slots: 0, contextSize: 0, modelPath: "", healthy: false, error: "not contacted yet", running: new Set() });
  }

  /** Reads every replica's /props; fails only when none answers. */
  async start(): Promise<void> {
    await Promise.all(this.replicas.map((r) => this.refresh(r)));
    if (!this.replicas.some((r) => r.healthy))
      throw new AppError("unavailable", `No upstream answered: ${this.replicas.map((r) => `${r.client.url} (${r.error})`).join("; ")}.`, { code: "upstream_unavailable" });
    this.timer = setInterval(() => void this.check(), HEALTH_INTERVAL_MS);
    this.timer.unref();
    for (const replica of this.replicas) if (!replica.healthy) void this.probe(replica);
  }

  /** Slots that can run now: the healthy replicas' together. */
  capacity(): number {
    return this.replicas.reduce((n, r) => n + (r.healthy ? r.slots : 0), 0);
  }

  /** The smallest context per slot among the healthy replicas (every request must fit wherever it goes). */
  contextSize(): number {
    const sizes = this.replicas.filter((r) => r.healthy).map((r) => r.contextSize);
    return sizes.length > 0 ? Math.min(...sizes) : Math.min(...this.replicas.map((r) => r.contextSize || Number.MAX_SAFE_INTEGER));
  }

  /** Called when capacity() may have changed (a replica drained or back). */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Waits for a free slot on a healthy replica, the best for this prompt, and leases it. */
  async acquire(prompt: readonly number[], sessionId: string | undefined, signal: AbortSignal): Promise<SlotLease> {
    for (;;) {
      if (this.closed) throw new AppError("unavailable", "The upstream engine is closing.", { retryAfter: 5 });
      if (signal.aborted) throw new AppError("unavailable", "The request was cancelled.");
      if (this.capacity() === 0)
        throw new AppError("unavailable", `Every upstream is down: ${this.replicas.map((r) => `${r.client.url} (${r.error})`).join("; ")}.`, {
          code: "upstream_unavailable",
          retryAfter: 2,
        });
      const slot = this.pick(prompt, sessionId);
      if (slot) return this.lease(slot, sessionId, prompt.length);
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener("abort", done);
          resolve();
        };
        this.waiters.push(done);
        signal.addEventListener("abort", done, { once: true });
      });
    }
  }

  /** Drains a replica after a failure: its running generations are aborted, and it is probed until healthy. */
  drain(replica: Replica, reason: string): void {
    if (!replica.healthy) return;
    replica.healthy = false;
    replica.error = reason;
    this.options.log?.("error", `Upstream ${replica.client.url} drained: ${reason} New requests go to the others; it is checked every second.`);
    for (const controller of replica.running) controller.abort(new AppError("unavailable", `The upstream ${replica.client.url} failed during this request: ${reason}`, { code: "upstream_unavailable", retryAfter: 2 }));
    this.slots = this.slots.filter((s) => s.replica !== replica || s.busy);
    this.changed();
    void this.probe(replica);
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    for (const wake of this.waiters.splice(0)) wake();
  }

  private pick(prompt: readonly number[], sessionId: string | undefined): Slot | null {
    const free = this.slots.filter((s) => !s.busy && s.replica.healthy);
    if (free.length === 0) return null;
    if (this.options.affinity === false) {
      // Round-robin over the replicas, then any free slot there.
      for (let i = 0; i < this.replicas.length; i++) {
        const replica = this.replicas[(this.turn + i) % this.replicas.length]!;
        const slot = free.find((s) => s.replica === replica);
        if (slot) {
          this.turn = (this.turn + i + 1) % this.replicas.length;
          return slot;
        }
      }
      return null;
    }
    // The local engine's choice (sequence-pool.ts's pickSlot): the least prompt to read now plus cache erased,
    // a session's own slot first; every replica's slots are candidates, so a prefix goes where its cache is.
    // Between equal costs (empty slots, say) pickSlot takes the least recently used: ranked first by how busy
    // its replica is, so concurrent new conversations spread over the replicas.
    const busyOn = new Map(this.replicas.map((r) => [r, this.slots.filter((s) => s.replica === r && s.busy).length]));
    const views = free.map((slot) => ({
      shared: commonPrefix(slot.tokens, prompt),
      held: slot.tokens.length,
      lastUsed: busyOn.get(slot.replica)! * 1e9 + slot.lastUsed,
      ownSession: sessionId !== undefined && slot.session === sessionId,
      otherSession: slot.session !== undefined && slot.session !== sessionId,
    }));
    // Replicas have many slots: a prompt that continues no slot's conversation (no slot's last prompt is a
    // prefix of it) takes an empty slot while there is one, rather than evict another conversation to reuse a
    // shared system prompt (the rule for a laptop's few sequences); the system prompt is then read once per slot.
    const continues = views.some((v, i) => v.ownSession || (free[i]!.promptLength > 0 && v.shared >= free[i]!.promptLength - 1));
    if (!continues && views.some((v) => v.held === 0)) {
      const empty = views.map((v, i) => ({ v, i })).filter(({ v }) => v.held === 0);
      return free[empty.reduce((a, b) => (b.v.lastUsed < a.v.lastUsed ? b : a)).i]!;
    }
    const choice = pickSlot(prompt.length, views);
    return free[choice] ?? null;
  }

  private lease(slot: Slot, sessionId: string | undefined, promptLength: number): SlotLease {
    slot.busy = true;
    const controller = new AbortController();
    const replica = slot.replica;
    replica.running.add(controller);
    let released = false;
    return {
      replica,
      slot: slot.id,
      signal: controller.signal,
      release: (tokens) => {
        if (released) return;
        released = true;
        replica.running.delete(controller);
        slot.busy = false;
        slot.tokens = tokens;
        slot.promptLength = Math.min(promptLength, tokens.length);
        slot.session = sessionId;
        slot.lastUsed = ++this.clock;
        for (const wake of this.waiters.splice(0)) wake();
      },
    };
  }

  /** Reads a replica's /props; on success it serves with that many slots. */
  private async refresh(replica: Replica): Promise<void> {
    try {
      const props = await replica.client.props();
      replica.slots = props.slots;
      replica.contextSize = props.contextSize;
      replica.modelPath = props.modelPath;
      // Slots still busy from before a drain keep their entries; the rest start afresh.
      const kept = this.slots.filter((s) => s.replica === replica && s.busy);
      this.slots = this.slots.filter((s) => s.replica !== replica).concat(kept);
      for (let id = 0; id < props.slots; id++)
        if (!kept.some((s) => s.id === id)) this.slots.push({ replica, id, busy: false, tokens: [], promptLength: 0, session: undefined, lastUsed: 0 });
      replica.healthy = true;
      replica.error = null;
    } catch (err) {
      replica.healthy = false;
      replica.error = (err as Error).message;
    }
  }

  private async check(): Promise<void> {
    for (const replica of this.replicas)
      if (replica.healthy && !(await replica.client.healthy())) this.drain(replica, "its /health did not answer.");
  }

  private async probe(replica: Replica): Promise<void> {
    while (!this.closed && !replica.healthy) {
      await new Promise((resolve) => setTimeout(resolve, PROBE_INTERVAL_MS).unref());
      if (this.closed) return;
      if (await replica.client.healthy()) {
        await this.refresh(replica);
        if (replica.healthy) {
          this.options.log?.("info", `Upstream ${replica.client.url} is healthy again (${replica.slots} slot(s)).`);
          this.changed();
          for (const wake of this.waiters.splice(0)) wake();
        }
      }
    }
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}
