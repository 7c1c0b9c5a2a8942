/**
 * The wasm backend's batch normalisation passes (assembly/batchnorm.ts), float64 sums in the scratch
 * block; the per-channel steps between them are the js ones, on views of the wasm memory.
 */
import type { BatchNormKernels } from '../batchNormKernels.ts';
import { jsBatchNormChannelKernels } from '../js/batchNormChannels.ts';
import { need, type WasmAccess } from './access.ts';

export function wasmBatchNormKernels(k: WasmAccess): BatchNormKernels {
  return {
    ...jsBatchNormChannelKernels,
    channelCentredSquares(x, mean, out, rows, C) {
      need('channelCentredSquares', 'x', x, rows * C);
      need('channelCentredSquares', 'mean', mean, C);
      need('channelCentredSquares', 'out', out, C);
      k.ensureCol(C * 8);
      k.run(() => k.e.channelCentredSquares(k.ptr(x, false), k.ptr(mean, false), k.ptr(out, true), rows, C, k.colPtr));
    },

    batchNormNormalise(x, mean, invStd, gamma, beta, xhat, y, rows, C) {
      const fn = 'batchNormNormalise';
      need(fn, 'x', x, rows * C);
      need(fn, 'xhat', xhat, rows * C);
      need(fn, 'y', y, rows * C);
      need(fn, 'mean', mean, C);
      need(fn, 'invStd', invStd, C);
      need(fn, 'gamma', gamma, C);
      need(fn, 'beta', beta, C);
      k.run(() =>
        k.e.batchNormNormalise(
          k.ptr(x, false),
          k.ptr(mean, false),
          k.ptr(invStd, false),
          k.ptr(gamma, false),
          k.ptr(beta, false),
          k.ptr(xhat, true),
          k.ptr(y, true),
          rows,
          C,
        ),
      );
    },

    batchNormGradSums(dy, xhat, out, rows, C) {
      need('batchNormGradSums', 'dy', dy, rows * C);
      need('batchNormGradSums', 'xhat', xhat, rows * C);
      need('batchNormGradSums', 'out', out, 2 * C);
      k.ensureCol(2 * C * 8);
      k.run(() => k.e.batchNormGradSums(k.ptr(dy, false), k.ptr(xhat, false), k.ptr(out, true), rows, C, k.colPtr));
    },

    batchNormInputGrad(dy, xhat, gamma, invStd, sums, M, dx, rows, C) {
      const fn = 'batchNormInputGrad';
      need(fn, 'dy', dy, rows * C);
      need(fn, 'xhat', xhat, rows * C);
      need(fn, 'dx', dx, rows * C);
      need(fn, 'gamma', gamma, C);
      need(fn, 'invStd', invStd, C);
      need(fn, 'sums', sums, 2 * C);
      k.ensureCol(C * 8);
      k.run(() =>
        k.e.batchNormInputGrad(
          k.ptr(dy, false),
          k.ptr(xhat, false),
          k.ptr(gamma, false),
          k.ptr(invStd, false),
          k.ptr(sums, false),
          M,
          k.ptr(dx, true),
          rows,
          C,
          k.colPtr,
        ),
      );
    },
  };
}
