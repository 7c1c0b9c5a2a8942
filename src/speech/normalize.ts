/**
 * Per-utterance feature normalisation (cepstral mean and variance normalisation over one utterance):
 * each coefficient's frames shifted to zero mean and scaled to unit variance, which removes the
 * recording's level and channel colouring that the log turned into an offset.
 */

/** Added to the variance so a constant coefficient (digital silence) becomes 0 rather than NaN. */
export const NORMALIZE_EPSILON = 1e-10;

/**
 * In place: x[t][f] ← (x[t][f] − mean_f) / √(var_f + ε), mean and (population) variance over the
 * `frames` rows of `featureSize` values. Sums in float64.
 */
export function normalizeUtterance(data: Float32Array, frames: number, featureSize: number): void {
  if (data.length < frames * featureSize)
    throw new Error(`normalizeUtterance: ${data.length} values, ${frames}×${featureSize} expected`);
  if (frames === 0) return;
  for (let f = 0; f < featureSize; f++) {
    let sum = 0;
    for (let t = 0; t < frames; t++) sum += data[t * featureSize + f]!;
    const mean = sum / frames;
    let sq = 0;
    for (let t = 0; t < frames; t++) {
      const d = data[t * featureSize + f]! - mean;
      sq += d * d;
    }
    const inv = 1 / Math.sqrt(sq / frames + NORMALIZE_EPSILON);
    for (let t = 0; t < frames; t++) {
      const i = t * featureSize + f;
      data[i] = (data[i]! - mean) * inv;
    }
  }
}
