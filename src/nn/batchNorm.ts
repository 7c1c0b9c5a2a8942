import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext, type ParamSpec, type StateSpec } from './layer.ts';

/**
 * Batch normalisation over the last axis (channels of NHWC images, features of flat inputs).
 * Training normalises with the batch's biased variance and updates running statistics with the
 * unbiased one (PyTorch's convention): running = momentum·running + (1 − momentum)·batch.
 */
export class BatchNorm extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly channels: number;
  private gamma!: Float32Array; private beta!: Float32Array;
  private dgamma!: Float32Array; private dbeta!: Float32Array;
  private runningMean!: Float32Array; private runningVar!: Float32Array;
  private xhat: Float32Array | null = null;
  private readonly invStd: Float32Array;
  private readonly mean: Float32Array;
  private trainingPass = false;

  constructor(backend: Backend, name: string, inputShape: readonly number[],
              readonly momentum: number, readonly epsilon: number) {
    super(backend, name, inputShape);
    this.outputShape = inputShape;
    this.channels = inputShape[inputShape.length - 1]!;
    this.invStd = new Float32Array(this.channels);
    this.mean = new Float32Array(this.channels);
  }

  override params(): ParamSpec[] {
    const c = this.channels;
    return [
      { name: 'gamma', shape: [c], init: 'ones', fanIn: c, fanOut: c },
      { name: 'beta', shape: [c], init: 'zeros', fanIn: c, fanOut: c },
    ];
  }

  override state(): StateSpec[] {
    return [
      { name: 'runningMean', shape: [this.channels], init: 'zeros' },
      { name: 'runningVar', shape: [this.channels], init: 'ones' },
    ];
  }

  override bind(params: Float32Array[], grads: Float32Array[], state: Float32Array[]): void {
    [this.gamma, this.beta] = params as [Float32Array, Float32Array];
    [this.dgamma, this.dbeta] = grads as [Float32Array, Float32Array];
    [this.runningMean, this.runningVar] = state as [Float32Array, Float32Array];
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    const C = this.channels, rows = x.size / C;
    const y = new Tensor(x.shape, this.buffer('y', x.size));
    const xd = x.data, yd = y.data;
    this.trainingPass = ctx.training;
    if (!ctx.training) {
      for (let c = 0; c < C; c++) {
        this.mean[c] = this.runningMean[c]!;
        this.invStd[c] = 1 / Math.sqrt(this.runningVar[c]! + this.epsilon);
      }
    } else {
      const sum = new Float64Array(C), sumSq = new Float64Array(C);
      for (let r = 0, i = 0; r < rows; r++) {
        for (let c = 0; c < C; c++, i++) { const v = xd[i]!; sum[c] += v; sumSq[c] += v * v; }
      }
      for (let c = 0; c < C; c++) {
        const mean = sum[c]! / rows;
        const variance = Math.max(sumSq[c]! / rows - mean * mean, 0);
        this.mean[c] = mean;
        this.invStd[c] = 1 / Math.sqrt(variance + this.epsilon);
        const unbiased = rows > 1 ? variance * rows / (rows - 1) : variance;
        this.runningMean[c] = this.momentum * this.runningMean[c]! + (1 - this.momentum) * mean;
        this.runningVar[c] = this.momentum * this.runningVar[c]! + (1 - this.momentum) * unbiased;
      }
    }
    const xhat = this.buffer('xhat', x.size);
    for (let r = 0, i = 0; r < rows; r++) {
      for (let c = 0; c < C; c++, i++) {
        const h = (xd[i]! - this.mean[c]!) * this.invStd[c]!;
        xhat[i] = h;
        yd[i] = h * this.gamma[c]! + this.beta[c]!;
      }
    }
    this.xhat = xhat;
    return y;
  }

  backward(dy: Tensor): Tensor {
    const C = this.channels, rows = dy.size / C;
    const dyd = dy.data, xhat = this.xhat!;
    const sumDy = new Float64Array(C), sumDyXhat = new Float64Array(C);
    for (let r = 0, i = 0; r < rows; r++) {
      for (let c = 0; c < C; c++, i++) { const g = dyd[i]!; sumDy[c] += g; sumDyXhat[c] += g * xhat[i]!; }
    }
    for (let c = 0; c < C; c++) { this.dbeta[c] += sumDy[c]!; this.dgamma[c] += sumDyXhat[c]!; }
    const dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
    const dxd = dx.data;
    if (!this.trainingPass) {
      // Statistics were constants (evaluation mode): the layer is affine.
      for (let r = 0, i = 0; r < rows; r++) {
        for (let c = 0; c < C; c++, i++) dxd[i] = dyd[i]! * this.gamma[c]! * this.invStd[c]!;
      }
      return dx;
    }
    // dx = γ·invStd/M · (M·dy − Σdy − x̂·Σ(dy·x̂))
    for (let r = 0, i = 0; r < rows; r++) {
      for (let c = 0; c < C; c++, i++) {
        const k = this.gamma[c]! * this.invStd[c]! / rows;
        dxd[i] = k * (rows * dyd[i]! - sumDy[c]! - xhat[i]! * sumDyXhat[c]!);
      }
    }
    return dx;
  }
}
