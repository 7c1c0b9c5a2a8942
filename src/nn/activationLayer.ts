import { Tensor } from '../tensor/tensor.ts';
import type { ActivationKind, Backend } from '../kernels/backend.ts';
import { BaseLayer, BufferPool, type ForwardContext } from './layer.ts';

/** A standalone elementwise activation (relu, clipped relu, tanh, sigmoid). */
export class ActivationLayer extends BaseLayer {
  readonly outputShape: readonly number[];
  private y: Tensor | null = null;

  constructor(backend: Backend, name: string, inputShape: readonly number[],
              readonly kind: ActivationKind, readonly cap = 20, pool?: BufferPool) {
    super(backend, name, inputShape, pool);
    this.outputShape = inputShape;
  }

  forward(x: Tensor, _ctx: ForwardContext): Tensor {
    const y = new Tensor(x.shape, this.buffer('y', x.size));
    this.backend.activationForward(this.kind, x.data, y.data, this.cap);
    this.y = y;
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.y ? [this.y.data] : [];
  }

  backward(dy: Tensor): Tensor {
    const dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
    this.backend.activationBackward(this.kind, this.y!.data, dy.data, dx.data, this.cap);
    return dx;
  }
}
