// Turns a stream of tokens into a stream of text. A multi-byte character can be split over several byte
// tokens; such a tail decodes to U+FFFD until its last byte arrives, so it is held back until then.
import type { LlamaModel, Token } from "node-llama-cpp";

const REPLACEMENT = "\uFFFD";
/** A UTF-8 character has at most 4 bytes; give up waiting after that many tokens. */
const MAX_PENDING = 4;

export class TokenTextDecoder {
  private pending: Token[] = [];
  private context: Token[] = [];

  constructor(private readonly model: LlamaModel) {}

  push(token: Token): string {
    this.pending.push(token);
    const text = this.model.detokenize(this.pending, true, this.context);
    if (text.endsWith(REPLACEMENT) && this.pending.length < MAX_PENDING) return "";
    this.context = [...this.context, ...this.pending].slice(-8);
    this.pending = [];
    return text;
  }

  /** Resets the decoder for a new segment; `context` tokens precede the next ones (for leading-space rules). */
  reset(context: Token[] = []): void {
    this.pending = [];
    this.context = context.slice(-8);
  }
}
