import { shapeSize, formatShape } from './shape.ts';

/**
 * A tensor is a shape plus a Float32Array view. The view may point into a larger flat buffer
 * (a model's parameters, a worker's shared memory), so a Tensor never owns or copies its data.
 */
export class Tensor {
  readonly shape: readonly number[];
  readonly data: Float32Array;

  constructor(shape: readonly number[], data?: Float32Array) {
    const size = shapeSize(shape);
    if (data && data.length !== size) {
      throw new Error(`Tensor: shape ${formatShape(shape)} needs ${size} values, got a buffer of ${data.length}`);
    }
    this.shape = [...shape];
    this.data = data ?? new Float32Array(size);
  }

  get size(): number {
    return this.data.length;
  }

  /** Same data, another shape of equal size. */
  reshape(shape: readonly number[]): Tensor {
    return new Tensor(shape, this.data);
  }

  /** Leading dimension (batch size for activations). */
  get batch(): number {
    return this.shape[0] ?? 1;
  }
}
