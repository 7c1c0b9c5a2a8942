/**
 * ZeRO stage 2's gradient (P_os+g): a device keeps only its owned part of the reduced gradient
 * (`ownedGrads`: its ShardLayout's ranges, one after another), never the whole gradient buffer.
 *
 * The model runs in units (shardUnits.ts: hybrid's gradient buckets, whole layers). Every layer's
 * gradient views lie in a gradient workspace that the units share: before a unit's last layer runs
 * backward the workspace is zeroed, the unit's layers add their gradients there, and right after
 * its first layer the workspace is reduce-scattered (mean: each device's gradient is scaled by
 * devices/global batch) and this device's part added to `ownedGrads`. The units are hybrid's
 * buckets, reduced in hybrid's order, so with one micro-batch each reduce-scatter sums the floats
 * hybrid's all-reduce sums: bit for bit equal to unsharded hybrid wherever the transport's
 * reduce-scatter sums in its all-reduce's order. With micro-batches every micro-batch's backward
 * reduce-scatters and adds (no whole gradient is kept between them): the sum over micro-batches
 * and the mean over devices are taken in the other order than hybrid's, equal up to float32
 * rounding (tests: 1e-5 relative). Each reduce-scatter is awaited where it is called (one
 * workspace suffices; backward waits on it).
 *
 * Stage 2 makes this the model's residency (`shard`): the weights stay whole (every layer keeps its
 * views into the whole params buffer, nothing is gathered), each layer's gradient views are bound
 * once into its unit's workspace, and the whole gradient buffer is dropped. The optimizer steps
 * this device's ranges of the whole weights from `ownedGrads`, and the strategy all-gathers them.
 * Stage 3 (weightShards.ts) wraps it, gathering each unit's weights around the same hooks.
 *
 * A layer that reads another unit's weights (tiedEmbedding reads the embedding's) adds into that
 * unit's gradient: the unit is "pinned", its gradient in a second workspace from the reader's
 * backward to its own, where it is reduced. Frozen layers' (initFrom.freeze) gradients are zeroed
 * in the owned part, as unsharded clipping zeroes them. An injected NaN (FaultPlan `nan`) goes
 * into the zeroed workspace of the unit holding float 0, which backward adds to, as it goes into
 * the whole buffer's float 0 unsharded.
 */
import type { Communicator } from '../../comm/communicator.ts';
import type { ParameterResidency } from '../../nn/residency.ts';
import type { FlatRange } from '../../optim/optimizer.ts';
import type { ShardLayout } from './shardLayout.ts';
import { planUnits, type ShardableModel, type UnitPlan } from './shardUnits.ts';
import type { RowBlockPlan } from './rowBlocks.ts';

/** The sharded optimizer's step on views of the owned ranges (ShardedOptimizer.stepParts). */
export interface PartsOptimizer {
  stepParts(params: readonly Float32Array[], grads: readonly Float32Array[], lr: number): void;
}

const EMPTY = new Float32Array(0);

export class GradientShards implements ParameterResidency {
  /** the reduced gradient of this device's ranges, accumulated over the step's micro-batches */
  readonly ownedGrads: Float32Array;
  readonly plan: UnitPlan;
  /** the gradient workspaces: ordinary units, and the unit other layers read too (tiedEmbedding's embedding) */
  private readonly spaces: [Float32Array, Float32Array];
  /** per workspace, the unit whose gradient it accumulates now (−1: none) */
  private readonly open: [number, number] = [-1, -1];
  /** the injected NaN waiting for the unit holding float 0 */
  private poison: ((grads: Float32Array) => void) | null = null;
  /** stage 2: the layers' gradient views are in the workspaces */
  private bound = false;

  constructor(
    private readonly model: ShardableModel,
    readonly layout: ShardLayout,
    private readonly comm: Communicator,
    private readonly optimizer: PartsOptimizer,
    /** the backend's memory; `shared`: SharedArrayBuffer-backed (registered workspaces, for peers to read) */
    alloc: (floats: number, shared?: boolean) => Float32Array,
    /** frozen layers' ranges of the flat buffer (initFrom.freeze): their gradient is zeroed, as unsharded clipping does */
    frozen: readonly FlatRange[] = [],
    /** stage 3's layers gathered in row blocks (rowBlocks.ts), each block a unit */
    rowBlocks: readonly RowBlockPlan[] = [],
  ) {
    this.plan = planUnits(model, layout, frozen, rowBlocks);
    this.ownedGrads = alloc(Math.max(1, layout.ownedFloats)).subarray(0, layout.ownedFloats);
    this.spaces = [alloc(this.plan.largest[0], true), alloc(this.plan.largest[1], true)];
  }

  /** Collective: the workspaces announced to the transport (shared memory reduces them in place). */
  async register(): Promise<void> {
    for (const s of this.spaces) await this.comm.register?.(s);
  }

  /** Floats of the workspaces (ordinary and pinned): the most gradient held beside the owned part. */
  get workspaceFloats(): number {
    return this.spaces[0].length + this.spaces[1].length;
  }

  /** Floats this device holds for the gradient: its part and the workspaces. */
  get heldFloats(): number {
    return this.ownedGrads.length + this.workspaceFloats;
  }

  /** The workspace unit u's layers bind their gradient views to (laid out as the flat buffer from the unit's start). */
  workspace(u: number): Float32Array {
    return this.spaces[this.plan.units[u]!.pinned ? 1 : 0];
  }

  /**
   * Stage 2, at a step's start: the first time, the layers' gradient views move into the
   * workspaces (their weight views stay on the whole params) and the whole gradient buffer is
   * dropped; every time, the owned gradient is zeroed.
   */
  shard(): void {
    if (!this.bound) {
      const { model } = this;
      const params = model.params;
      model.useWhole(params, EMPTY);
      for (const [u, unit] of this.plan.units.entries())
        for (let i = unit.first; i <= unit.last; i++)
          if (this.plan.unitOf[i] === u)
            model.bindLayer(i, params.subarray(unit.piece.start), this.workspace(u), unit.piece.start);
      model.residency = this;
      this.bound = true;
    }
    this.start();
  }

  /** Stage 2: the weights are whole already (evaluation, checkpoints and the run's end need nothing). */
  async unshard(): Promise<void> {}

  /** The owned gradient zeroed, no unit open: a step's first backward starts from nothing. */
  start(): void {
    this.ownedGrads.fill(0);
    this.open[0] = this.open[1] = -1;
  }

  /** Stage 2's update: this device's ranges of the whole weights from the owned gradient. */
  step(lr: number): void {
    this.optimizer.stepParts(this.layout.views(this.model.params), this.layout.packed(this.ownedGrads), lr);
  }

  /** An injected NaN (`poison` writes it into the gradient it is given), for this step's backward to add to. */
  inject(poison: (grads: Float32Array) => void): void {
    this.poison = poison;
  }

  /** Unit u's gradient workspace zeroed for its backward, unless its gradient is accumulating there already. */
  openUnit(u: number): void {
    const pinned = u >= 0 && this.plan.units[u]!.pinned ? 1 : 0;
    if (u < 0 || this.open[pinned] === u) return;
    const { piece } = this.plan.units[u]!;
    const work = this.spaces[pinned].subarray(0, piece.end - piece.start);
    work.fill(0);
    if (this.poison && piece.start === 0) {
      this.poison(work);
      this.poison = null;
    }
    this.open[pinned] = u;
  }

  /** The unit's gradient reduce-scattered (mean), this device's part added to the owned gradient. */
  async reduce(u: number): Promise<void> {
    const unit = this.plan.units[u]!;
    const pinned = unit.pinned ? 1 : 0;
    const work = this.spaces[pinned].subarray(0, unit.piece.end - unit.piece.start);
    await this.comm.reduceScatter(work, 'mean');
    const own = this.ownedGrads.subarray(unit.at, unit.at + unit.own.end - unit.own.start);
    const reduced = work.subarray(unit.own.start, unit.own.end);
    for (let k = 0; k < own.length; k++) own[k] = own[k]! + reduced[k]!;
    for (const f of unit.frozen) own.fill(0, f.start, f.end);
    this.open[pinned] = -1;
  }

  beforeForward(): undefined {
    return undefined;
  }

  afterForward(): undefined {
    return undefined;
  }

  beforeBackward(i: number): undefined {
    this.openUnit(this.plan.unitOf[i]!);
    this.openUnit(this.plan.reads[i]!);
    return undefined;
  }

  afterBackward(i: number): Promise<void> | undefined {
    const u = this.plan.unitOf[i]!;
    return u >= 0 && i === this.plan.units[u]!.first ? this.reduce(u) : undefined;
  }
}
