/**
 * The numbers a training step needs from a device, computed where the arrays live so that the host
 * reads them all at once, in one small array, per step: the loss's sums, the gradient's squared
 * norm (clipping) and whether it holds a NaN/Inf (skipping the step). Results are written into
 * device arrays (`sums`, `out`), not returned: the host sees them after its next read.
 */
export interface DeviceStepKernels {
  /**
   * Softmax cross-entropy (ElementwiseKernels.softmaxCrossEntropy) whose sums stay on the device:
   * dlogits = (softmax − onehot)·gradScale, sums[0] += Σ row losses, sums[1] += rows whose first
   * maximum is at the label (countCorrect). Adding lets micro-batches accumulate into one pair.
   */
  softmaxCrossEntropySums(
    logits: Float32Array,
    labels: Int32Array,
    rows: number,
    classes: number,
    dlogits: Float32Array,
    gradScale: number,
    sums: Float32Array,
  ): void;
  /** out[0] = Σ x² over every value of every array (float32: a norm past ~1.8e19 reads as Infinity). */
  sumOfSquares(arrays: readonly Float32Array[], out: Float32Array): void;
  /** out[0] = 1 when any value of any array is NaN or ±Inf, else 0. */
  anyNonFinite(arrays: readonly Float32Array[], out: Float32Array): void;
}
