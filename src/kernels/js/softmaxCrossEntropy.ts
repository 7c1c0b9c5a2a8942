/**
 * Softmax cross-entropy over `rows` rows of `classes` logits, in float64 per row with the row
 * maximum subtracted so exp never overflows. Returns the SUM of per-row losses (the caller picks
 * the mean's divisor) and writes dlogits = (softmax − onehot) · gradScale; dlogits may be logits.
 */
export function softmaxCrossEntropy(
  logits: Float32Array,
  labels: Int32Array,
  rows: number,
  classes: number,
  dlogits: Float32Array,
  gradScale: number,
): number {
  // Check every label before writing, so a bad batch leaves logits intact when dlogits aliases them.
  for (let r = 0; r < rows; r++) {
    const label = labels[r];
    if (!(label >= 0 && label < classes)) {
      throw new Error(`softmaxCrossEntropy: row ${r} has label ${label}, expected a class in 0..${classes - 1}`);
    }
  }
  let total = 0;
  for (let r = 0; r < rows; r++) {
    const base = r * classes;
    const end = base + classes;
    let max = -Infinity;
    for (let i = base; i < end; i++) if (logits[i] > max) max = logits[i];
    let sum = 0;
    for (let i = base; i < end; i++) sum += Math.exp(logits[i] - max);
    const logSum = Math.log(sum);
    const at = base + labels[r];
    const zLabel = logits[at] - max; // read before dlogits (maybe logits) is written
    total += logSum - zLabel;
    // Recomputing exp is cheaper than a scratch row and keeps this allocation-free.
    const inv = gradScale / sum;
    for (let i = base; i < end; i++) dlogits[i] = Math.exp(logits[i] - max) * inv;
    // (p − 1)·scale in float64, not p·scale − scale after rounding p·scale to float32.
    dlogits[at] = (Math.exp(zLabel) / sum - 1) * gradScale;
  }
  return total;
}
