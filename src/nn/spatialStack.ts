import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import { BufferPool, type ForwardContext, type Layer, type ParamSpec, type StateSpec } from './layer.ts';
import { planTiles, layerPools, TileStack, type TilePlan } from './spatialTiles.ts';
import { blockOf, copyBlock } from './nhwcBlock.ts';
import type { AxisRange } from './windowGeometry.ts';

const len = (r: AxisRange) => r.end - r.start;

/**
 * Spatial split, SERIAL mode: one device runs the stack tile after tile, so only one tile's
 * intermediate activations exist at a time. Forward keeps nothing of the tiles; backward
 * recomputes each tile's forward, then back-propagates it (a second forward is the price of the
 * memory). Equal to the unsplit stack: tiles read their halo, and overlapping input gradients add.
 *
 * It is a Layer wrapping the stack's layers (their parameters, in order, under `<k>.<name>`, so a
 * model checkpoints them as `layers.<i>.<k>.kernel`). It needs no communication, so it lives
 * here; the parallel mode (parallel/modelParallel/spatialParallelStage.ts) builds on the same tiles.
 */
export class SerialSpatialStack implements Layer {
  readonly name: string;
  readonly inputShape: readonly number[];
  readonly outputShape: readonly number[];
  readonly plans: TilePlan[];
  private tiles: TileStack[] | null = null;
  private readonly pools: BufferPool[];
  private readonly io: BufferPool;
  private x: Tensor | null = null;
  private ctx: ForwardContext | null = null;
  /** the most bytes one tile's forward kept for backward (the stack's peak activation memory) */
  peakTileBytes = 0;

  /** `name` defaults to the first and last layers' names with the grid. */
  constructor(
    private readonly backend: Backend,
    readonly stack: readonly Layer[],
    tilesH: number,
    tilesW: number,
    name?: string,
  ) {
    this.plans = planTiles(stack, tilesH, tilesW);
    this.name =
      name ??
      `${stack[0]!.name}…${stack[stack.length - 1]!.name.replace(/^model\./, '')} (spatial ${tilesH}×${tilesW}, serial)`;
    this.inputShape = stack[0]!.inputShape;
    this.outputShape = stack[stack.length - 1]!.outputShape;
    this.pools = layerPools(backend, stack.length);
    this.io = new BufferPool(backend);
  }

  params(): ParamSpec[] {
    return this.stack.flatMap((l, k) => l.params().map((p) => ({ ...p, name: `${k}.${p.name}` })));
  }
  state(): StateSpec[] {
    return [];
  }

  bind(params: Float32Array[], grads: Float32Array[], state: Float32Array[]): void {
    let at = 0;
    for (const l of this.stack) {
      const n = l.params().length;
      l.bind(params.slice(at, at + n), grads.slice(at, at + n), state);
      at += n;
    }
    this.tiles = null;
  }

  /** Tile layers share each stack layer's views, so they are made after bind. */
  private tileStacks(): TileStack[] {
    this.tiles ??= this.plans.map((p) => new TileStack(this.backend, this.stack, p, this.pools));
    return this.tiles;
  }

  private tileInput(t: TileStack, x: Tensor): Tensor {
    const p = t.plan,
      [h, w, c] = t.inputShape as [number, number, number];
    const xt = new Tensor([x.batch, h, w, c], this.io.f32('x', x.batch * h * w * c));
    copyBlock(blockOf(x), p.inRows.start, p.inCols.start, blockOf(xt), 0, 0, h, w);
    return xt;
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    const [OH, OW, F] = this.outputShape as [number, number, number];
    const y = new Tensor([x.batch, OH, OW, F], this.io.f32('y', x.batch * OH * OW * F));
    let largest: TileStack | null = null,
      largestBytes = -1;
    for (const t of this.tileStacks()) {
      const yt = t.forward(this.tileInput(t, x), ctx);
      const bytes = t.savedBytes();
      if (bytes > largestBytes) {
        largest = t;
        largestBytes = bytes;
      }
      copyBlock(
        blockOf(yt),
        0,
        0,
        blockOf(y),
        t.plan.outRows.start,
        t.plan.outCols.start,
        len(t.plan.outRows),
        len(t.plan.outCols),
      );
    }
    if (ctx.training) this.peakTileBytes = Math.max(this.peakTileBytes, largestBytes);
    this.x = x;
    this.ctx = ctx;
    this.largest = largest;
    return y;
  }
  private largest: TileStack | null = null;

  /**
   * The stack's input, plus the arrays of its largest tile: backward recomputes one tile at a
   * time into the same (shared) scratch arrays, so that much is held at its peak.
   */
  savedForBackward(): readonly ArrayBufferView[] {
    if (!this.x) return [];
    return [this.x.data, ...(this.largest?.savedArrays() ?? [])];
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    const x = this.x!,
      ctx = this.ctx!;
    const [H, W, C] = this.inputShape as [number, number, number];
    const dx = needInputGrad ? new Tensor([x.batch, H, W, C], this.io.f32('dx', x.size).fill(0)) : null;
    for (const t of this.tileStacks()) {
      const p = t.plan,
        [oh, ow, f] = t.outputShape as [number, number, number];
      t.forward(this.tileInput(t, x), ctx);
      const dyt = new Tensor([x.batch, oh, ow, f], this.io.f32('dy', x.batch * oh * ow * f));
      copyBlock(blockOf(dy), p.outRows.start, p.outCols.start, blockOf(dyt), 0, 0, oh, ow);
      const dxt = t.backward(dyt);
      if (dx)
        copyBlock(blockOf(dxt), 0, 0, blockOf(dx), p.inRows.start, p.inCols.start, len(p.inRows), len(p.inCols), true);
    }
    return dx;
  }
}
