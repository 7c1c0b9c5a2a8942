import { Tensor } from '../tensor/tensor.ts';
import { activationParam, backwardReadsInput, type ActivationKind, type Backend } from '../kernels/backend.ts';
import { BaseLayer, BufferPool, type ForwardContext } from './layer.ts';

/** A standalone elementwise activation (relu, clipped relu, leaky relu, tanh, sigmoid, gelu). */
export class ActivationLayer extends BaseLayer {
  readonly outputShape: readonly number[];
  /** clippedRelu's ceiling or leakyRelu's slope (the kernels' `cap`) */
  readonly cap: number;
  /** what backward reads: the output, or for gelu the input */
  private saved: Tensor | null = null;

  constructor(backend: Backend, name: string, inputShape: readonly number[],
              readonly kind: ActivationKind, cap?: number, pool?: BufferPool) {
    super(backend, name, inputShape, pool);
    this.outputShape = inputShape;
    this.cap = activationParam(kind, cap);
  }

  forward(x: Tensor, _ctx: ForwardContext): Tensor {
    const y = new Tensor(x.shape, this.buffer('y', x.size));
    this.backend.activationForward(this.kind, x.data, y.data, this.cap);
    this.saved = backwardReadsInput(this.kind) ? x : y;
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.saved ? [this.saved.data] : [];
  }

  backward(dy: Tensor): Tensor {
    const dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
    this.backend.activationBackward(this.kind, this.saved!.data, dy.data, dx.data, this.cap);
    return dx;
  }
}
