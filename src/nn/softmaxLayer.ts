import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext } from './layer.ts';

/**
 * Softmax over the last axis (each sample's scores, or each pixel's channels): an output layer for
 * models whose outputs are read as probabilities. With `loss: softmaxCrossEntropy` the loss already
 * applies softmax to the logits, so the config refuses a softmax last layer there (a second softmax
 * would flatten the gradient); predictions of such a model apply softmax themselves.
 * Rows are computed in float64 with the row maximum subtracted, so exp never overflows.
 */
export class SoftmaxLayer extends BaseLayer {
  readonly outputShape: readonly number[];
  private readonly width: number;
  private y: Tensor | null = null;

  constructor(backend: Backend, name: string, inputShape: readonly number[]) {
    super(backend, name, inputShape);
    this.outputShape = inputShape;
    this.width = inputShape[inputShape.length - 1]!;
  }

  forward(x: Tensor, _ctx: ForwardContext): Tensor {
    const y = new Tensor(x.shape, this.buffer('y', x.size));
    const xd = x.data,
      yd = y.data,
      K = this.width;
    for (let base = 0; base < x.size; base += K) {
      let max = -Infinity;
      for (let k = 0; k < K; k++) if (xd[base + k]! > max) max = xd[base + k]!;
      let sum = 0;
      for (let k = 0; k < K; k++) sum += Math.exp(xd[base + k]! - max);
      const inv = 1 / sum;
      for (let k = 0; k < K; k++) yd[base + k] = Math.exp(xd[base + k]! - max) * inv;
    }
    this.y = y;
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.y ? [this.y.data] : [];
  }

  /** dx = y ⊙ (dy − Σ_k dy_k·y_k), row by row. */
  backward(dy: Tensor): Tensor {
    const dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
    const yd = this.y!.data,
      g = dy.data,
      out = dx.data,
      K = this.width;
    for (let base = 0; base < dy.size; base += K) {
      let dot = 0;
      for (let k = 0; k < K; k++) dot += g[base + k]! * yd[base + k]!;
      for (let k = 0; k < K; k++) out[base + k] = yd[base + k]! * (g[base + k]! - dot);
    }
    return dx;
  }
}
