/**
 * The Backend's kernels over padded sequence batches and plain ranges: what a layer used to do with
 * `fill` loops on its own buffers, moved behind the contract so the buffers may live on a device.
 */
export interface SequenceKernels {
  /** x[i] = value over all of x (a view: a state's initial block, a gradient restarted). */
  fill(x: Float32Array, value: number): void;
  /**
   * Zeroes frames t ≥ lengths[n] of x [N, T, F] (each sample's padding); lengths come from the
   * host and are at most T.
   */
  zeroPadding(x: Float32Array, N: number, T: number, F: number, lengths: Int32Array): void;
}
