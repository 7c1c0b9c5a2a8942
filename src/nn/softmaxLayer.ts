import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext } from './layer.ts';

/**
 * Softmax over the last axis (each sample's scores, or each pixel's channels): an output layer for
 * models whose outputs are read as probabilities. With `loss: softmaxCrossEntropy` the loss already
 * applies softmax to the logits, so the config refuses a softmax last layer there (a second softmax
 * would flatten the gradient); predictions of such a model apply softmax themselves.
 * Rows are the backend's softmax kernels, with the row maximum subtracted so that exp never overflows.
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
    this.backend.softmaxForward(x.data, y.data, x.size / this.width, this.width);
    this.y = y;
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.y ? [this.y.data] : [];
  }

  /** dx = y ⊙ (dy − Σ_k dy_k·y_k), row by row. */
  backward(dy: Tensor): Tensor {
    const dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
    this.backend.softmaxBackward(this.y!.data, dy.data, dx.data, dy.size / this.width, this.width);
    return dx;
  }
}
