// Chooses which of the context's sequences serves a prompt. Waiting and counting are the scheduler's job
// (server/pipeline/scheduler.ts): it never lets more runs in than there are sequences, so a free one is
// always there. What is left here is the prefix cache: reuse what a sequence already holds, and do not
// throw away a valuable cache for a small gain. Sessions (a request's session_id) add affinity: a session's
// next request gets the sequence that served it last, and other requests (other sessions' or none) leave a
// session's sequence alone while a sequence no other session holds is free.
import type { LlamaContext, LlamaContextSequence, Token } from "node-llama-cpp";
import { AppError } from "../core/errors.js";

export interface SequenceLease {
  sequence: LlamaContextSequence;
  /** Prompt tokens already in the sequence's cache, kept as they are. */
  cachedTokens: number;
  release(): void;
}

/** What a slot offers a prompt: tokens it shares, tokens it holds, and when it was last used. */
export interface SlotView {
  shared: number;
  held: number;
  lastUsed: number;
  /** The slot last served this request's session (affinity). */
  ownSession?: boolean;
  /** The slot holds another session's conversation. */
  otherSession?: boolean;
}

/**
 * How much a cached token that would be erased is worth against a prompt token evaluated now: a cache is
 * only worth something if a later request continues it, which is likely but not certain.
 */
const ERASED_TOKEN_WEIGHT = 0.5;

/**
 * Picks the slot with the lowest cost: prompt tokens to evaluate now, plus the cached tokens that would be
 * erased (weighted); ties go to the least recently used. So an empty sequence wins over a 44k-token cache that
 * shares only 57 tokens with the prompt, while a cache the prompt continues is reused.
 */
export function pickSlot(promptLength: number, slots: readonly SlotView[]): number {
  // Affinity: the session's own sequence when it is free; then any sequence no other session holds; only
  // when every free sequence holds another session's conversation is one of those reused.
  const own = slots.findIndex((slot) => slot.ownSession);
  if (own >= 0) return own;
  const unclaimed = slots.some((slot) => !slot.otherSession);
  let best = -1;
  let bestCost = Number.POSITIVE_INFINITY;
  slots.forEach((slot, i) => {
    if (unclaimed && slot.otherSession) return;
    const shared = Math.min(slot.shared, slot.held);
    const cost = promptLength - shared + ERASED_TOKEN_WEIGHT * (slot.held - shared);
    if (cost < bestCost || (cost === bestCost && slot.lastUsed < slots[best]!.lastUsed)) {
      best = i;
      bestCost = cost;
    }
  });
  return best;
}

interface Slot {
  sequence: LlamaContextSequence;
  busy: boolean;
  lastUsed: number;
  /** The session whose conversation the sequence holds (its last request's session_id). */
  session: string | null;
}

export class SequencePool {
  private readonly slots: Slot[];
  private tick = 0;
  private closed = false;

  constructor(context: LlamaContext, count: number) {
    this.slots = Array.from({ length: count }, () => ({ sequence: context.getSequence(), busy: false, lastUsed: 0, session: null as string | null }));
  }

  get size(): number {
    return this.slots.length;
  }

  /** A free sequence for this prompt, its reusable prefix kept and the rest of its cache erased. */
  async acquire(tokens: Token[], sessionId?: string): Promise<SequenceLease> {
    if (this.closed) throw new AppError("unavailable", "The model is being unloaded.", { code: "model_loading", retryAfter: 5 });
    const idle = this.slots.filter((s) => !s.busy);
    // The scheduler admits at most one run per sequence; reaching this is a bug, not a busy server.
    if (idle.length === 0) throw new AppError("internal", "No free sequence: more runs reached the engine than it has sequences.");
    const views = idle.map((s) => ({
      shared: s.sequence.nextTokenIndex === 0 ? 0 : s.sequence.compareContextTokens(tokens).firstDifferentIndex,
      held: s.sequence.nextTokenIndex,
      lastUsed: s.lastUsed,
      ownSession: sessionId !== undefined && s.session === sessionId,
      otherSession: s.session !== null && s.session !== sessionId,
    }));
    const choice = pickSlot(tokens.length, views);
    const slot = idle[choice]!;
    slot.busy = true;
    slot.session = sessionId ?? null;
    // At least one prompt token must be evaluated to get logits for the first generated token.
    const keep = Math.min(views[choice]!.shared, Math.max(0, tokens.length - 1));
    try {
      if (slot.sequence.nextTokenIndex > keep) await slot.sequence.eraseContextTokenRanges([{ start: keep, end: slot.sequence.nextTokenIndex }]);
    } catch (err) {
      slot.busy = false;
      throw err;
    }
    let released = false;
    return {
      sequence: slot.sequence,
      cachedTokens: keep,
      release: () => {
        if (released) return;
        released = true;
        slot.busy = false;
        slot.lastUsed = ++this.tick;
      },
    };
  }

  close(): void {
    this.closed = true;
  }
}
