// Keeps the sequences that generate at the same time in one llama.cpp batch, for the phases node-llama-cpp
// evaluates (grammars, token probabilities); plain-text steps go through the step loop, which keeps its
// batches together by itself (step-loop.ts), and leave the round meanwhile (`away`).
//
// node-llama-cpp decodes in one batch whatever sequences have queued a token when its decode loop looks.
// It looks right after the last sequence of a batch got its sampled token, while that sequence is still on
// its way (through the generator layers) to queue its next one, so one sequence missed every batch: four
// streams were decoded as batches of three, a third more decodes than needed.
//
// So a generating sequence asks for its next token only once every member of the round has its token
// (`arrive` waits for the others), and then they all ask at once and are dispatched together. A member
// that holds its token for LATE_MS without asking for the next one (its consumer stalled, say) is left
// out until it asks, so a stalled stream delays the others once, by LATE_MS, not on every token.
//
// Alone (one sequence generating), nothing waits: its decode is dispatched at once, without the turn of
// the event loop node-llama-cpp would wait for other sequences to join.

/** How long the others wait for a member that has its token but has not asked for the next one. */
export const LATE_MS = 4;

type State = "idle" | "requested" | "processing" | "parked" | "late";

export class DecodeRound {
  private readonly members = new Set<RoundMember>();
  /** @internal Members waiting in arrive(). */
  parked = 0;
  /** Times a member was left out of a batch for coming back late (diagnostics). */
  lateCount = 0;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = 0;

  /** A generation's handle; leave() it when the generation ends, however it ends. */
  member(): RoundMember {
    return new RoundMember(this);
  }

  /** Sequences generating tokens now (not those still reading their prompt). */
  get size(): number {
    return this.members.size;
  }

  /**
   * node-llama-cpp's `batching.dispatchSchedule`: alone, decode now; with others, once the promise jobs
   * running now are done. The released members reach node-llama-cpp's queue through promise jobs only, so
   * by then they have all queued; a nextTick queued from a promise job runs after the whole cascade (Node
   * drains the microtask queue before the nextTick queue). Unlike node-llama-cpp's setImmediate, this
   * dispatches before the I/O callbacks of this turn (the HTTP writes of the tokens just made), which then
   * run while the batch decodes.
   */
  readonly schedule = (dispatch: () => void): void => {
    if (this.members.size <= 1) dispatch();
    else process.nextTick(dispatch);
  };

  /** @internal */
  join(m: RoundMember): void {
    this.members.add(m);
  }

  /** @internal */
  leave(m: RoundMember): void {
    if (this.members.delete(m)) this.settle();
  }

  /** @internal Releases the parked members once no other member is on its way; marks the late ones. */
  settle(): void {
    let parked = 0;
    let waiting = 0;
    let nextLate = Infinity;
    const now = performance.now();
    for (const m of this.members) {
      if (m.state === "processing" && now - m.since >= LATE_MS) {
        m.state = "late";
        this.lateCount++;
      }
      if (m.state === "parked") parked++;
      else if (m.state === "requested") waiting++;
      else if (m.state === "processing") {
        waiting++;
        nextLate = Math.min(nextLate, m.since + LATE_MS);
      }
    }
    if (parked > 0 && waiting === 0) {
      this.clearTimer();
      for (const m of this.members) if (m.state === "parked") m.wake();
      return;
    }
    if (parked === 0 || nextLate === Infinity) return this.clearTimer();
    if (this.timer !== null && this.timerAt <= nextLate) return;
    this.clearTimer();
    this.timerAt = nextLate;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.settle();
    }, Math.max(0, nextLate - now));
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

export class RoundMember {
  /** @internal */
  state: State = "idle";
  /** @internal When it got its current token. */
  since = 0;
  private joined = false;
  private left = false;
  private resume: (() => void) | null = null;

  constructor(private readonly round: DecodeRound) {}

  /** The sequence asks for a decode (its prompt, or its next token). */
  requested(): void {
    this.state = "requested";
  }

  /** The sequence got a sampled token; from its first token on it is a member of the round. */
  received(): void {
    if (this.left) return;
    if (!this.joined) {
      this.joined = true;
      this.round.join(this);
    }
    this.state = "processing";
    this.since = performance.now();
    if (this.round.parked > 0) this.round.settle();
  }

  /** Resolves when the sequence may ask for its next token: once every other member has its token too. */
  arrive(): Promise<void> | undefined {
    if (this.state !== "processing" && this.state !== "late") return undefined;
    if (this.round.size <= 1) return undefined;
    this.state = "parked";
    this.round.parked++;
    const wait = new Promise<void>((resolve) => (this.resume = resolve));
    this.round.settle();
    return wait;
  }

  /**
   * The sequence generates on the step loop for now, whose batches keep themselves together (each token
   * decoded ahead goes in the batch after the one that sampled it): the round does not wait for it. Its
   * next paced request brings it back.
   */
  away(): void {
    this.wake();
    this.state = "idle";
    if (this.joined && !this.left) this.round.settle();
  }

  /** The generation ended; a token that still arrives for it does not bring it back into the round. */
  leave(): void {
    this.wake();
    this.state = "idle";
    this.left = true;
    this.round.leave(this);
  }

  /** @internal */
  wake(): void {
    if (this.state === "parked") {
      this.state = "requested";
      this.round.parked--;
    }
    const resume = this.resume;
    this.resume = null;
    resume?.();
  }
}

/**
 * Wraps a sequence's token iterator so that each next token is asked for through the round. The first
 * request of an evaluation (a prompt or a forced feed) is not held back unless the member already holds a
 * token (a phase change in the middle of generation).
 */
export function pacedTokens<T>(inner: AsyncGenerator<T, void, unknown>, member: RoundMember): AsyncGenerator<T, void, unknown> {
  const received = (result: IteratorResult<T, void>) => {
    if (!result.done) member.received();
    return result;
  };
  const pull = () => {
    member.requested();
    return inner.next().then(received);
  };
  const iterator: AsyncGenerator<T, void, unknown> = {
    next: () => {
      const wait = member.arrive();
      return wait ? wait.then(pull) : pull();
    },
    return: (value?: void | PromiseLike<void>) => inner.return(value as void),
    throw: (error?: unknown) => inner.throw(error),
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}
