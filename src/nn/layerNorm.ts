import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext, type ParamSpec } from './layer.ts';
import { isSequenceShape, validFrames } from './sequence.ts';

/**
 * Layer normalisation over the last axis (PyTorch's nn.LayerNorm(features)): each row — a frame of
 * a sequence, a pixel's channels, a flat sample — is normalised by its own mean and biased variance,
 * then scaled by gamma and shifted by beta. No batch statistics, so it suits variable-length
 * sequences: padded frames (ForwardContext.lengths) give 0 and take no part in the gradients.
 */
export class LayerNorm extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly features: number;
  private gamma!: Float32Array;
  private beta!: Float32Array;
  private dgamma!: Float32Array;
  private dbeta!: Float32Array;
  private xhat: Float32Array | null = null;
  private invStd: Float32Array | null = null;
  /** per row of a padded sequence batch: 1 at a valid frame, 0 at padding; null when every row is valid */
  private valid: Int32Array | null = null;

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly epsilon: number,
  ) {
    super(backend, name, inputShape);
    this.outputShape = inputShape;
    this.features = inputShape[inputShape.length - 1]!;
  }

  override params(): ParamSpec[] {
    const D = this.features;
    return [
      { name: 'gamma', shape: [D], init: 'ones', fanIn: D, fanOut: D },
      { name: 'beta', shape: [D], init: 'zeros', fanIn: D, fanOut: D },
    ];
  }

  override bind(params: Float32Array[], grads: Float32Array[]): void {
    [this.gamma, this.beta] = params as [Float32Array, Float32Array];
    [this.dgamma, this.dbeta] = grads as [Float32Array, Float32Array];
  }

  /** Marks each row valid or padding (rows of a sequence batch past their sample's length); null: every row valid. */
  private markRows(x: Tensor, rows: number, ctx: ForwardContext): Int32Array | null {
    if (!isSequenceShape(this.inputShape) || x.shape.length !== 3 || !ctx.lengths) return null;
    const valid = this.pool.i32('valid', rows);
    const N = x.shape[0]!,
      T = x.shape[1]!;
    for (let n = 0; n < N; n++) {
      const len = validFrames(ctx.lengths, n, T);
      valid.fill(1, n * T, n * T + len).fill(0, n * T + len, (n + 1) * T);
    }
    return valid;
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    const D = this.features,
      rows = x.size / D;
    const valid = (this.valid = this.markRows(x, rows, ctx));
    const xhat = (this.xhat = this.buffer('xhat', x.size));
    const invStd = (this.invStd = this.buffer('invStd', rows));
    const y = new Tensor(x.shape, this.buffer('y', x.size));
    this.backend.layerNormForward(x.data, this.gamma, this.beta, valid, rows, D, this.epsilon, xhat, invStd, y.data);
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.xhat ? [this.xhat, this.invStd!] : [];
  }

  backward(dy: Tensor): Tensor {
    if (!this.xhat || !this.invStd) throw this.error('backward before forward');
    const D = this.features,
      rows = dy.size / D;
    const dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
    this.backend.layerNormBackward(
      dy.data,
      this.xhat,
      this.invStd,
      this.gamma,
      this.valid,
      rows,
      D,
      dx.data,
      this.dgamma,
      this.dbeta,
    );
    return dx;
  }
}
