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
  /** per row: 1 when the row is a valid frame (or not a sequence), 0 at padding */
  private valid: Int32Array | null = null;
  /** Σdy·x̂ and Σdy per feature over a backward's rows, in float64 (thousands of frames) */
  private readonly sums: Float64Array;

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly epsilon: number,
  ) {
    super(backend, name, inputShape);
    this.outputShape = inputShape;
    this.features = inputShape[inputShape.length - 1]!;
    this.sums = new Float64Array(2 * this.features);
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

  /** Marks each row valid or padding (rows of a sequence batch past their sample's length). */
  private markRows(x: Tensor, rows: number, ctx: ForwardContext): Int32Array {
    const valid = this.pool.i32('valid', rows);
    if (!isSequenceShape(this.inputShape) || x.shape.length !== 3 || !ctx.lengths) return valid.fill(1);
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
    const xd = x.data,
      yd = y.data;
    for (let r = 0; r < rows; r++) {
      const at = r * D;
      if (!valid[r]) {
        xhat.fill(0, at, at + D);
        yd.fill(0, at, at + D);
        invStd[r] = 0;
        continue;
      }
      let mean = 0;
      for (let j = 0; j < D; j++) mean += xd[at + j]!;
      mean /= D;
      let variance = 0;
      for (let j = 0; j < D; j++) {
        const d = xd[at + j]! - mean;
        variance += d * d;
      }
      const inv = 1 / Math.sqrt(variance / D + this.epsilon);
      invStd[r] = inv;
      for (let j = 0; j < D; j++) {
        const h = (xd[at + j]! - mean) * inv;
        xhat[at + j] = h;
        yd[at + j] = h * this.gamma[j]! + this.beta[j]!;
      }
    }
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.xhat ? [this.xhat, this.invStd!] : [];
  }

  backward(dy: Tensor): Tensor {
    const D = this.features,
      rows = dy.size / D;
    const xhat = this.xhat!,
      invStd = this.invStd!,
      valid = this.valid!,
      dyd = dy.data;
    const dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
    const dxd = dx.data,
      sums = this.sums;
    sums.fill(0);
    // dx = invStd · (dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)), dx̂ = dy·γ
    for (let r = 0; r < rows; r++) {
      const at = r * D;
      if (!valid[r]) {
        dxd.fill(0, at, at + D);
        continue;
      }
      let sum = 0,
        sumXhat = 0;
      for (let j = 0; j < D; j++) {
        const g = dyd[at + j]!,
          h = xhat[at + j]!,
          dh = g * this.gamma[j]!;
        sums[j] += g * h;
        sums[D + j] += g;
        sum += dh;
        sumXhat += dh * h;
      }
      const mean = sum / D,
        meanXhat = sumXhat / D,
        inv = invStd[r]!;
      for (let j = 0; j < D; j++) dxd[at + j] = inv * (dyd[at + j]! * this.gamma[j]! - mean - xhat[at + j]! * meanXhat);
    }
    for (let j = 0; j < D; j++) {
      this.dgamma[j] += sums[j]!;
      this.dbeta[j] += sums[D + j]!;
    }
    return dx;
  }
}
