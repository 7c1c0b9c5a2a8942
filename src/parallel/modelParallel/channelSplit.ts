import { Tensor } from '../../tensor/tensor.ts';
import type { Backend } from '../../kernels/backend.ts';
import { ownedSlice, type Communicator } from '../../comm/communicator.ts';
import { BufferPool, type ForwardContext } from '../../nn/layer.ts';
import { Conv2D } from '../../nn/conv2d.ts';
import type { Conv2DSpec } from '../../nn/spec.ts';
import { allreduceSum } from './activationExchange.ts';
import { DeviceCopies } from './deviceCopies.ts';

/** The convolution's fields of its spec, plus where it sits. */
export interface ChannelSplitOptions
  extends Pick<Conv2DSpec, 'filters' | 'kernelSize' | 'strides' | 'padding' | 'activation' | 'useBias'> {
  /** e.g. 'model.layers[0] conv2d', for errors */
  name: string;
  inputShape: readonly number[];
}

/**
 * Channel-split Conv2D: rank r of G holds output channels [start, end) of one convolution (its
 * slice of the kernel [KH, KW, C, F] and of the bias) and computes them for the whole batch, which
 * every rank has. Forward gathers the channels so every rank gets the whole output; backward takes
 * this rank's channels of the (replicated) output gradient, accumulates its own weight gradients,
 * and sums the partial input gradients over the ranks. Uneven splits (F not a multiple of G) give
 * the first ranks one more channel. Where the arrays live on a device, the gather and the sum cross
 * to the host (one read, one upload each) and taking this rank's channels is a kernel.
 */
export class ChannelSplitConv2D {
  readonly channels: { start: number; end: number };
  /** this rank's kernel slice [KH, KW, C, end − start] then its bias slice */
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly local: Conv2D;
  readonly outputShape: readonly number[];
  private readonly kernelSize: number;
  private readonly pool: BufferPool;
  private readonly copies: DeviceCopies;
  /** channels in the largest rank's slice (allgather moves equal slices) */
  private readonly widest: number;

  constructor(
    private readonly backend: Backend,
    private readonly comm: Communicator,
    readonly o: ChannelSplitOptions,
  ) {
    if (comm.size > o.filters) {
      throw new Error(
        `${o.name}: cannot split ${o.filters} filters by channel over ${comm.size} devices; ` +
          `use at most ${o.filters} devices or more filters`,
      );
    }
    this.channels = ownedSlice(o.filters, comm.size, comm.rank);
    this.widest = Math.ceil(o.filters / comm.size);
    const mine = this.channels.end - this.channels.start;
    this.local = new Conv2D(
      backend,
      o.name,
      o.inputShape,
      mine,
      o.kernelSize,
      o.strides,
      o.padding,
      o.activation,
      o.useBias,
    );
    const [kernel, bias] = this.local.params();
    this.kernelSize = kernel!.shape.reduce((a, b) => a * b);
    const size = this.kernelSize + (bias ? mine : 0);
    this.params = backend.alloc(size);
    this.grads = backend.alloc(size);
    const views = (a: Float32Array) => (bias ? [a.subarray(0, this.kernelSize), a.subarray(this.kernelSize)] : [a]);
    this.local.bind(views(this.params), views(this.grads));
    const [OH, OW] = this.local.outputShape as [number, number, number];
    this.outputShape = [OH, OW, o.filters];
    this.pool = new BufferPool(backend);
    this.copies = new DeviceCopies(backend);
  }

  /** Takes this rank's channels from the whole layer's kernel [KH, KW, C, F] and bias [F]. */
  loadSlice(kernel: Float32Array, bias: Float32Array | null): void {
    const { start, end } = this.channels,
      F = this.o.filters,
      mine = end - start;
    for (let i = 0, rows = kernel.length / F; i < rows; i++)
      this.params.set(kernel.subarray(i * F + start, i * F + end), i * mine);
    if (bias && this.o.useBias) this.params.set(bias.subarray(start, end), this.kernelSize);
  }

  /** Writes this rank's weight gradients into the whole layer's gradient arrays (others untouched). */
  storeGradSlice(dKernel: Float32Array, dBias: Float32Array | null): void {
    const { start, end } = this.channels,
      F = this.o.filters,
      mine = end - start;
    for (let i = 0, rows = dKernel.length / F; i < rows; i++)
      dKernel.set(this.grads.subarray(i * mine, (i + 1) * mine), i * F + start);
    if (dBias && this.o.useBias) dBias.set(this.grads.subarray(this.kernelSize, this.kernelSize + mine), start);
  }

  /** The whole output [N, OH, OW, F] on every rank. */
  async forward(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    const part = this.local.forward(x, ctx);
    const { size, rank } = this.comm,
      F = this.o.filters,
      W = this.widest;
    const pixels = part.size / (this.channels.end - this.channels.start);
    const chunk = pixels * W;
    const all = this.pool.f32('gather', chunk * size);
    const device = this.backend.device;
    await device?.toHost([part.data]);
    all.set(part.data, rank * chunk);
    await this.comm.allgather(all);
    const y = new Tensor([x.batch, ...this.outputShape], this.pool.f32('y', pixels * F));
    for (let r = 0; r < size; r++) {
      const { start, end } = ownedSlice(F, size, r),
        c = end - start,
        base = r * chunk;
      for (let p = 0; p < pixels; p++) y.data.set(all.subarray(base + p * c, base + (p + 1) * c), p * F + start);
    }
    device?.fromHost([y.data]);
    return y;
  }

  /** From the whole output gradient: this rank's weight gradients, and the input gradient summed over ranks. */
  async backward(dy: Tensor, needInputGrad = true): Promise<Tensor | null> {
    const { start, end } = this.channels,
      F = this.o.filters,
      mine = end - start;
    const pixels = dy.size / F;
    const part = new Tensor([dy.batch, ...this.local.outputShape], this.pool.f32('dy', pixels * mine));
    this.copies.columns(dy.data, pixels, F, start, end, part.data);
    const dx = this.local.backward(part, needInputGrad);
    if (dx) await allreduceSum(this.comm, this.backend.device, dx.data);
    return dx;
  }
}
