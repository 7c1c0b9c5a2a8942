/**
 * Choosing the next token from a language model's scores at one position: softmax(logits /
 * temperature) restricted to the k most likely tokens, drawn with a uniform number the caller
 * gives (a seeded stream, so a seed repeats a text). Temperature 0, or k = 1, is the arg-max.
 */

/** How the next token is drawn. */
export interface SamplingOptions {
  /** divides the logits: below 1 sharpens the distribution, above 1 flattens it; 0 always takes the most likely */
  temperature: number;
  /** only the k most likely tokens can be drawn (absent: every token) */
  topK?: number;
}

/** Checks the options: errors name the command-line option that sets each. */
export function checkSampling(o: SamplingOptions): void {
  if (!(Number.isFinite(o.temperature) && o.temperature >= 0))
    throw new Error(`--temperature: expected a number ≥ 0 (0: always the most likely token), got ${o.temperature}`);
  if (o.topK !== undefined && !(Number.isInteger(o.topK) && o.topK >= 1))
    throw new Error(`--top-k: expected a positive integer, got ${o.topK}`);
}

/** The index of the largest score (the lowest one among equals). */
export function argmax(logits: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  return best;
}

/**
 * The token drawn from `logits` (one score per token) with `o`, `u` a uniform number in [0, 1).
 * Non-finite scores are an error: a model that gives them has diverged.
 */
export function sampleToken(logits: ArrayLike<number>, o: SamplingOptions, u: number): number {
  const v = logits.length;
  if (v === 0) throw new Error('sampleToken: no scores to choose from');
  for (let i = 0; i < v; i++) {
    if (!Number.isFinite(logits[i]!))
      throw new Error(`the model's score of token ${i} is ${logits[i]}; the checkpoint's weights are not usable`);
  }
  const k = Math.min(o.topK ?? v, v);
  if (o.temperature === 0 || k === 1) return argmax(logits);
  // the k most likely, ties to the lower id (a stable order on every machine)
  const order = Array.from({ length: v }, (_, i) => i).sort((a, b) => logits[b]! - logits[a]! || a - b);
  const top = order.slice(0, k);
  // softmax over the k, with the largest subtracted so no exp overflows
  const max = logits[top[0]!]! / o.temperature;
  const weights = top.map((i) => Math.exp(logits[i]! / o.temperature - max));
  let rest = u * weights.reduce((a, b) => a + b, 0);
  for (let j = 0; j < k; j++) {
    rest -= weights[j]!;
    if (rest < 0) return top[j]!;
  }
  // rounding left a sliver past the last weight: the last token that can be drawn
  for (let j = k - 1; j >= 0; j--) if (weights[j]! > 0) return top[j]!;
  return top[0]!;
}
