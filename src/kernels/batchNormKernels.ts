/** The Backend's batch normalisation passes, defined to give the same bits on every backend. */

export interface BatchNormKernels {
  /**
   * Batch normalisation's passes over x [rows, C] (channels last), per channel: float64 arithmetic,
   * each result rounded to float32 once, sums over the rows in order, so every backend gives the
   * same bits (src/kernels/js/batchNorm.ts is the definition). Outputs are overwritten.
   * channelCentredSquares: out[c] = Σ_r (x[r, c] − mean[c])².
   */
  channelCentredSquares(x: Float32Array, mean: Float32Array, out: Float32Array, rows: number, C: number): void;
  /** x̂ = (x − mean)·invStd and y = x̂·γ + β (x̂ unrounded in y's sum). */
  batchNormNormalise(
    x: Float32Array,
    mean: Float32Array,
    invStd: Float32Array,
    gamma: Float32Array,
    beta: Float32Array,
    xhat: Float32Array,
    y: Float32Array,
    rows: number,
    C: number,
  ): void;
  /** out[c] = Σ_r dy[r, c] and out[C + c] = Σ_r dy[r, c]·x̂[r, c] (out: 2C). */
  batchNormGradSums(dy: Float32Array, xhat: Float32Array, out: Float32Array, rows: number, C: number): void;
  /** dx = k·(M·dy − Σdy − x̂·Σdy·x̂), k = γ·invStd/M per channel; `sums` as batchNormGradSums wrote them (over M rows). */
  batchNormInputGrad(
    dy: Float32Array,
    xhat: Float32Array,
    gamma: Float32Array,
    invStd: Float32Array,
    sums: Float32Array,
    M: number,
    dx: Float32Array,
    rows: number,
    C: number,
  ): void;
}
