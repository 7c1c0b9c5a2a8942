import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { targetRows, type Loss, type LossResult } from './loss.ts';

/**
 * Binary cross-entropy from logits for multi-label data (K independent yes/no labels, targets
 * multi-hot or in [0, 1]): per output max(z, 0) − z·t + log(1 + e^−|z|), which never overflows
 * (PyTorch's F.binary_cross_entropy_with_logits); a sample's loss is the mean over its K outputs.
 * The gradient is (σ(z) − t)/K. A label is predicted "yes" when its logit is > 0 (σ > ½), and
 * counts as right when that agrees with target ≥ ½.
 */
export class BinaryCrossEntropy implements Loss {
  readonly task = 'multiLabel' as const;
  private grad: Float32Array = new Float32Array(0);

  constructor(private readonly backend: Backend) {}

  compute(outputs: Tensor, _labels: Int32Array, gradScale: number, targets?: Float32Array): LossResult {
    const { n, k, t } = targetRows('binaryCrossEntropy', outputs, targets);
    const z = outputs.data,
      size = n * k;
    if (this.grad.length < size) this.grad = this.backend.alloc(size);
    const grad = this.grad.length === size ? this.grad : this.grad.subarray(0, size);
    const g = gradScale / k;
    let total = 0,
      correct = 0,
      exact = 0;
    for (let r = 0, i = 0; r < n; r++) {
      let right = 0;
      for (let c = 0; c < k; c++, i++) {
        const v = z[i]!,
          target = t[i]!;
        const e = Math.exp(-Math.abs(v));
        total += Math.max(v, 0) - v * target + Math.log1p(e);
        // σ(v) without overflow: e = exp(−|v|) ≤ 1
        const sigma = v >= 0 ? 1 / (1 + e) : e / (1 + e);
        grad[i] = g * (sigma - target);
        if (v > 0 === target >= 0.5) right++;
      }
      correct += right / k;
      if (right === k) exact++;
    }
    return { lossSum: total / k, correct, exactMatches: exact, dlogits: new Tensor(outputs.shape, grad) };
  }
}
