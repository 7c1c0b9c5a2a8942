/** The wasm backend's 2-D convolutions (assembly/conv.ts): im2col in chunks of the scratch block, then gemm. */
import type { Conv2DGeometry, ConvolutionKernels } from '../convKernels.ts';
import { checkGeometry, need, type WasmAccess } from './access.ts';

/** Checks the geometry and grows the scratch for it; returns K = KH·KW·C. */
function convChecks(k: WasmAccess, what: string, g: Conv2DGeometry): number {
  checkGeometry(what, g);
  const K = g.KH * g.KW * g.C;
  k.ensureCol(Math.max(K * 4 * 16, g.F * 8));
  return K;
}

export function wasmConvolutionKernels(k: WasmAccess): ConvolutionKernels {
  return {
    conv2dForward(x, w, bias, y, g) {
      const K = convChecks(k, 'conv2dForward', g);
      need('conv2dForward', 'x', x, g.N * g.H * g.W * g.C);
      need('conv2dForward', 'w', w, K * g.F);
      need('conv2dForward', 'y', y, g.N * g.OH * g.OW * g.F);
      if (bias) need('conv2dForward', 'bias', bias, g.F);
      k.run(() =>
        k.e.conv2dForward(
          k.ptr(x, false),
          k.ptr(w, false),
          bias ? k.ptr(bias, false) : 0,
          k.ptr(y, true),
          g.N,
          g.H,
          g.W,
          g.C,
          g.KH,
          g.KW,
          g.F,
          g.strideH,
          g.strideW,
          g.padTop,
          g.padLeft,
          g.OH,
          g.OW,
          k.colPtr,
          k.colBytes,
        ),
      );
    },

    conv2dBackwardData(dy, w, dx, g) {
      const K = convChecks(k, 'conv2dBackwardData', g);
      need('conv2dBackwardData', 'dy', dy, g.N * g.OH * g.OW * g.F);
      need('conv2dBackwardData', 'w', w, K * g.F);
      need('conv2dBackwardData', 'dx', dx, g.N * g.H * g.W * g.C);
      k.run(() =>
        k.e.conv2dBackwardData(
          k.ptr(dy, false),
          k.ptr(w, false),
          k.ptr(dx, true),
          g.N,
          g.H,
          g.W,
          g.C,
          g.KH,
          g.KW,
          g.F,
          g.strideH,
          g.strideW,
          g.padTop,
          g.padLeft,
          g.OH,
          g.OW,
          k.colPtr,
          k.colBytes,
        ),
      );
    },

    conv2dBackwardFilter(x, dy, dw, db, g) {
      const K = convChecks(k, 'conv2dBackwardFilter', g);
      need('conv2dBackwardFilter', 'x', x, g.N * g.H * g.W * g.C);
      need('conv2dBackwardFilter', 'dy', dy, g.N * g.OH * g.OW * g.F);
      need('conv2dBackwardFilter', 'dw', dw, K * g.F);
      if (db) need('conv2dBackwardFilter', 'db', db, g.F);
      k.run(() => {
        const pdy = k.ptr(dy, false);
        k.e.conv2dBackwardFilter(
          k.ptr(x, false),
          pdy,
          k.ptr(dw, true),
          g.N,
          g.H,
          g.W,
          g.C,
          g.KH,
          g.KW,
          g.F,
          g.strideH,
          g.strideW,
          g.padTop,
          g.padLeft,
          g.OH,
          g.OW,
          k.colPtr,
          k.colBytes,
        );
        if (db) k.e.biasGrad(pdy, k.ptr(db, true), g.N * g.OH * g.OW, g.F, k.colPtr);
      });
    },
  };
}
