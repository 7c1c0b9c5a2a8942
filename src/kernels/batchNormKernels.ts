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
  /**
   * The per-channel steps between those passes, so that no statistic or parameter is read on the
   * host (src/kernels/js/batchNormChannels.ts is the definition; same float64-then-round arithmetic).
   * channelSums: out[c] = Σ_r x[r, c] for c < C (out overwritten; it may be longer).
   */
  channelSums(x: Float32Array, out: Float32Array, rows: number, C: number): void;
  /** mean[c] = sums[c] / rows (0 when rows is 0). */
  batchNormMean(sums: Float32Array, rows: number, mean: Float32Array, C: number): void;
  /**
   * From squares[c] = Σ(x − mean)² over `rows` rows: invStd = 1/√(variance + ε) with the biased
   * variance, and running = momentum·running + (1 − momentum)·batch, the variance unbiased.
   */
  batchNormStatistics(
    squares: Float32Array,
    rows: number,
    mean: Float32Array,
    momentum: number,
    epsilon: number,
    invStd: Float32Array,
    runningMean: Float32Array,
    runningVar: Float32Array,
    C: number,
  ): void;
  /** Evaluation mode: mean = runningMean, invStd = 1/√(runningVar + ε). */
  batchNormRunningStatistics(
    runningMean: Float32Array,
    runningVar: Float32Array,
    epsilon: number,
    mean: Float32Array,
    invStd: Float32Array,
    C: number,
  ): void;
  /** dbeta[c] += sums[c], dgamma[c] += sums[C + c] (`sums` as batchNormGradSums wrote them). */
  batchNormParamGrads(sums: Float32Array, dgamma: Float32Array, dbeta: Float32Array, C: number): void;
  /** Evaluation mode's input gradient (the statistics are constants): dx = dy·γ·invStd (dx overwritten). */
  batchNormAffineInputGrad(
    dy: Float32Array,
    gamma: Float32Array,
    invStd: Float32Array,
    dx: Float32Array,
    rows: number,
    C: number,
  ): void;
}
