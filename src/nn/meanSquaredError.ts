import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { targetRows, type Loss, type LossResult } from './loss.ts';

/**
 * Mean squared error for regression: a sample's loss is the mean over its K outputs of
 * (y − t)², so lossSum / N equals PyTorch's F.mse_loss (reduction 'mean'). Also sums the mean
 * absolute error (the MAE metric). Sums run in float64.
 */
export class MeanSquaredError implements Loss {
  readonly task = 'regression' as const;
  private grad: Float32Array = new Float32Array(0);

  constructor(private readonly backend: Backend) {}

  compute(outputs: Tensor, _labels: Int32Array, gradScale: number, targets?: Float32Array): LossResult {
    const { n, k, t } = targetRows('meanSquaredError', outputs, targets);
    const y = outputs.data,
      size = n * k;
    // grow-only, like layer buffers: alternating micro-batch sizes must not allocate every time
    if (this.grad.length < size) this.grad = this.backend.alloc(size);
    const grad = this.grad.length === size ? this.grad : this.grad.subarray(0, size);
    const g = (2 * gradScale) / k;
    let squares = 0,
      abs = 0;
    for (let i = 0; i < size; i++) {
      const d = y[i]! - t[i]!;
      squares += d * d;
      abs += Math.abs(d);
      grad[i] = g * d;
    }
    return { lossSum: squares / k, correct: NaN, absErrorSum: abs / k, dlogits: new Tensor(outputs.shape, grad) };
  }
}
