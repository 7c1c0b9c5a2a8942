import type { Tensor } from '../tensor/tensor.ts';
import { formatShape, shapeSize, VARIABLE } from '../tensor/shape.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext } from './layer.ts';

/** [N, ...] → [N, features]; a reshape, no copy. */
export class Flatten extends BaseLayer {
  readonly outputShape: readonly number[];

  constructor(backend: Backend, name: string, inputShape: readonly number[]) {
    super(backend, name, inputShape);
    if (inputShape.includes(VARIABLE)) {
      throw this.error(
        `cannot flatten a variable-length input ${formatShape(inputShape)}; end the sequence first (an lstm or gru with returnSequences: false)`,
      );
    }
    this.outputShape = [shapeSize(inputShape)];
  }

  forward(x: Tensor, _ctx: ForwardContext): Tensor {
    return x.reshape([x.batch, this.outputShape[0]!]);
  }

  backward(dy: Tensor): Tensor {
    return dy.reshape([dy.batch, ...this.inputShape]);
  }
}
