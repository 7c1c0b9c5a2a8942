import { Tensor } from '../tensor/tensor.ts';
import { activationParam, backwardReadsInput, type ActivationKind } from '../kernels/activation.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type BufferPool, type ForwardContext } from './layer.ts';
import { keepLengths } from './sequence.ts';
import { gradThroughActivation, markActivationOutput } from './activationFusion.ts';

/**
 * A standalone elementwise activation (relu, clipped relu, leaky relu, tanh, sigmoid, gelu). On a
 * sequence batch with lengths, padded frames stay 0 (sigmoid(0) is not) and pass no gradient.
 */
export class ActivationLayer extends BaseLayer {
  readonly outputShape: readonly number[];
  /** clippedRelu's ceiling or leakyRelu's slope (the kernels' `cap`) */
  readonly cap: number;
  /** what backward reads: the output, or for gelu the input */
  private saved: Tensor | null = null;
  private lengths: Int32Array | undefined;

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly kind: ActivationKind,
    cap?: number,
    pool?: BufferPool,
  ) {
    super(backend, name, inputShape, pool);
    this.outputShape = inputShape;
    this.cap = activationParam(kind, cap);
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    const y = new Tensor(x.shape, this.buffer('y', x.size));
    this.backend.activationForward(this.kind, x.data, y.data, this.cap);
    this.lengths =
      x.shape.length === 3 && this.inputShape.length === 2 ? keepLengths(this.pool, ctx.lengths) : undefined;
    if (this.lengths) this.backend.zeroPadding(y.data, x.shape[0]!, x.shape[1]!, x.shape[2]!, this.lengths);
    this.saved = backwardReadsInput(this.kind) ? x : y;
    if (!this.lengths) markActivationOutput(y, this.kind, this.cap);
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.saved ? [this.saved.data] : [];
  }

  backward(dy: Tensor): Tensor {
    // a max pool after this layer applied the backward already (activationFusion.ts)
    if (gradThroughActivation(dy, this.saved)) return dy;
    const dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
    this.backend.activationBackward(this.kind, this.saved!.data, dy.data, dx.data, this.cap);
    if (this.lengths) this.backend.zeroPadding(dx.data, dy.shape[0]!, dy.shape[1]!, dy.shape[2]!, this.lengths);
    return dx;
  }
}
