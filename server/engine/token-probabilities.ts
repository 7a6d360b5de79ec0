// Log-probabilities of sampled tokens under the model, from what llama.cpp reports with each token.
//
// llama.cpp reports probabilities over the candidates its sampler chain left, after the chain changed them:
// token bias, penalties and the grammar mask first, then top-k / top-p / min-p truncation and the
// temperature. Greedy sampling (temperature 0) only picks the largest logit and changes nothing, so there
// the reported probabilities are the model's own softmax at temperature 1 over every token the request
// allows (measured: 303 candidates, the whole vocabulary of the test model). With a temperature T > 0 the
// reported p_i are softmax(l_i / T) over the kept candidates; T · ln p_i recovers each logit up to one
// constant, so the temperature is undone exactly and the values are the model's temperature-1
// probabilities renormalised over the kept candidates (see docs/api.md, "Glassbox").
import type { Token } from "node-llama-cpp";

/** What llama.cpp is asked to report with each sampled token (nothing, unless the request scores tokens). */
export interface TokenMetadata {
  confidence?: boolean;
  probabilities?: boolean;
}

export interface SampledToken {
  token: Token;
  /** The chosen token's probability as llama.cpp reports it (after the sampler chain). */
  confidence?: number;
  /** Every remaining candidate's probability, most likely first. */
  probabilities?: Map<Token, number>;
  /**
   * Already at temperature 1, from an engine that reports the model's own log-probabilities (an upstream
   * server): taken as they are.
   */
  score?: TokenScore;
  /**
   * Speculation (slot-loop.ts), on the tokens of a step that checked guessed tokens: `drafted`, on the
   * step's first token, how many guesses it checked (0 on the others); `accepted`, the token is a guess the
   * model agreed with.
   */
  speculation?: { drafted: number; accepted: boolean };
}

export interface TokenScore {
  logprob: number;
  top: Array<{ token: Token; logprob: number }>;
}

/** What llama.cpp must report for a token to be scored: the whole list is needed for top > 0 or T > 0. */
export function metadataFor(top: number, temperature: number | undefined): { confidence: true; probabilities: boolean } {
  return { confidence: true, probabilities: top > 0 || (temperature ?? 0) > 0 };
}

/** The sampled token's log-probability and the `top` most likely tokens', at temperature 1 (see above). */
export function scoreToken(sampled: SampledToken, temperature: number | undefined, top: number): TokenScore {
  if (sampled.score) return { logprob: Math.min(0, sampled.score.logprob), top: sampled.score.top.slice(0, top) };
  const t = temperature ?? 0;
  if (!(t > 0)) {
    const p = sampled.confidence ?? sampled.probabilities?.get(sampled.token) ?? 0;
    const alternatives: TokenScore["top"] = [];
    if (top > 0 && sampled.probabilities)
      for (const [token, q] of sampled.probabilities) {
        if (alternatives.length >= top || !(q > 0)) break;
        alternatives.push({ token, logprob: Math.min(0, Math.log(q)) });
      }
    return { logprob: Math.min(0, Math.log(p)), top: alternatives };
  }
  const probabilities = sampled.probabilities;
  if (!probabilities) return { logprob: Math.min(0, Math.log(sampled.confidence ?? 0)), top: [] };
  // Logits up to a constant; the map is sorted by probability, which the temperature does not reorder.
  const logits: Array<[Token, number]> = [];
  let max = Number.NEGATIVE_INFINITY;
  for (const [token, q] of probabilities) {
    if (!(q > 0)) continue;
    const l = t * Math.log(q);
    logits.push([token, l]);
    if (l > max) max = l;
  }
  let sum = 0;
  for (const [, l] of logits) sum += Math.exp(l - max);
  const logZ = max + Math.log(sum);
  let chosen = Number.NEGATIVE_INFINITY;
  for (const [token, l] of logits)
    if (token === sampled.token) {
      chosen = l - logZ;
      break;
    }
  return {
    logprob: Math.min(0, chosen),
    top: logits.slice(0, top).map(([token, l]) => ({ token, logprob: Math.min(0, l - logZ) })),
  };
}
