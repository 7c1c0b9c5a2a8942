/**
 * Layer normalisation's passes over [rows, D], per row, with the row sums in float64 (a row can be
 * thousands of features; the per-feature gradient sums run over thousands of frames). The
 * definition every backend's LayerNormKernels follow (src/kernels/layerNormKernels.ts).
 */

function checkShape(
  fn: string,
  rows: number,
  D: number,
  arrays: Record<string, Float32Array>,
  valid: Int32Array | null,
): void {
  for (const [name, a] of Object.entries(arrays)) {
    const need = ['gamma', 'beta', 'dgamma', 'dbeta'].includes(name) ? D : name === 'invStd' ? rows : rows * D;
    if (a.length < need)
      throw new RangeError(`${fn}: ${rows} rows of ${D} features need ${name} of ${need}, got ${a.length}`);
  }
  if (valid && valid.length < rows) throw new RangeError(`${fn}: valid has ${valid.length} flags for ${rows} rows`);
}

/** x̂ = (x − mean)·invStd, y = x̂·γ + β per valid row; invalid rows get zeros (xhat, invStd, y overwritten). */
export function layerNormForward(
  x: Float32Array,
  gamma: Float32Array,
  beta: Float32Array,
  valid: Int32Array | null,
  rows: number,
  D: number,
  epsilon: number,
  xhat: Float32Array,
  invStd: Float32Array,
  y: Float32Array,
): void {
  checkShape('layerNormForward', rows, D, { x, gamma, beta, xhat, invStd, y }, valid);
  for (let r = 0; r < rows; r++) {
    const at = r * D;
    if (valid && !valid[r]) {
      xhat.fill(0, at, at + D);
      y.fill(0, at, at + D);
      invStd[r] = 0;
      continue;
    }
    let mean = 0;
    for (let j = 0; j < D; j++) mean += x[at + j]!;
    mean /= D;
    // two passes: the variance of rows far from 0 does not cancel
    let variance = 0;
    for (let j = 0; j < D; j++) {
      const d = x[at + j]! - mean;
      variance += d * d;
    }
    const inv = 1 / Math.sqrt(variance / D + epsilon);
    invStd[r] = inv;
    for (let j = 0; j < D; j++) {
      const h = (x[at + j]! - mean) * inv;
      xhat[at + j] = h;
      y[at + j] = h * gamma[j]! + beta[j]!;
    }
  }
}

/**
 * dx = invStd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)), dx̂ = dy·γ, on valid rows and 0 on the others
 * (dx overwritten); dγ += Σ dy·x̂ and dβ += Σ dy over the valid rows, summed in float64.
 */
export function layerNormBackward(
  dy: Float32Array,
  xhat: Float32Array,
  invStd: Float32Array,
  gamma: Float32Array,
  valid: Int32Array | null,
  rows: number,
  D: number,
  dx: Float32Array,
  dgamma: Float32Array,
  dbeta: Float32Array,
): void {
  checkShape('layerNormBackward', rows, D, { dy, xhat, invStd, gamma, dx, dgamma, dbeta }, valid);
  const sums = new Float64Array(2 * D);
  for (let r = 0; r < rows; r++) {
    const at = r * D;
    if (valid && !valid[r]) {
      dx.fill(0, at, at + D);
      continue;
    }
    let sum = 0,
      sumXhat = 0;
    for (let j = 0; j < D; j++) {
      const g = dy[at + j]!,
        h = xhat[at + j]!,
        dh = g * gamma[j]!;
      sums[j] += g * h;
      sums[D + j] += g;
      sum += dh;
      sumXhat += dh * h;
    }
    const mean = sum / D,
      meanXhat = sumXhat / D,
      inv = invStd[r]!;
    for (let j = 0; j < D; j++) dx[at + j] = inv * (dy[at + j]! * gamma[j]! - mean - xhat[at + j]! * meanXhat);
  }
  for (let j = 0; j < D; j++) {
    dgamma[j] += sums[j]!;
    dbeta[j] += sums[D + j]!;
  }
}
