import { Tensor } from '../../tensor/tensor.ts';
import { evenSlice } from '../../tensor/shape.ts';
import type { Backend } from '../../kernels/backend.ts';
import type { Communicator } from '../../comm/communicator.ts';
import { BufferPool, type ForwardContext, type Layer, type ParamSpec } from '../../nn/layer.ts';
import type { SerialSpatialStack } from '../../nn/spatialStack.ts';
import { layerPools, planTiles, TileStack, type TilePlan } from '../../nn/spatialTiles.ts';
import { blockOf, copyBlock } from '../../nn/nhwcBlock.ts';
import type { AxisRange } from '../../nn/windowGeometry.ts';
import {
  gatherSectionInput,
  sectionRows,
  CollectiveBuffers,
  ExchangeScratch,
  type RowSplit,
} from './activationExchange.ts';
import { SectionLayer } from './sectionLayer.ts';

const len = (r: AxisRange) => r.end - r.start;

/**
 * A spatialSplit marked `parallel: model`, as a stage of the model-parallel section: the tiles of
 * the stack's output grid are dealt to the devices in contiguous runs (evenSlice: with more tiles
 * than devices some get two, with fewer some get none), and each device computes its tiles for
 * the job's whole batch from the whole input (replicated: at the section's entry the rows are
 * all-gathered first). The output tiles are all-gathered so the next layer sees whole images
 * ('full'). Backward: each device back-propagates its tiles, the input gradients (tiles overlap
 * by their halos) are summed over devices.
 *
 * The stack's weights are replicated — they stay in the data-parallel part of the flat buffer,
 * bound to `stack` — and each device's gradient holds only its tiles' share, scaled like every
 * data-parallel gradient (G/(G·b) per sample): the strategy's mean over devices is then exactly the
 * whole batch's gradient (Σ over devices of the tile shares / G), with no extra scale here.
 *
 * The tiles are cut and placed on the host, like the serial spatialSplit's: a CPU backend's only
 * (the webgpu backend refuses spatialSplit before a run).
 */
export class SpatialParallelStage extends SectionLayer {
  readonly outputShape: readonly number[];
  readonly plans: TilePlan[];
  private readonly stack: readonly Layer[];
  private tiles: TileStack[] | null = null;
  private readonly io: BufferPool;
  private readonly shared: CollectiveBuffers;
  private readonly scratch = new ExchangeScratch();
  /** tiles [first, end) of device r, by rank */
  private readonly assignment: AxisRange[];
  private rows: RowSplit | null = null;

  /** `unsplit` is the model's serial layer for the same stack: it holds the weights' views (bound through this stage). */
  constructor(
    private readonly backend: Backend,
    private readonly comm: Communicator,
    readonly name: string,
    private readonly unsplit: SerialSpatialStack,
    tiles: readonly [number, number],
    readonly inputShape: readonly number[],
    private readonly o: { inputRows: boolean },
  ) {
    super();
    this.stack = unsplit.stack;
    this.plans = planTiles(this.stack, tiles[0], tiles[1]);
    this.outputShape = this.stack[this.stack.length - 1]!.outputShape;
    this.assignment = Array.from({ length: comm.size }, (_, r) => evenSlice(this.plans.length, comm.size, r));
    this.shared = new CollectiveBuffers(backend, comm);
    this.io = new BufferPool(backend);
  }

  /** The stack's weights, replicated: the same tensors (and names) as the serial layer's. */
  override params(): ParamSpec[] {
    return this.unsplit.params();
  }

  override bind(params: Float32Array[], grads: Float32Array[], state: Float32Array[] = []): void {
    this.unsplit.bind(params, grads, state);
    this.tiles = null;
  }

  /** The tiles this device computes, each with its own scratch (its activations live until backward); made after bind, as tiles share the stack's views. */
  get mine(): TileStack[] {
    const own = this.assignment[this.comm.rank]!;
    this.tiles ??= this.plans
      .slice(own.start, own.end)
      .map((p) => new TileStack(this.backend, this.stack, p, layerPools(this.backend, this.stack.length)));
    return this.tiles;
  }

  /** every own tile's arrays: they are all held until backward */
  savedForBackward(): readonly ArrayBufferView[] {
    return this.tiles?.flatMap((t) => t.savedArrays()) ?? [];
  }

  /** Floats of one device's packed output tiles for n samples: the largest over devices (allgather moves equal blocks). */
  private chunk(n: number): number {
    const F = this.outputShape[2]!;
    return (
      n *
      F *
      Math.max(
        ...this.assignment.map((a) =>
          this.plans.slice(a.start, a.end).reduce((s, p) => s + len(p.outRows) * len(p.outCols), 0),
        ),
      )
    );
  }

  async forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    const rows = sectionRows(ctx, this.comm.size);
    const input = this.o.inputRows
      ? await gatherSectionInput(this.comm, this.backend.device, x, rows, this.inputShape, this.shared, this.scratch)
      : x;
    this.rows = rows;
    const n = input.batch,
      [OH, OW, F] = this.outputShape as [number, number, number];
    const chunk = this.chunk(n);
    const packed = await this.shared.get('tiles', chunk * this.comm.size);
    let at = this.comm.rank * chunk;
    for (const t of this.mine) {
      const p = t.plan,
        [h, w, c] = t.inputShape as [number, number, number];
      const xt = new Tensor([n, h, w, c], this.io.f32(`x${p.index}`, n * h * w * c));
      copyBlock(blockOf(input), p.inRows.start, p.inCols.start, blockOf(xt), 0, 0, h, w);
      const yt = t.forward(xt, ctx);
      packed.set(yt.data.subarray(0, yt.size), at);
      at += yt.size;
    }
    await this.comm.allgather(packed);
    const y = new Tensor([n, OH, OW, F], this.io.f32('y', n * OH * OW * F));
    for (const [r, a] of this.assignment.entries()) {
      let from = r * chunk;
      for (const p of this.plans.slice(a.start, a.end)) {
        const h = len(p.outRows),
          w = len(p.outCols),
          size = n * h * w * F;
        copyBlock(
          { data: packed.subarray(from, from + size), h, w, c: F },
          0,
          0,
          blockOf(y),
          p.outRows.start,
          p.outCols.start,
          h,
          w,
        );
        from += size;
      }
    }
    return y;
  }

  /** dy is the whole output's gradient (the same on every device). */
  async backwardAsync(dy: Tensor, needInputGrad = true): Promise<Tensor | null> {
    const n = dy.batch,
      [H, W, C] = this.inputShape as [number, number, number];
    const dx = needInputGrad ? new Tensor([n, H, W, C], (await this.shared.get('dx', n * H * W * C)).fill(0)) : null;
    for (const t of this.mine) {
      const p = t.plan,
        [oh, ow, f] = t.outputShape as [number, number, number];
      const dyt = new Tensor([n, oh, ow, f], this.io.f32('dy', n * oh * ow * f));
      copyBlock(blockOf(dy), p.outRows.start, p.outCols.start, blockOf(dyt), 0, 0, oh, ow);
      const dxt = t.backward(dyt); // the weight gradients accumulate into the stack's (replicated) views
      if (dx)
        copyBlock(blockOf(dxt), 0, 0, blockOf(dx), p.inRows.start, p.inCols.start, len(p.inRows), len(p.inCols), true);
    }
    if (!dx) return null;
    await this.comm.allreduce(dx.data, 'sum');
    if (!this.o.inputRows) return dx;
    // dx is the whole batch's: this device's rows go back to its data-parallel layers
    const rows = this.rows!,
      r = this.comm.rank,
      width = H * W * C,
      start = rows.starts[r]! * width;
    return new Tensor([rows.counts[r]!, ...this.inputShape], dx.data.subarray(start, start + rows.counts[r]! * width));
  }
}
