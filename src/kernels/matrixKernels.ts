/** The Backend's matrix kernels: gemm, the pre-packed gemm of a reused B, axpy and scale. */

/**
 * op(B) [K×N] of a gemm prepared once for many products (a recurrent weight is the B of every
 * step). Made by one backend's `packB`, used by the same backend's `gemmPacked` only. It may keep a
 * reference to B instead of a copy (native does): B must not change while the pack is in use.
 */
export interface PackedMatrix {
  /** depth and columns of op(B) */
  readonly K: number;
  readonly N: number;
  /** the backend that made it */
  readonly backend: string;
}

export interface MatrixKernels {
  /** C[M×N] = alpha·op(A)·op(B) + beta·C, op(A) is M×K, op(B) is K×N; transA means A is stored K×M. */
  gemm(
    transA: boolean,
    transB: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: Float32Array,
    B: Float32Array,
    beta: number,
    C: Float32Array,
  ): void;

  /**
   * op(B) [K×N] (B stored N×K when transB) prepared for gemmPacked. `into`, a pack of this backend
   * with the same K and N (and transB), is refilled instead of allocating.
   */
  packB(transB: boolean, K: number, N: number, B: Float32Array, into?: PackedMatrix | null): PackedMatrix;
  /**
   * C[M×N] = alpha·op(A)·P + beta·C with P from this backend's packB. A and C start at element
   * `aOffset` / `cOffset` of the arrays given (a step's block of a time-major buffer, without a view).
   */
  gemmPacked(
    transA: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: Float32Array,
    P: PackedMatrix,
    beta: number,
    C: Float32Array,
    aOffset?: number,
    cOffset?: number,
  ): void;

  /** y += alpha · x */
  axpy(alpha: number, x: Float32Array, y: Float32Array): void;
  /** x *= alpha */
  scale(alpha: number, x: Float32Array): void;
}
