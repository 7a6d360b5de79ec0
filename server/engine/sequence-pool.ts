// Hands out the context's sequences. A request waits (FIFO) while all are busy, then gets the idle sequence
// whose cached tokens share the longest prefix with its prompt: that prefix is reused, not evaluated again.
import type { LlamaContext, LlamaContextSequence, Token } from "node-llama-cpp";
import { AppError } from "../core/errors.js";

export interface SequenceLease {
  sequence: LlamaContextSequence;
  /** Prompt tokens already in the sequence's cache, kept as they are. */
  cachedTokens: number;
  release(): void;
}

interface Slot {
  sequence: LlamaContextSequence;
  busy: boolean;
  lastUsed: number;
}

interface Waiter {
  tokens: Token[];
  resolve: (lease: SequenceLease) => void;
  reject: (err: unknown) => void;
  signal: AbortSignal;
  onAbort: () => void;
}

export class SequencePool {
  private readonly slots: Slot[];
  private readonly waiters: Waiter[] = [];
  private tick = 0;
  private closed = false;

  constructor(context: LlamaContext, count: number) {
    this.slots = Array.from({ length: count }, () => ({ sequence: context.getSequence(), busy: false, lastUsed: 0 }));
  }

  get size(): number {
    return this.slots.length;
  }

  get active(): number {
    return this.slots.filter((s) => s.busy).length;
  }

  get queued(): number {
    return this.waiters.length;
  }

  acquire(tokens: Token[], signal: AbortSignal): Promise<SequenceLease> {
    if (this.closed) return Promise.reject(new AppError("unavailable", "The model is being unloaded.", { retryAfter: 5 }));
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<SequenceLease>((resolve, reject) => {
      const waiter: Waiter = {
        tokens,
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(signal.reason);
        },
      };
      signal.addEventListener("abort", waiter.onAbort, { once: true });
      this.waiters.push(waiter);
      this.dispatch();
    });
  }

  /** Rejects everyone waiting; leases in use stay valid until released. */
  close(): void {
    this.closed = true;
    for (const w of this.waiters.splice(0)) {
      w.signal.removeEventListener("abort", w.onAbort);
      w.reject(new AppError("unavailable", "The model is being unloaded.", { retryAfter: 5 }));
    }
  }

  private dispatch(): void {
    while (this.waiters.length > 0) {
      const idle = this.slots.filter((s) => !s.busy);
      if (idle.length === 0) return;
      const waiter = this.waiters.shift()!;
      waiter.signal.removeEventListener("abort", waiter.onAbort);
      const { slot, shared } = this.pickSlot(idle, waiter.tokens);
      slot.busy = true;
      void this.prepare(slot, waiter, shared);
    }
  }

  private pickSlot(idle: Slot[], tokens: Token[]): { slot: Slot; shared: number } {
    let best = idle[0]!;
    let bestShared = -1;
    for (const slot of idle) {
      const shared = slot.sequence.compareContextTokens(tokens).firstDifferentIndex;
      // Longest shared prefix wins; on a tie take the least recently used, keeping warm caches for others.
      if (shared > bestShared || (shared === bestShared && slot.lastUsed < best.lastUsed)) {
        best = slot;
        bestShared = shared;
      }
    }
    return { slot: best, shared: Math.max(0, bestShared) };
  }

  private async prepare(slot: Slot, waiter: Waiter, shared: number): Promise<void> {
    // At least one prompt token must be evaluated to get logits for the first generated token.
    const keep = Math.min(shared, Math.max(0, waiter.tokens.length - 1));
    try {
      const seq = slot.sequence;
      if (seq.nextTokenIndex > keep) await seq.eraseContextTokenRanges([{ start: keep, end: seq.nextTokenIndex }]);
      let released = false;
      waiter.resolve({
        sequence: seq,
        cachedTokens: keep,
        release: () => {
          if (released) return;
          released = true;
          slot.busy = false;
          slot.lastUsed = ++this.tick;
          this.dispatch();
        },
      });
    } catch (err) {
      slot.busy = false;
      waiter.reject(err);
      this.dispatch();
    }
  }
}
