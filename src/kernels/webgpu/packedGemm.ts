/**
 * The webgpu `packB` / `gemmPacked` (src/kernels/matrixKernels.ts): on the GPU a pack keeps B's
 * array and its transpose flag (gemm.ts reads either layout in order), and a product on a step's
 * block of a time-major buffer is gemm.ts on views at `aOffset` / `cOffset` of the arrays given,
 * so a recurrence's steps are gemms on slices of one buffer. B must not change while in use.
 */
import type { PackedMatrix } from '../matrixKernels.ts';
import { gemm } from './gemm.ts';
import type { GpuArray } from './gpuArray.ts';
import { gpuView } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';

/** op(B) [K×N]: B itself (stored N×K when transB). */
export class GpuPackedMatrix implements PackedMatrix {
  readonly backend = 'webgpu';
  constructor(
    readonly K: number,
    readonly N: number,
    public transB: boolean,
    public B: GpuArray,
  ) {}
}

/** op(B) prepared for gemmPacked; `into`, a webgpu pack of the same K and N, is refilled. `ctx` is unused (the Backend's shape). */
export function packB(
  _ctx: GpuContext,
  transB: boolean,
  K: number,
  N: number,
  B: GpuArray,
  into?: PackedMatrix | null,
): PackedMatrix {
  if (B.length < K * N) throw new RangeError(`packB: B has ${B.length} values, a ${K}×${N} op(B) needs ${K * N}`);
  if (into instanceof GpuPackedMatrix && into.K === K && into.N === N) {
    into.transB = transB;
    into.B = B;
    return into;
  }
  return new GpuPackedMatrix(K, N, transB, B);
}

/** Records C[M×N] = alpha·op(A)·P + beta·C, A and C starting at elements `aOffset` / `cOffset` of the arrays given. */
export function gemmPacked(
  ctx: GpuContext,
  transA: boolean,
  M: number,
  N: number,
  K: number,
  alpha: number,
  A: GpuArray,
  P: PackedMatrix,
  beta: number,
  C: GpuArray,
  aOffset = 0,
  cOffset = 0,
): void {
  if (!(P instanceof GpuPackedMatrix))
    throw new Error(
      `gemmPacked: the pack was made by the ${P.backend} backend, not webgpu: make it with webgpu's packB`,
    );
  if (P.K !== K || P.N !== N)
    throw new RangeError(`gemmPacked: the pack is ${P.K}×${P.N}, the product needs ${K}×${N}`);
  gemm(ctx, transA, P.transB, M, N, K, alpha, gpuView(A, aOffset, M * K), P.B, beta, gpuView(C, cOffset, M * N));
}
