import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import type { Communicator } from '../comm/communicator.ts';
import { BufferPool, type ForwardContext, type Layer } from '../nn/layer.ts';
import { planTiles, layerPools, TileStack, type TilePlan } from '../nn/spatialTiles.ts';
import { blockOf, copyBlock, type Block } from '../nn/nhwcBlock.ts';
import { ownedSlice } from '../comm/communicator.ts';
import type { AxisRange } from '../nn/windowGeometry.ts';

const len = (r: AxisRange) => r.end - r.start;

/** [start, end) rows × columns: a rectangle of the image. */
interface Rect { rows: AxisRange; cols: AxisRange }
function intersect(a: Rect, b: Rect): Rect | null {
  const rows = { start: Math.max(a.rows.start, b.rows.start), end: Math.min(a.rows.end, b.rows.end) };
  const cols = { start: Math.max(a.cols.start, b.cols.start), end: Math.min(a.cols.end, b.cols.end) };
  return rows.start < rows.end && cols.start < cols.end ? { rows, cols } : null;
}

const TAG_HALO = 0x5a10, TAG_GRAD = 0x5a11;

/**
 * Spatial split, PARALLEL mode: rank r of a tilesH × tilesW grid of ranks computes tile r of the
 * stack's output for the whole batch and keeps its activations. Input arrives either
 * - replicated (every rank has the whole image: it cuts its tile with halo), or
 * - owned: rank r holds only its block of the input (an even grid split of rows × columns) and
 *   receives the halo rows/columns it needs from the ranks that own them (point to point).
 * Backward returns the input gradient in the same form (replicated: summed over ranks; owned: the
 * parts of the halo gradients that belong to other ranks are sent to them and added), and
 * `reduceGradients` sums the stack's parameter gradients over ranks.
 */
export class ParallelSpatialStack {
  readonly plan: TilePlan;
  readonly plans: TilePlan[];
  readonly tile: TileStack;
  private readonly io: BufferPool;
  private batch = 0;

  constructor(backend: Backend, private readonly comm: Communicator, readonly stack: readonly Layer[],
              readonly tilesH: number, readonly tilesW: number) {
    if (tilesH * tilesW !== comm.size) {
      throw new Error(`${stack[0]?.name ?? 'spatial split'}: a ${tilesH}×${tilesW} tile grid needs ${tilesH * tilesW} devices, the group has ${comm.size}`);
    }
    this.plans = planTiles(stack, tilesH, tilesW);
    this.plan = this.plans[comm.rank]!;
    this.tile = new TileStack(backend, stack, this.plan, layerPools(backend, stack.length));
    this.io = new BufferPool(backend);
  }

  /** The input block rank `rank` owns: an even split of the rows and columns over the grid. */
  ownedRect(rank: number): Rect {
    const [H, W] = this.stack[0]!.inputShape as [number, number, number];
    const i = Math.floor(rank / this.tilesW), j = rank % this.tilesW;
    return { rows: ownedSlice(H, this.tilesH, i), cols: ownedSlice(W, this.tilesW, j) };
  }

  private neededRect(rank: number): Rect {
    return { rows: this.plans[rank]!.inRows, cols: this.plans[rank]!.inCols };
  }

  private tileInputTensor(n: number): Tensor {
    const [h, w, c] = this.tile.inputShape as [number, number, number];
    return new Tensor([n, h, w, c], this.io.f32('x', n * h * w * c));
  }

  /** Forward from the whole input (every rank has it); returns this rank's output tile. */
  forwardReplicated(x: Tensor, ctx: ForwardContext): Tensor {
    const xt = this.tileInputTensor(x.batch);
    copyBlock(blockOf(x), this.plan.inRows.start, this.plan.inCols.start, blockOf(xt), 0, 0, xt.shape[1]!, xt.shape[2]!);
    this.batch = x.batch;
    return this.tile.forward(xt, ctx);
  }

  /** Forward from this rank's owned input block, exchanging halos; returns this rank's output tile. */
  async forwardOwned(xOwned: Tensor, ctx: ForwardContext): Promise<Tensor> {
    const { rank } = this.comm;
    const xt = this.tileInputTensor(xOwned.batch);
    // my owned block goes where peers need it; what I need comes from peers' owned blocks
    await this.exchangeBlocks(xOwned, this.ownedRect(rank), (u) => this.neededRect(u), xt, this.neededRect(rank), (u) => this.ownedRect(u), TAG_HALO, false);
    this.batch = xOwned.batch;
    return this.tile.forward(xt, ctx);
  }

  /**
   * Point-to-point block exchange between ranks: `src` covers `srcRect` of the whole image, `dst`
   * covers `dstRect`. To every peer u goes the part of src inside `peerDst(u)`; from every peer comes
   * the part of `peerSrc(u)` inside dstRect; this rank's own overlap is copied. `add` sums into dst
   * (overlapping halo gradients) instead of overwriting.
   */
  private async exchangeBlocks(src: Tensor, srcRect: Rect, peerDst: (u: number) => Rect,
                               dst: Tensor, dstRect: Rect, peerSrc: (u: number) => Rect, tag: number, add: boolean): Promise<void> {
    const { rank, size } = this.comm;
    const n = src.batch, C = src.shape[3]!;
    const io: Promise<void>[] = [];
    const received: [Rect, Float32Array][] = [];
    for (let u = 0; u < size; u++) {
      if (u === rank) continue;
      const out = intersect(srcRect, peerDst(u));
      if (out) {
        const b: Block = { data: new Float32Array(n * len(out.rows) * len(out.cols) * C), h: len(out.rows), w: len(out.cols), c: C };
        copyBlock(blockOf(src), out.rows.start - srcRect.rows.start, out.cols.start - srcRect.cols.start, b, 0, 0, b.h, b.w);
        io.push(this.comm.send(b.data, u, tag));
      }
      const inc = intersect(peerSrc(u), dstRect);
      if (inc) {
        const buf = new Float32Array(n * len(inc.rows) * len(inc.cols) * C);
        received.push([inc, buf]);
        io.push(this.comm.recv(buf, u, tag));
      }
    }
    const mine = intersect(srcRect, dstRect);
    if (mine) {
      copyBlock(blockOf(src), mine.rows.start - srcRect.rows.start, mine.cols.start - srcRect.cols.start,
        blockOf(dst), mine.rows.start - dstRect.rows.start, mine.cols.start - dstRect.cols.start, len(mine.rows), len(mine.cols), add);
    }
    await Promise.all(io);
    for (const [r, data] of received) {
      copyBlock({ data, h: len(r.rows), w: len(r.cols), c: C }, 0, 0, blockOf(dst),
        r.rows.start - dstRect.rows.start, r.cols.start - dstRect.cols.start, len(r.rows), len(r.cols), add);
    }
  }

  /** Every rank's output tile assembled into the whole output, on every rank. */
  async gatherOutput(yTile: Tensor): Promise<Tensor> {
    const n = yTile.batch, [OH, OW, F] = this.stack[this.stack.length - 1]!.outputShape as [number, number, number];
    // allgather moves equal slices: pad every tile to the largest
    const chunk = n * Math.max(...this.plans.map((p) => len(p.outRows) * len(p.outCols))) * F;
    const all = this.io.f32('gather', chunk * this.comm.size);
    all.set(yTile.data, this.comm.rank * chunk);
    await this.comm.allgather(all);
    const y = new Tensor([n, OH, OW, F], this.io.f32('y', n * OH * OW * F));
    for (const p of this.plans) {
      const h = len(p.outRows), w = len(p.outCols);
      copyBlock({ data: all.subarray(p.index * chunk, p.index * chunk + n * h * w * F), h, w, c: F }, 0, 0, blockOf(y), p.outRows.start, p.outCols.start, h, w);
    }
    return y;
  }

  /** This rank's tile of a whole-output gradient. */
  sliceOutput(dy: Tensor): Tensor {
    const [oh, ow, f] = this.tile.outputShape as [number, number, number];
    const dyt = new Tensor([dy.batch, oh, ow, f], this.io.f32('dy', dy.batch * oh * ow * f));
    copyBlock(blockOf(dy), this.plan.outRows.start, this.plan.outCols.start, blockOf(dyt), 0, 0, oh, ow);
    return dyt;
  }

  /** Backward of this rank's tile; returns the whole input's gradient, summed over ranks (replicated input). */
  async backwardReplicated(dyTile: Tensor): Promise<Tensor> {
    const dxt = this.tile.backward(dyTile);
    const [H, W, C] = this.stack[0]!.inputShape as [number, number, number];
    const dx = new Tensor([this.batch, H, W, C], this.io.f32('dx', this.batch * H * W * C).fill(0));
    copyBlock(blockOf(dxt), 0, 0, blockOf(dx), this.plan.inRows.start, this.plan.inCols.start, len(this.plan.inRows), len(this.plan.inCols));
    await this.comm.allreduce(dx.data, 'sum');
    return dx;
  }

  /** Backward of this rank's tile; returns the gradient of this rank's owned input block (halo gradients exchanged and added). */
  async backwardOwned(dyTile: Tensor): Promise<Tensor> {
    const { rank } = this.comm;
    const dxt = this.tile.backward(dyTile);
    const n = this.batch, C = dxt.shape[3]!;
    const own = this.ownedRect(rank);
    const dx = new Tensor([n, len(own.rows), len(own.cols), C], this.io.f32('dxOwned', n * len(own.rows) * len(own.cols) * C).fill(0));
    // the reverse of forwardOwned: gradients of what I needed go back to the owners and add up there
    await this.exchangeBlocks(dxt, this.neededRect(rank), (u) => this.ownedRect(u), dx, own, (u) => this.neededRect(u), TAG_GRAD, true);
    return dx;
  }

  /** Sums the stack's parameter gradients (a flat buffer holding them) over the ranks. */
  reduceGradients(grads: Float32Array): Promise<void> {
    return this.comm.allreduce(grads, 'sum');
  }
}
