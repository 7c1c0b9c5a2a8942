/**
 * Batch normalisation's per-channel steps between its passes (src/kernels/batchNormKernels.ts):
 * the sums (through the backend's biasGrad), the statistics and the parameter gradients, in float64
 * with each result rounded to float32 once.
 */
import type { Backend } from '../backend.ts';

/**
 * out[c] = Σ_r x[r, c] for c < C (out overwritten): the backend's own biasGrad into zeros, the
 * column sums BatchNorm has always taken its mean from, at that kernel's speed.
 */
export function channelSums(
  this: Pick<Backend, 'biasGrad'>,
  x: Float32Array,
  out: Float32Array,
  rows: number,
  C: number,
): void {
  const sums = out.subarray(0, C);
  sums.fill(0);
  this.biasGrad(x, sums, rows, C);
}

/** mean[c] = sums[c] / rows, 0 for an empty batch. */
export function batchNormMean(sums: Float32Array, rows: number, mean: Float32Array, C: number): void {
  for (let c = 0; c < C; c++) mean[c] = rows > 0 ? sums[c]! / rows : 0;
}

/** invStd from the biased variance squares/rows; the running statistics move toward the batch's (variance unbiased). */
export function batchNormStatistics(
  squares: Float32Array,
  rows: number,
  mean: Float32Array,
  momentum: number,
  epsilon: number,
  invStd: Float32Array,
  runningMean: Float32Array,
  runningVar: Float32Array,
  C: number,
): void {
  for (let c = 0; c < C; c++) {
    const variance = rows > 0 ? squares[c]! / rows : 0;
    invStd[c] = 1 / Math.sqrt(variance + epsilon);
    const unbiased = rows > 1 ? (variance * rows) / (rows - 1) : variance;
    runningMean[c] = momentum * runningMean[c]! + (1 - momentum) * mean[c]!;
    runningVar[c] = momentum * runningVar[c]! + (1 - momentum) * unbiased;
  }
}

/** Evaluation mode's statistics: the running ones. */
export function batchNormRunningStatistics(
  runningMean: Float32Array,
  runningVar: Float32Array,
  epsilon: number,
  mean: Float32Array,
  invStd: Float32Array,
  C: number,
): void {
  for (let c = 0; c < C; c++) {
    mean[c] = runningMean[c]!;
    invStd[c] = 1 / Math.sqrt(runningVar[c]! + epsilon);
  }
}

/** dbeta[c] += Σdy, dgamma[c] += Σdy·x̂ (accumulated, like every parameter gradient). */
export function batchNormParamGrads(sums: Float32Array, dgamma: Float32Array, dbeta: Float32Array, C: number): void {
  for (let c = 0; c < C; c++) {
    dbeta[c] += sums[c]!;
    dgamma[c] += sums[C + c]!;
  }
}

/** dx = dy·γ·invStd per element: the layer is affine when its statistics are constants. */
export function batchNormAffineInputGrad(
  dy: Float32Array,
  gamma: Float32Array,
  invStd: Float32Array,
  dx: Float32Array,
  rows: number,
  C: number,
): void {
  for (let r = 0, i = 0; r < rows; r++) for (let c = 0; c < C; c++, i++) dx[i] = dy[i]! * gamma[c]! * invStd[c]!;
}

/** The group as an object, for backends that compose their kernels from groups. */
export const jsBatchNormChannelKernels = {
  channelSums,
  batchNormMean,
  batchNormStatistics,
  batchNormRunningStatistics,
  batchNormParamGrads,
  batchNormAffineInputGrad,
};
