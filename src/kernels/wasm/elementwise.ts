/** The wasm backend's per-element and per-row kernels: bias, dropout, row copies, activations, softmax cross-entropy. */
import { activationParam, type ActivationKind } from '../activation.ts';
import type { ElementwiseKernels } from '../elementwiseKernels.ts';
import { checkRows } from '../js/rows.ts';
import { softmaxBackward, softmaxForward } from '../js/softmax.ts';
import { need, type WasmAccess } from './access.ts';

/** The activation codes of assembly/elementwise.ts. */
const ACTIVATIONS: Record<ActivationKind, number> = {
  relu: 0,
  clippedRelu: 1,
  tanh: 2,
  sigmoid: 3,
  linear: 4,
  gelu: 5,
  leakyRelu: 6,
};

export function wasmElementwiseKernels(k: WasmAccess): ElementwiseKernels {
  return {
    // the js loops: a softmax layer's rows are few and short beside the layers around it
    softmaxForward,
    softmaxBackward,

    biasAdd(x, bias, y, rows, cols) {
      need('biasAdd', 'x', x, rows * cols);
      need('biasAdd', 'bias', bias, cols);
      need('biasAdd', 'y', y, rows * cols);
      k.run(() => k.e.biasAdd(k.ptr(x, false), k.ptr(bias, false), k.ptr(y, true), rows, cols));
    },

    biasGrad(dy, db, rows, cols) {
      need('biasGrad', 'dy', dy, rows * cols);
      need('biasGrad', 'db', db, cols);
      k.ensureCol(cols * 8);
      k.run(() => k.e.biasGrad(k.ptr(dy, false), k.ptr(db, true), rows, cols, k.colPtr));
    },

    dropoutForward(k0, k1, counter, n, keep, scale, x, mask, y) {
      need('dropoutForward', 'x', x, n);
      need('dropoutForward', 'mask', mask, n);
      need('dropoutForward', 'y', y, n);
      k.run(() =>
        k.e.dropoutForward(k0, k1, counter, n, keep, scale, k.ptr(x, false), k.ptr(mask, true), k.ptr(y, true)),
      );
    },

    dropoutBackward(dy, mask, dx, n) {
      need('dropoutBackward', 'dy', dy, n);
      need('dropoutBackward', 'mask', mask, n);
      need('dropoutBackward', 'dx', dx, n);
      k.run(() => k.e.dropoutBackward(k.ptr(dy, false), k.ptr(mask, false), k.ptr(dx, true), n));
    },

    copyRows(from, fromStarts, to, toStarts, count, width, add) {
      checkRows('copyRows', from, fromStarts, to, toStarts, count, width);
      k.run(() =>
        k.e.copyRows(
          k.ptr(from, false),
          k.ptr(fromStarts, false),
          k.ptr(to, true),
          k.ptr(toStarts, false),
          count,
          width,
          add ? 1 : 0,
        ),
      );
    },

    activationForward(kind, x, y, param) {
      const code = ACTIVATIONS[kind],
        cap = activationParam(kind, param);
      if (code === undefined) throw new Error(`activationForward: unknown activation '${String(kind)}'`);
      const n = x.length;
      need('activationForward', 'y', y, n);
      k.run(() => k.e.activationForward(code, k.ptr(x, false), k.ptr(y, true), n, cap));
    },

    activationBackward(kind, y, dy, dx, param) {
      const code = ACTIVATIONS[kind],
        cap = activationParam(kind, param);
      if (code === undefined) throw new Error(`activationBackward: unknown activation '${String(kind)}'`);
      const n = y.length;
      need('activationBackward', 'dy', dy, n);
      need('activationBackward', 'dx', dx, n);
      k.run(() => k.e.activationBackward(code, k.ptr(y, false), k.ptr(dy, false), k.ptr(dx, true), n, cap));
    },

    softmaxCrossEntropy(logits, labels, rows, classes, dlogits, gradScale) {
      need('softmaxCrossEntropy', 'logits', logits, rows * classes);
      need('softmaxCrossEntropy', 'labels', labels, rows);
      need('softmaxCrossEntropy', 'dlogits', dlogits, rows * classes);
      for (let r = 0; r < rows; r++) {
        const label = labels[r]!;
        if (!(label >= 0 && label < classes)) {
          throw new Error(`softmaxCrossEntropy: row ${r} has label ${label}, expected a class in 0..${classes - 1}`);
        }
      }
      return k.run(() =>
        k.e.softmaxCrossEntropy(
          k.ptr(logits, false),
          k.ptr(labels, false),
          rows,
          classes,
          k.ptr(dlogits, true),
          gradScale,
        ),
      );
    },
  };
}
