/**
 * Context windows (DeepSpeech's `n_context`): frame t is presented as the concatenation of frames
 * t − C … t + C, frames outside the utterance being zeros. The order within a row is time-major, as
 * DeepSpeech's overlapping-window convolution lays it out: out[t][(k + C)·F + f] = x[t + k][f].
 * Stacking multiplies memory by 2C + 1, so it is done when a batch is gathered, not when loading.
 */

/** Values per stacked frame. */
export function contextSize(featureSize: number, context: number): number {
  return featureSize * (2 * context + 1);
}

/**
 * Writes the stacked frames of one utterance (`frames` rows of `featureSize` in `src`) into `out` at
 * `outOffset`: `frames` rows of contextSize(featureSize, context) values. Allocates when `out` is absent.
 */
export function stackContext(
  src: Float32Array,
  frames: number,
  featureSize: number,
  context: number,
  out?: Float32Array,
  outOffset = 0,
): Float32Array {
  if (!Number.isInteger(context) || context < 0)
    throw new Error(`stackContext: the context must be a whole number ≥ 0, got ${context}`);
  const width = contextSize(featureSize, context);
  const dst = out ?? new Float32Array(frames * width);
  if (dst.length < outOffset + frames * width)
    throw new Error(`stackContext: the output holds ${dst.length - outOffset} values, ${frames}×${width} are needed`);
  for (let t = 0; t < frames; t++) {
    const row = outOffset + t * width;
    for (let k = -context; k <= context; k++) {
      const at = row + (k + context) * featureSize;
      const s = t + k;
      if (s < 0 || s >= frames) {
        dst.fill(0, at, at + featureSize);
        continue;
      }
      const from = s * featureSize;
      for (let f = 0; f < featureSize; f++) dst[at + f] = src[from + f]!;
    }
  }
  return dst;
}
