import { Tensor } from '../../tensor/tensor.ts';
import { shapeSize } from '../../tensor/shape.ts';
import type { Backend } from '../../kernels/backend.ts';
import type { Communicator } from '../../comm/communicator.ts';
import type { ForwardContext, ParamSpec } from '../../nn/layer.ts';
import type { Conv2DSpec } from '../../nn/spec.ts';
import { ChannelSplitConv2D } from './channelSplit.ts';
import {
  gatherSectionInput,
  sectionRows,
  CollectiveBuffers,
  ExchangeScratch,
  type RowSplit,
} from './activationExchange.ts';
import { SectionLayer, shardParamSpecs } from './sectionLayer.ts';
import { DeviceCopies } from './deviceCopies.ts';

/**
 * A conv2d marked `parallel: model`, as a stage of the model-parallel section: a channel split
 * (ChannelSplitConv2D) on the job's whole batch. At the section's entry (`inputRows`) it first
 * all-gathers every device's rows; its output has all channels on every device ('full'). Backward
 * sums the partial input gradients over devices (and keeps this device's rows at the entry).
 *
 * Its weights are this device's filter slice in the model's flat buffer (bound like a dense
 * shard: kernel [KH, KW, C, mine], bias [mine]); the split layer computes on its own copy and
 * the weight gradients are added back × weightGradScale (1/G: the whole batch's rows each carry
 * the data-parallel G/(G·b) scale). They are complete here and are not all-reduced. The copies
 * and the gradients' scaled sums are kernels: on a GPU only the exchanges cross to the host.
 */
export class ChannelParallelConv extends SectionLayer {
  readonly conv: ChannelSplitConv2D;
  readonly outputShape: readonly number[];
  private kernel!: Float32Array;
  private bias: Float32Array | null = null;
  private dKernel!: Float32Array;
  private dBias: Float32Array | null = null;
  private readonly shared: CollectiveBuffers;
  private readonly scratch = new ExchangeScratch();
  private readonly copies: DeviceCopies;
  private rows: RowSplit | null = null;

  constructor(
    private readonly backend: Backend,
    private readonly comm: Communicator,
    readonly name: string,
    private readonly spec: Conv2DSpec,
    readonly inputShape: readonly number[],
    private readonly o: { inputRows: boolean; weightGradScale: number },
  ) {
    super();
    this.conv = new ChannelSplitConv2D(backend, comm, {
      name,
      inputShape,
      filters: spec.filters,
      kernelSize: spec.kernelSize,
      strides: spec.strides,
      padding: spec.padding,
      activation: spec.activation,
      useBias: spec.useBias,
    });
    this.outputShape = this.conv.outputShape;
    this.shared = new CollectiveBuffers(backend, comm);
    this.copies = new DeviceCopies(backend);
  }

  /** This device's kernel [KH, KW, C, mine] and bias [mine] slices, drawn like the unsplit layer's. */
  override params(): ParamSpec[] {
    const {
        kernelSize: [KH, KW],
        filters,
        activation,
      } = this.spec,
      C = this.inputShape[2]!;
    return shardParamSpecs(
      this.conv.local.params().map((p) => p.shape),
      activation,
      KH * KW * C,
      KH * KW * filters,
    );
  }

  /** the whole batch's input and this device's channels of the output (the split conv's own arrays) */
  savedForBackward(): readonly ArrayBufferView[] {
    return this.conv.local.savedForBackward();
  }

  /** This device's kernel and bias slices (and their gradients) in the model's flat buffers. */
  override bind(params: Float32Array[], grads: Float32Array[]): void {
    this.kernel = params[0]!;
    this.dKernel = grads[0]!;
    this.bias = params[1] ?? null;
    this.dBias = grads[1] ?? null;
  }

  async forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    const rows = sectionRows(ctx, this.comm.size);
    const input = this.o.inputRows
      ? await gatherSectionInput(this.comm, this.backend.device, x, rows, this.inputShape, this.shared, this.scratch)
      : x;
    this.rows = rows;
    // the optimizer updates the flat buffer: the split layer computes on a copy taken each step
    this.copies.whole(this.kernel, this.conv.params);
    if (this.bias) this.copies.whole(this.bias, this.conv.params, this.kernel.length);
    return this.conv.forward(input, ctx);
  }

  async backwardAsync(dy: Tensor, needInputGrad = true): Promise<Tensor | null> {
    const g = this.conv.grads,
      k = this.kernel.length;
    this.backend.fill(g, 0);
    const dx = await this.conv.backward(dy, needInputGrad);
    this.backend.axpy(this.o.weightGradScale, g.subarray(0, k), this.dKernel);
    if (this.dBias) this.backend.axpy(this.o.weightGradScale, g.subarray(k, k + this.dBias.length), this.dBias);
    if (!dx || !this.o.inputRows) return dx;
    // dx is the whole batch's, summed over devices: this device's rows go back to its layers
    const rows = this.rows!,
      r = this.comm.rank,
      width = shapeSize(this.inputShape);
    const start = rows.starts[r]! * width;
    return new Tensor([rows.counts[r]!, ...this.inputShape], dx.data.subarray(start, start + rows.counts[r]! * width));
  }
}
