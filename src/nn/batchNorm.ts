import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { BaseLayer, type ForwardContext, type ParamSpec, type StateSpec } from './layer.ts';

/**
 * Sums small vectors of batch statistics over every replica that shares one batch (synchronised
 * BatchNorm). src/nn knows nothing of devices: src/parallel supplies it (over a Communicator).
 * Every replica calls `sum` in the same order with vectors of the same length.
 */
export interface StatsReducer {
  sum(values: Float32Array): Promise<void>;
}

/**
 * Batch normalisation over the last axis (channels of NHWC images, features of flat inputs).
 * Training normalises with the batch's biased variance and updates running statistics with the
 * unbiased one (PyTorch's convention): running = momentum·running + (1 − momentum)·batch.
 *
 * Statistics are per replica by default. With a `StatsReducer` (syncBatchNorm) the batch mean and
 * variance, and the two sums backward needs, are summed over all replicas, so G replicas with
 * batch b compute exactly what one replica computes on the G·b samples; the layer must then run
 * through forwardAsync/backwardAsync in training.
 *
 * Every step between the passes is a kernel, so the layer runs where the backend's arrays live
 * (webgpu). Synchronised sums cross to the host for the reducer and back (DeviceStorage), each
 * sum where the next kernel needs it: the statistics' two in forward, the gradient's one in backward.
 */
export class BatchNorm extends BaseLayer {
  readonly outputShape: readonly number[];
  readonly channels: number;
  private gamma!: Float32Array;
  private beta!: Float32Array;
  private dgamma!: Float32Array;
  private dbeta!: Float32Array;
  private runningMean!: Float32Array;
  private runningVar!: Float32Array;
  private xhat: Float32Array | null = null;
  private readonly invStd: Float32Array;
  private readonly mean: Float32Array;
  /** [Σx per channel…, rows]: the count rides along when the sums are synchronised */
  private readonly channelTotals: Float32Array;
  private readonly squares: Float32Array;
  /** [Σdy per channel…, Σdy·x̂ per channel…] */
  private readonly gradTotals: Float32Array;
  private trainingPass = false;
  /** rows normalised together in the last training pass (over all replicas when synchronised) */
  private totalRows = 0;
  private reducer: StatsReducer | null = null;

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly momentum: number,
    readonly epsilon: number,
  ) {
    super(backend, name, inputShape);
    this.outputShape = inputShape;
    this.channels = inputShape[inputShape.length - 1]!;
    // in the backend's memory: its kernels read them without a copy
    this.invStd = backend.alloc(this.channels);
    this.mean = backend.alloc(this.channels);
    this.channelTotals = backend.alloc(this.channels + 1);
    this.squares = backend.alloc(this.channels);
    this.gradTotals = backend.alloc(2 * this.channels);
  }

  /** Synchronise batch statistics through `reducer` (null: per-replica statistics again). */
  setReducer(reducer: StatsReducer | null): void {
    this.reducer = reducer;
  }

  get needsAsync(): boolean {
    return this.reducer !== null;
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
    if (ctx.training && this.reducer)
      throw this.error('synchronised batch statistics need the asynchronous pass (Sequential.forwardAsync)');
    if (ctx.training) {
      // the same two passes as the synchronised path, with local sums
      const rows = x.size / this.channels;
      this.backend.batchNormMean(this.sums(x), rows, this.mean, this.channels);
      this.setVariance(this.centredSquares(x), rows);
    } else {
      this.backend.batchNormRunningStatistics(
        this.runningMean,
        this.runningVar,
        this.epsilon,
        this.mean,
        this.invStd,
        this.channels,
      );
    }
    this.trainingPass = ctx.training;
    return this.normalise(x);
  }

  async forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    const reducer = this.reducer;
    if (!ctx.training || !reducer) return this.forward(x, ctx);
    // two passes (mean, then centred squares) keep the variance accurate after float32 transport
    const C = this.channels,
      s = this.sums(x);
    await this.sumOverReplicas(reducer, s, x.size / C);
    const rows = s[C]!;
    this.backend.batchNormMean(s, rows, this.mean, C);
    const sq = this.centredSquares(x);
    await this.sumOverReplicas(reducer, sq);
    this.setVariance(sq, rows);
    this.trainingPass = true;
    return this.normalise(x);
  }

  /**
   * `values` (a kernel's output) summed over the replicas through `reducer`; with `rows`, its last
   * slot carries this replica's row count into the sum. On a device the values come to the host for
   * the reducer and go back for the next kernel.
   */
  private async sumOverReplicas(reducer: StatsReducer, values: Float32Array, rows?: number): Promise<void> {
    const device = this.backend.device;
    await device?.toHost([values]);
    if (rows !== undefined) values[values.length - 1] = rows;
    await reducer.sum(values);
    device?.fromHost([values]);
  }

  /** Σx per channel of this replica's batch, in channelTotals (its last slot, the row count, is the caller's). */
  private sums(x: Tensor): Float32Array {
    const C = this.channels;
    this.backend.channelSums(x.data, this.channelTotals, x.size / C, C);
    return this.channelTotals;
  }

  /** Σ(x − mean)² per channel of this replica's batch. */
  private centredSquares(x: Tensor): Float32Array {
    const C = this.channels;
    this.backend.channelCentredSquares(x.data, this.mean, this.squares, x.size / C, C);
    return this.squares;
  }

  /** Batch variance from Σ(x − mean)² over `rows` rows; updates the running statistics. */
  private setVariance(sq: Float32Array, rows: number): void {
    this.totalRows = rows;
    const { momentum, epsilon, invStd, runningMean, runningVar } = this;
    this.backend.batchNormStatistics(
      sq,
      rows,
      this.mean,
      momentum,
      epsilon,
      invStd,
      runningMean,
      runningVar,
      this.channels,
    );
  }

  private normalise(x: Tensor): Tensor {
    const C = this.channels,
      rows = x.size / C;
    const y = new Tensor(x.shape, this.buffer('y', x.size));
    const xhat = this.buffer('xhat', x.size);
    this.backend.batchNormNormalise(x.data, this.mean, this.invStd, this.gamma, this.beta, xhat, y.data, rows, C);
    this.xhat = xhat;
    return y;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return this.xhat ? [this.xhat] : [];
  }

  backward(dy: Tensor): Tensor {
    if (this.trainingPass && this.reducer)
      throw this.error('synchronised batch statistics need the asynchronous pass (Sequential.backwardAsync)');
    const sums = this.gradSums(dy);
    this.backend.batchNormParamGrads(sums, this.dgamma, this.dbeta, this.channels);
    return this.inputGrad(dy, sums);
  }

  async backwardAsync(dy: Tensor): Promise<Tensor> {
    const reducer = this.reducer;
    if (!this.trainingPass || !reducer) return this.backward(dy);
    const sums = this.gradSums(dy);
    // γ and β gradients are this replica's share (the strategy combines parameter gradients)…
    this.backend.batchNormParamGrads(sums, this.dgamma, this.dbeta, this.channels);
    // …the input gradient needs the sums over the whole synchronised batch
    await this.sumOverReplicas(reducer, sums);
    return this.inputGrad(dy, sums);
  }

  /** [Σdy per channel…, Σdy·x̂ per channel…] of this replica's batch. */
  private gradSums(dy: Tensor): Float32Array {
    const C = this.channels;
    this.backend.batchNormGradSums(dy.data, this.xhat!, this.gradTotals, dy.size / C, C);
    return this.gradTotals;
  }

  private inputGrad(dy: Tensor, sums: Float32Array): Tensor {
    const C = this.channels,
      rows = dy.size / C;
    const dx = new Tensor(dy.shape, this.buffer('dx', dy.size));
    if (!this.trainingPass) {
      // Statistics were constants (evaluation mode): the layer is affine.
      this.backend.batchNormAffineInputGrad(dy.data, this.gamma, this.invStd, dx.data, rows, C);
      return dx;
    }
    // dx = γ·invStd/M · (M·dy − Σdy − x̂·Σ(dy·x̂)), M the rows normalised together
    this.backend.batchNormInputGrad(
      dy.data,
      this.xhat!,
      this.gamma,
      this.invStd,
      sums,
      this.totalRows,
      dx.data,
      rows,
      C,
    );
    return dx;
  }
}
