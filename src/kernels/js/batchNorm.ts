/**
 * Batch normalisation's passes over x [rows, C] (channels last), per channel, in float64 with each
 * result rounded to float32 once; sums run over the rows in order. The wasm kernels
 * (assembly/batchnorm.ts) do the same arithmetic in the same order: the same bits.
 */

/** out[c] = Σ_r (x[r, c] − mean[c])² (out overwritten). */
export function channelCentredSquares(
  x: Float32Array,
  mean: Float32Array,
  out: Float32Array,
  rows: number,
  C: number,
): void {
  const sq = new Float64Array(C);
  for (let r = 0, i = 0; r < rows; r++)
    for (let c = 0; c < C; c++, i++) {
      const d = x[i]! - mean[c]!;
      sq[c] += d * d;
    }
  out.set(sq);
}

/** x̂ = (x − mean)·invStd and y = x̂·γ + β per element, x̂ unrounded in y's sum (xhat, y overwritten). */
export function batchNormNormalise(
  x: Float32Array,
  mean: Float32Array,
  invStd: Float32Array,
  gamma: Float32Array,
  beta: Float32Array,
  xhat: Float32Array,
  y: Float32Array,
  rows: number,
  C: number,
): void {
  for (let r = 0, i = 0; r < rows; r++) {
    for (let c = 0; c < C; c++, i++) {
      const h = (x[i]! - mean[c]!) * invStd[c]!;
      xhat[i] = h;
      y[i] = h * gamma[c]! + beta[c]!;
    }
  }
}

/** out[c] = Σ_r dy[r, c], out[C + c] = Σ_r dy[r, c]·x̂[r, c] (out overwritten). */
export function batchNormGradSums(
  dy: Float32Array,
  xhat: Float32Array,
  out: Float32Array,
  rows: number,
  C: number,
): void {
  const sumDy = new Float64Array(C),
    sumDyXhat = new Float64Array(C);
  for (let r = 0, i = 0; r < rows; r++) {
    for (let c = 0; c < C; c++, i++) {
      const g = dy[i]!;
      sumDy[c] += g;
      sumDyXhat[c] += g * xhat[i]!;
    }
  }
  out.set(sumDy);
  out.set(sumDyXhat, C);
}

/** dx = k·(M·dy − Σdy − x̂·Σdy·x̂) per element, k = γ·invStd/M per channel (dx overwritten). */
export function batchNormInputGrad(
  dy: Float32Array,
  xhat: Float32Array,
  gamma: Float32Array,
  invStd: Float32Array,
  sums: Float32Array,
  M: number,
  dx: Float32Array,
  rows: number,
  C: number,
): void {
  const k = new Float64Array(C);
  for (let c = 0; c < C; c++) k[c] = (gamma[c]! * invStd[c]!) / M;
  for (let r = 0, i = 0; r < rows; r++) {
    for (let c = 0; c < C; c++, i++) dx[i] = k[c]! * (M * dy[i]! - sums[c]! - xhat[i]! * sums[C + c]!);
  }
}
