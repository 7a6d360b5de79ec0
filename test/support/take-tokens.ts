// The first n tokens of an evaluation (the slot loop's or node-llama-cpp's), then it is stopped as a
// generation stops: for the tests that compare the two token for token and state for state.
import type { Token } from "node-llama-cpp";

export async function take(tokens: AsyncIterable<{ token: Token }>, n: number, each?: (taken: number) => void): Promise<Token[]> {
  const out: Token[] = [];
  for await (const { token } of tokens) {
    out.push(token);
    each?.(out.length);
    if (out.length === n) break;
  }
  return out;
}
