/** The wasm backend's max and average pooling (assembly/pool.ts). */
import type { PoolingKernels } from '../poolKernels.ts';
import { checkGeometry, need, type WasmAccess } from './access.ts';

export function wasmPoolingKernels(k: WasmAccess): PoolingKernels {
  return {
    maxPoolForward(x, y, argmax, g) {
      checkGeometry('maxPoolForward', g);
      const out = g.N * g.OH * g.OW * g.C;
      need('maxPoolForward', 'x', x, g.N * g.H * g.W * g.C);
      need('maxPoolForward', 'y', y, out);
      need('maxPoolForward', 'argmax', argmax, out);
      k.run(() =>
        k.e.maxPoolForward(
          k.ptr(x, false),
          k.ptr(y, true),
          k.ptr(argmax, true),
          g.N,
          g.H,
          g.W,
          g.C,
          g.KH,
          g.KW,
          g.strideH,
          g.strideW,
          g.padTop,
          g.padLeft,
          g.OH,
          g.OW,
        ),
      );
    },

    maxPoolBackward(dy, argmax, dx, g) {
      checkGeometry('maxPoolBackward', g);
      const out = g.N * g.OH * g.OW * g.C,
        inp = g.N * g.H * g.W * g.C;
      need('maxPoolBackward', 'dy', dy, out);
      need('maxPoolBackward', 'argmax', argmax, out);
      need('maxPoolBackward', 'dx', dx, inp);
      k.run(() => k.e.maxPoolBackward(k.ptr(dy, false), k.ptr(argmax, false), k.ptr(dx, true), out, inp));
    },

    avgPoolForward(x, y, g) {
      checkGeometry('avgPoolForward', g);
      need('avgPoolForward', 'x', x, g.N * g.H * g.W * g.C);
      need('avgPoolForward', 'y', y, g.N * g.OH * g.OW * g.C);
      k.run(() =>
        k.e.avgPoolForward(
          k.ptr(x, false),
          k.ptr(y, true),
          g.N,
          g.H,
          g.W,
          g.C,
          g.KH,
          g.KW,
          g.strideH,
          g.strideW,
          g.padTop,
          g.padLeft,
          g.OH,
          g.OW,
        ),
      );
    },

    avgPoolBackward(dy, dx, g) {
      checkGeometry('avgPoolBackward', g);
      need('avgPoolBackward', 'dy', dy, g.N * g.OH * g.OW * g.C);
      need('avgPoolBackward', 'dx', dx, g.N * g.H * g.W * g.C);
      k.run(() =>
        k.e.avgPoolBackward(
          k.ptr(dy, false),
          k.ptr(dx, true),
          g.N,
          g.H,
          g.W,
          g.C,
          g.KH,
          g.KW,
          g.strideH,
          g.strideW,
          g.padTop,
          g.padLeft,
          g.OH,
          g.OW,
        ),
      );
    },
  };
}
