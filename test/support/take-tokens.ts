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

/**
 * Up to n sampled tokens as the slot loop yields them (each with what speculation says of it); with a model,
 * up to its end of generation too (included). Then the evaluation is stopped as a generation stops.
 */
export async function takeSampled<T extends { token: Token }>(tokens: AsyncIterable<T>, n: number, model?: { isEogToken(token: Token): boolean }): Promise<T[]> {
  const out: T[] = [];
  for await (const t of tokens) {
    out.push(t);
    if (out.length === n || model?.isEogToken(t.token)) break;
  }
  return out;
}
