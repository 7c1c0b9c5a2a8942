/**
 * A dense layer's product with its kernel gathered a block of rows at a time (RowBlockSource,
 * residency.ts): W [in, units] is split by input features, so
 *   forward   z = Σ_k x[:, r_k:r_k+1] · W[r_k:r_k+1, :]  (+ the bias, with the last block)
 *   backward  dW[r_k:r_k+1, :] = x[:, r_k:r_k+1]ᵀ · dz,   dx[:, r_k:r_k+1] = dz · W[r_k:r_k+1, :]ᵀ
 * Backward's products are those of the whole kernel, row block by row block. Forward adds the
 * blocks' partial products one after another, so its sums are associated otherwise than one
 * product over every row: equal up to float32 rounding.
 */
import type { Backend } from '../kernels/backend.ts';
import type { RowBlockSource } from './residency.ts';

/** Columns [r0, r1) of the n × cols row-major `x`, packed into `out` (n × (r1 − r0)). */
function columns(x: Float32Array, n: number, cols: number, r0: number, r1: number, out: Float32Array): Float32Array {
  if (r0 === 0 && r1 === cols) return x;
  const w = r1 - r0;
  for (let i = 0; i < n; i++) out.set(x.subarray(i * cols + r0, i * cols + r1), i * w);
  return out;
}

/** z (n × units) = x (n × inFeatures) · W + b, W taken block by block. */
export async function forwardInRowBlocks(
  backend: Backend,
  blocks: RowBlockSource,
  x: Float32Array,
  n: number,
  inFeatures: number,
  units: number,
  z: Float32Array,
  scratch: (length: number) => Float32Array,
): Promise<void> {
  for (const [k, [r0, r1]] of blocks.rows.entries()) {
    const { kernel, bias } = await blocks.acquire(k, false);
    const xk = columns(x, n, inFeatures, r0, r1, scratch(n * (r1 - r0)));
    backend.gemm(false, false, n, units, r1 - r0, 1, xk, kernel, k === 0 ? 0 : 1, z);
    if (bias) backend.biasAdd(z, bias, z, n, units);
    await blocks.release(k, false);
  }
}

/**
 * The kernel's and bias's gradients added block by block (the last block first, as backward
 * runs), and dx (n × inFeatures) when given, from dz (n × units).
 */
export async function backwardInRowBlocks(
  backend: Backend,
  blocks: RowBlockSource,
  x: Float32Array,
  dz: Float32Array,
  n: number,
  inFeatures: number,
  units: number,
  dx: Float32Array | null,
  scratch: (key: 'x' | 'dx', length: number) => Float32Array,
): Promise<void> {
  for (let k = blocks.rows.length - 1; k >= 0; k--) {
    const [r0, r1] = blocks.rows[k]!,
      w = r1 - r0;
    const { kernel, kernelGrad, biasGrad } = await blocks.acquire(k, true);
    const xk = columns(x, n, inFeatures, r0, r1, scratch('x', n * w));
    backend.gemm(true, false, w, units, n, 1, xk, dz, 1, kernelGrad);
    if (biasGrad) backend.biasGrad(dz, biasGrad, n, units);
    if (dx) {
      const whole = r0 === 0 && r1 === inFeatures;
      const dxk = whole ? dx : scratch('dx', n * w);
      backend.gemm(false, true, n, w, units, 1, dz, kernel, 0, dxk);
      if (!whole) for (let i = 0; i < n; i++) dx.set(dxk.subarray(i * w, (i + 1) * w), i * inFeatures + r0);
    }
    await blocks.release(k, true);
  }
}
