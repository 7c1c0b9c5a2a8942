/** The wasm backend's matrix kernels: gemm, the packed gemm of ./recurrent.ts, axpy and scale. */
import type { MatrixKernels } from '../matrixKernels.ts';
import { need, type WasmAccess } from './access.ts';
import * as rnn from './recurrent.ts';

export function wasmMatrixKernels(k: WasmAccess): MatrixKernels {
  return {
    gemm(transA, transB, M, N, K, alpha, A, B, beta, C) {
      need('gemm', 'A', A, M * K);
      need('gemm', 'B', B, K * N);
      need('gemm', 'C', C, M * N);
      if (M === 0 || N === 0) return;
      k.run(() =>
        k.e.gemm(
          transA ? 1 : 0,
          transB ? 1 : 0,
          M,
          N,
          K,
          alpha,
          k.ptr(A, false),
          k.ptr(B, false),
          beta,
          k.ptr(C, true),
        ),
      );
    },

    packB: (transB, K, N, B, into) => rnn.packB(k, transB, K, N, B, into),

    gemmPacked: (transA, M, N, K, alpha, A, P, beta, C, aOffset = 0, cOffset = 0) =>
      rnn.gemmPacked(k, transA, M, N, K, alpha, A, P, beta, C, aOffset, cOffset),

    axpy(alpha, x, y) {
      need('axpy', 'y', y, x.length);
      k.run(() => k.e.axpy(alpha, k.ptr(x, false), k.ptr(y, true), x.length));
    },

    scale(alpha, x) {
      k.run(() => k.e.scale(alpha, k.ptr(x, true), x.length));
    },
  };
}
