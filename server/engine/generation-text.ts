// What a generation shows (generation.ts's state machine feeds it the decoded pieces): the answer's text,
// matched against the stop sequences and the tool-call marker on the visible answer only; the thought's text,
// with leading whitespace dropped and trailing whitespace held until the thought goes on; and, where the
// request asks for them, each answer token's probabilities, released with the text delta that completes the
// token's text (so a client never sees a token's logprob before its text).
import type { LlamaModel, Token } from "node-llama-cpp";
import type { TokenLogprob } from "../core/inference.js";
import { TextTriggerMatcher, type TriggerHit } from "./text-matcher.js";
import { scoreToken, type SampledToken } from "./token-probabilities.js";
import type { EngineEvent, ScoredToken } from "./types.js";

export interface AnswerMatch {
  events: EngineEvent[];
  /** What the answer's text reached: a stop sequence (with the one) or the tool-call marker. */
  hit: TriggerHit<"stop" | "tool"> | null;
}

export class VisibleText {
  /** The answer as shown. */
  text = "";
  /** The thought as shown. */
  reasoning = "";
  /** The answer tokens' probabilities, as released. */
  readonly logprobs: TokenLogprob[] = [];
  /** Every scored token (answer and tool calls): glassbox confidence. */
  readonly scored: ScoredToken[] = [];
  private textStarted = false;
  private reasoningWhitespace = "";
  /** Answer tokens waiting for their text to be emitted, with where their text ends in the raw answer. */
  private readonly unreleased: Array<{ entry: TokenLogprob; end: number }> = [];
  /** Entries whose text has been emitted, waiting for the next text.delta. */
  private released: TokenLogprob[] = [];
  /** Raw answer characters pushed into the matcher, and emitted by it. */
  private answerIn = 0;
  private answerOut = 0;
  private readonly answerMatcher: TextTriggerMatcher<"stop" | "tool">;
  private readonly reasoningMatcher: TextTriggerMatcher<"close"> | null;

  constructor(
    private readonly model: LlamaModel,
    private readonly probe: boolean,
    options: { stopSequences: readonly string[]; toolTrigger: string | null; thoughtClose: string | null },
  ) {
    this.answerMatcher = new TextTriggerMatcher<"stop" | "tool">([
      ...options.stopSequences.map((s) => ({ kind: "stop" as const, text: s })),
      ...(options.toolTrigger !== null ? [{ kind: "tool" as const, text: options.toolTrigger }] : []),
    ]);
    this.reasoningMatcher = options.thoughtClose !== null ? new TextTriggerMatcher([{ kind: "close" as const, text: options.thoughtClose }]) : null;
  }

  /** Scores a sampled token; its entry (with alternatives) where it is an answer token, to pass to answer(). */
  score(sampled: SampledToken, temperature: number | undefined, topN: number, inAnswer: boolean): TokenLogprob | null {
    const score = scoreToken(sampled, temperature, topN);
    this.scored.push({ text: this.model.detokenize([sampled.token], false), logprob: score.logprob });
    return inAnswer ? { ...this.describe(sampled.token, score.logprob), top: score.top.map((t) => this.describe(t.token, t.logprob)) } : null;
  }

  /** Answer text through the stop-sequence and tool-call matcher; `entry` is its token's probabilities. */
  answer(piece: string, entry: TokenLogprob | null = null): AnswerMatch {
    if (entry) this.unreleased.push({ entry, end: this.answerIn + piece.length });
    this.answerIn += piece.length;
    const m = this.answerMatcher.push(piece);
    return { events: this.emitText(m.emit), hit: m.hit };
  }

  /** The answer's held-back text (a possible stop sequence's start), at its end. */
  flushAnswer(): EngineEvent[] {
    return this.emitText(this.answerMatcher.flush());
  }

  /** Thought text through the close-marker matcher: its events, whether the marker came, and the text after it. */
  thought(piece: string): { events: EngineEvent[]; closed: boolean; rest: string } {
    const m = this.reasoningMatcher!.push(piece);
    const events = this.emitReasoning(m.emit);
    if (m.hit) this.reasoningWhitespace = "";
    return { events, closed: m.hit !== null, rest: m.hit ? m.rest : "" };
  }

  /** The thought ends without its marker (the budget): its held-back text, and nothing after. */
  closeThought(): EngineEvent[] {
    const events = this.emitReasoning(this.reasoningMatcher!.flush());
    this.reasoningWhitespace = "";
    return events;
  }

  /** Probabilities released but not yet sent (tokens whose text was all whitespace before the answer began). */
  takeReleased(): TokenLogprob[] {
    const out = this.released;
    this.released = [];
    this.logprobs.push(...out);
    return out;
  }

  private emitText(chunk: string): EngineEvent[] {
    if (this.probe) {
      this.answerOut += chunk.length;
      while (this.unreleased.length > 0 && this.unreleased[0]!.end <= this.answerOut) this.released.push(this.unreleased.shift()!.entry);
    }
    if (!this.textStarted) {
      chunk = chunk.trimStart();
      if (chunk === "") return [];
      this.textStarted = true;
    }
    if (chunk === "") return [];
    this.text += chunk;
    if (this.released.length === 0) return [{ type: "text.delta", text: chunk }];
    return [{ type: "text.delta", text: chunk, logprobs: this.takeReleased() }];
  }

  private emitReasoning(chunk: string): EngineEvent[] {
    // Leading whitespace is dropped; trailing whitespace waits to see whether the thought goes on.
    let body = this.reasoningWhitespace + chunk;
    if (this.reasoning === "") body = body.trimStart();
    const trimmed = body.trimEnd();
    this.reasoningWhitespace = body.slice(trimmed.length);
    if (trimmed === "") return [];
    this.reasoning += trimmed;
    return [{ type: "reasoning.delta", text: trimmed }];
  }

  /** Special tokens (an alternative may be the end of the turn) are shown as written, e.g. <|im_end|>. */
  private describe(token: Token, logprob: number): Omit<TokenLogprob, "top"> {
    const text = this.model.detokenize([token], true);
    return { token: text, bytes: [...Buffer.from(text, "utf8")], logprob };
  }
}
