/** The wasm backend's optimizer updates (assembly/elementwise.ts): Adam/AdamW and SGD with momentum, in place. */
import { frozenVarianceStep, type OptimizerKernels } from '../optimizerKernels.ts';
import { need, type WasmAccess } from './access.ts';

export function wasmOptimizerKernels(k: WasmAccess): OptimizerKernels {
  return {
    adamStep(params, grads, m, v, p) {
      const n = params.length;
      need('adamStep', 'grads', grads, n);
      need('adamStep', 'm', m, n);
      need('adamStep', 'v', v, n);
      const { lr, beta1, beta2, eps, weightDecay, decoupled, step } = p;
      const frozen = frozenVarianceStep(p);
      const invBc1 = 1 / (1 - beta1 ** step);
      const invBc2 = 1 / (1 - beta2 ** (frozen ?? step));
      const l2 = decoupled ? 0 : weightDecay;
      const shrink = decoupled ? 1 - lr * weightDecay : 1;
      k.run(() =>
        k.e.adamStep(
          k.ptr(params, true),
          k.ptr(grads, false),
          k.ptr(m, true),
          k.ptr(v, true),
          n,
          lr,
          beta1,
          beta2,
          1 - beta1,
          1 - beta2,
          eps,
          l2,
          shrink,
          invBc1,
          invBc2,
          frozen === null ? 0 : 1,
        ),
      );
    },

    sgdStep(params, grads, velocity, p) {
      const n = params.length;
      need('sgdStep', 'grads', grads, n);
      if (p.momentum > 0) {
        if (!velocity) throw new Error('sgdStep: momentum > 0 needs a velocity buffer');
        need('sgdStep', 'velocity', velocity, n);
      }
      k.run(() =>
        k.e.sgdStep(
          k.ptr(params, true),
          k.ptr(grads, false),
          p.momentum > 0 ? k.ptr(velocity!, true) : 0,
          n,
          p.lr,
          p.momentum,
          p.nesterov ? 1 : 0,
          p.weightDecay,
        ),
      );
    },
  };
}
