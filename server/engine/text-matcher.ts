// Finds trigger strings (stop sequences, the end-of-thought marker, the tool-call marker) in streamed text.
// Text that might be the start of a trigger is held back until the next chunk decides, so a stop sequence
// never leaks into the output, whatever the chunk boundaries.

export interface TriggerHit<K extends string> {
  kind: K;
  trigger: string;
}

export interface MatchResult<K extends string> {
  /** Text that is certainly not part of a trigger, safe to emit. */
  emit: string;
  /** The first trigger found, if any. Text after it is in `rest` and is no longer watched. */
  hit: TriggerHit<K> | null;
  rest: string;
}

export class TextTriggerMatcher<K extends string> {
  private held = "";

  constructor(private readonly triggers: ReadonlyArray<{ kind: K; text: string }>) {
    for (const t of triggers) if (t.text.length === 0) throw new Error("empty trigger");
  }

  push(text: string): MatchResult<K> {
    const buffer = this.held + text;
    this.held = "";
    let best: { index: number; kind: K; text: string } | null = null;
    for (const t of this.triggers) {
      const index = buffer.indexOf(t.text);
      if (index >= 0 && (best === null || index < best.index || (index === best.index && t.text.length > best.text.length)))
        best = { index, kind: t.kind, text: t.text };
    }
    if (best !== null) {
      return {
        emit: buffer.slice(0, best.index),
        hit: { kind: best.kind, trigger: best.text },
        rest: buffer.slice(best.index + best.text.length),
      };
    }
    const keep = this.partialSuffixLength(buffer);
    this.held = buffer.slice(buffer.length - keep);
    return { emit: buffer.slice(0, buffer.length - keep), hit: null, rest: "" };
  }

  /** Text held back as a possible trigger start; call at the end of the stream to emit it. */
  flush(): string {
    const out = this.held;
    this.held = "";
    return out;
  }

  get holding(): string {
    return this.held;
  }

  /** Length of the longest suffix of `buffer` that is a proper prefix of some trigger. */
  private partialSuffixLength(buffer: string): number {
    let longest = 0;
    for (const t of this.triggers) {
      const max = Math.min(t.text.length - 1, buffer.length);
      for (let len = max; len > longest; len--) {
        if (buffer.endsWith(t.text.slice(0, len))) {
          longest = len;
          break;
        }
      }
    }
    return longest;
  }
}
