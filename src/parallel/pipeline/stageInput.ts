import type { Tensor } from '../../tensor/tensor.ts';
import type { Backend } from '../../kernels/backend.ts';
import { BaseLayer } from '../../nn/layer.ts';

/**
 * The first layer of a pipeline stage after stage 0: the identity, whose backward keeps the
 * gradient it is given — dL/d(stage input), which the stage sends to the stage before it.
 * Sequential's backward skips its first layer's input gradient (the model's input needs none), so
 * the stage's real first layer, second here, computes its input gradient and this layer catches it.
 */
export class StageInput extends BaseLayer {
  readonly outputShape: readonly number[];
  /** dL/d(stage input) of the last backward: a view of the next layer's buffer, valid until its next backward */
  inputGrad: Tensor | null = null;

  constructor(backend: Backend, stage: number, shape: readonly number[]) {
    super(backend, `stage ${stage} input`, shape);
    this.outputShape = shape;
  }

  forward(x: Tensor): Tensor {
    return x;
  }

  backward(dy: Tensor): Tensor | null {
    this.inputGrad = dy;
    return null;
  }
}
