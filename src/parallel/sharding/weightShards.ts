/**
 * ZeRO stage 3 (P_os+g+p): a device keeps only its owned part of the weights and of the gradient
 * (`ownedParams`, `ownedGrads`: its ShardLayout's ranges, one after another), and gathers the
 * rest a unit at a time, just before use, into one workspace that the next unit reuses.
 *
 * Why units are hybrid's gradient buckets (shardLayout.ts gradientBuckets: whole layers, about
 * train.strategy.hybrid.bucketBytes each, as FSDP's wrapped modules) rather than single layers:
 * they are stage 2's pieces, so each unit's reduce-scatter sums the very floats stage 2's does,
 * in the same order on every transport, and stage 3 equals stage 2 bit for bit (so hybrid wherever
 * stage 2 does); and one knob trades memory for collectives: a large bucketBytes gathers few large
 * units (fewer α-bound calls for a model of many small layers), a small one (4: every layer its own
 * unit) holds the least. A unit is never less than a layer: a layer runs on all of its weights.
 *
 * Forward: before the first layer of a unit, its weights are all-gathered into the workspace and
 * its layers bound there; after its last layer they are released (the layers hold empty views).
 * Backward, from the last unit: gathered again; the gradient is stage 2's (gradientShards.ts,
 * which this wraps): the unit's gradient workspace zeroed, the layers add their gradients there,
 * after the unit's first layer it is reduce-scattered (mean) and this device's part added to
 * `ownedGrads`; then the unit is released. With micro-batches each micro-batch's gradient is
 * reduced so (the tolerance is gradientShards.ts's). Each collective is awaited where it is called
 * (no prefetch of the next unit, no reduce-scatter in flight during the next backward): one
 * workspace of each kind suffices, at the cost of compute waiting on every transfer.
 *
 * With `rowBlockBytes` a dense layer above the bound is no unit's: each block of its kernel rows
 * is a unit (rowBlocks.ts), and the layer takes them one at a time through a RowBlockSource
 * (forward: gathered, used, released; backward: gradient workspace opened, gathered, its gradient
 * reduce-scattered, released), so the workspaces are the size of a block.
 *
 * A layer that reads another's weights (tiedEmbedding reads the embedding's) keeps that unit
 * gathered in a second workspace from the unit's forward to its own, and from its own backward to
 * the unit's, where the unit's gradient (both layers' shares) is reduce-scattered (shardUnits.ts).
 *
 * Between steps the model may be whole again (`unshard`, collective: evaluation, checkpoints,
 * the end of the run) in new, garbage-collected buffers; `shard` drops them at the next step.
 * Checkpoints, resume and initFrom therefore see the whole model, as with every other strategy.
 */
import type { Communicator } from '../../comm/communicator.ts';
import type { ParameterResidency, RowBlock, RowBlockSource } from '../../nn/residency.ts';
import type { RowBlockPlan } from './rowBlocks.ts';
import type { FlatRange } from '../../optim/optimizer.ts';
import type { ShardLayout } from './shardLayout.ts';
import type { ShardableModel, Unit, UnitPlan } from './shardUnits.ts';
import { GradientShards, type PartsOptimizer } from './gradientShards.ts';

export type { ShardableModel } from './shardUnits.ts';

/** A weight workspace: one gathered unit's weights at a time. */
interface Space {
  params: Float32Array;
  /** the unit bound there now (−1: none) */
  resident: number;
}

const EMPTY = new Float32Array(0);

export class WeightShards implements ParameterResidency {
  /** this device's weights: the layout's owned ranges, one after another (what the optimizer steps) */
  readonly ownedParams: Float32Array;
  /** the gradient: this device's part, reduced unit by unit as backward finishes each (stage 2's) */
  readonly gradients: GradientShards;
  /** the weight workspaces: ordinary units, and units other layers read too (tiedEmbedding's embedding) */
  private readonly spaces: [Space, Space];
  private readonly plan: UnitPlan;
  private sharded = false;

  constructor(
    private readonly model: ShardableModel,
    readonly layout: ShardLayout,
    private readonly comm: Communicator,
    /** the sharded optimizer, stepping the owned ranges laid out one after another */
    private readonly optimizer: PartsOptimizer,
    /** the backend's memory; `shared`: SharedArrayBuffer-backed (registered workspaces, for peers to read) */
    alloc: (floats: number, shared?: boolean) => Float32Array,
    /** frozen layers' ranges of the flat buffer (initFrom.freeze): their gradient is zeroed, as unsharded clipping does */
    frozen: readonly FlatRange[] = [],
    /** layers gathered a block of kernel rows at a time (rowBlocks.ts); `layout` has their blocks as pieces */
    rowBlocks: readonly RowBlockPlan[] = [],
  ) {
    this.gradients = new GradientShards(model, layout, comm, optimizer, alloc, frozen, rowBlocks);
    this.plan = this.gradients.plan;
    this.ownedParams = alloc(Math.max(1, layout.ownedFloats)).subarray(0, layout.ownedFloats);
    const space = (n: number): Space => ({ params: alloc(n, true), resident: -1 });
    this.spaces = [space(this.plan.largest[0]), space(this.plan.largest[1])];
  }

  /** Collective: the workspaces announced to the transport (shared memory reduces them in place). */
  async register(): Promise<void> {
    for (const s of this.spaces) await this.comm.register?.(s.params);
    await this.gradients.register();
  }

  /** The reduced gradient of this device's weights, accumulated over the step's micro-batches. */
  get ownedGrads(): Float32Array {
    return this.gradients.ownedGrads;
  }

  /** The optimizer's step on this device's weights from its reduced gradient. */
  step(lr: number): void {
    const { layout } = this;
    this.optimizer.stepParts(layout.packed(this.ownedParams), layout.packed(this.ownedGrads), lr);
  }

  /** Floats this device holds for weights and gradients while sharded: its parts and the workspaces. */
  get heldFloats(): number {
    return this.spaces.reduce((n, s) => n + s.params.length, this.ownedParams.length) + this.gradients.heldFloats;
  }

  /** Floats of the workspaces' weights (= of their gradients): what is gathered at most at once. */
  get gatheredFloats(): number {
    return this.spaces[0].params.length + this.spaces[1].params.length;
  }

  /**
   * At a step's start: the whole buffers (if any) give their owned ranges to ownedParams and are
   * dropped; the layers are released until their unit is gathered; the owned gradient is zeroed.
   */
  shard(): void {
    if (!this.sharded) {
      const whole = this.model.params;
      for (const u of this.plan.units)
        this.ownedParams.set(whole.subarray(u.piece.start + u.own.start, u.piece.start + u.own.end), u.at);
      // every layer bound to empty views until its unit is gathered, a split layer to its blocks
      this.model.useWhole(EMPTY, EMPTY);
      for (const [i, blocks] of this.plan.blocksOf) this.model.useRowBlocks(i, this.blockSource(blocks));
      this.model.residency = this;
      this.sharded = true;
      for (const s of this.spaces) s.resident = -1;
    }
    this.gradients.start();
  }

  /**
   * Collective: the whole weights on every device, in a new buffer the layers are bound to (no
   * residency), for what runs no backward until the next shard(): evaluation, checkpoints, the
   * run's end. The gradient stays empty (the layers' gradient views too).
   */
  async unshard(): Promise<void> {
    if (!this.sharded) return;
    const whole = new Float32Array(Math.max(this.layout.size, 1));
    for (const u of this.plan.units) whole.set(this.ownedOf(u, this.ownedParams), u.piece.start + u.own.start);
    await this.layout.allgather(this.comm, whole);
    for (const i of this.plan.blocksOf.keys()) this.model.useRowBlocks(i, null);
    this.model.useWhole(whole, EMPTY);
    this.sharded = false;
    for (const s of this.spaces) s.resident = -1;
  }

  private ownedOf(u: Unit, buf: Float32Array): Float32Array {
    return buf.subarray(u.at, u.at + u.own.end - u.own.start);
  }

  private spaceOf(u: number): Space {
    return this.spaces[this.plan.units[u]!.pinned ? 1 : 0];
  }

  /** Unit u gathered, unless it is already. */
  private ensure(u: number): Promise<void> | undefined {
    if (u < 0 || this.spaceOf(u).resident === u) return undefined;
    return this.gather(u);
  }

  /** Unit u's weights from every device into its workspace, its layers bound there (their gradients in its gradient workspace). */
  private async gather(u: number): Promise<void> {
    const space = this.spaceOf(u);
    if (space.resident >= 0) this.release(space.resident);
    const unit = this.plan.units[u]!;
    const n = unit.piece.end - unit.piece.start;
    const work = space.params.subarray(0, n);
    work.set(this.ownedOf(unit, this.ownedParams), unit.own.start);
    await this.comm.allgather(work);
    for (let i = unit.first; i <= unit.last; i++)
      if (this.plan.unitOf[i] === u)
        this.model.bindLayer(i, space.params, this.gradients.workspace(u), unit.piece.start);
    space.resident = u;
  }

  private release(u: number): void {
    const unit = this.plan.units[u]!;
    for (let i = unit.first; i <= unit.last; i++) if (this.plan.unitOf[i] === u) this.model.releaseLayer(i);
    this.spaceOf(u).resident = -1;
  }

  /**
   * A split layer's blocks (units, in row order) as its layer takes them: forward gathers each
   * and lets it go; backward opens its gradient workspace, gathers it, and after the block's
   * gradient reduce-scatters and lets it go.
   */
  private blockSource(units: readonly number[]): RowBlockSource {
    return {
      rows: units.map((u) => this.plan.units[u]!.block!.rows),
      acquire: async (k, backward) => {
        const u = units[k]!;
        if (backward) this.gradients.openUnit(u);
        await this.ensure(u);
        return this.blockViews(u);
      },
      release: (k, backward) => {
        const u = units[k]!;
        if (!backward) return this.release(u);
        return this.gradients.reduce(u).then(() => this.release(u));
      },
    };
  }

  /** Block unit u's kernel rows and bias in its gathered workspace, and their gradients in its gradient workspace. */
  private blockViews(u: number): RowBlock {
    const { piece, block } = this.plan.units[u]!;
    const { rows, rowFloats, bias } = block!;
    const params = this.spaceOf(u).params,
      grads = this.gradients.workspace(u);
    const kernel = (rows[1] - rows[0]) * rowFloats;
    const at = (buf: Float32Array, r: FlatRange) => buf.subarray(r.start - piece.start, r.end - piece.start);
    return {
      kernel: params.subarray(0, kernel),
      kernelGrad: grads.subarray(0, kernel),
      bias: bias ? at(params, bias) : null,
      biasGrad: bias ? at(grads, bias) : null,
    };
  }

  /** Layer i's unit gathered, and the unit it reads besides (in that order on every device). */
  private gatherFor(i: number): Promise<void> | undefined {
    const own = this.ensure(this.plan.unitOf[i]!);
    const read = this.plan.reads[i]!;
    return own && read >= 0 ? own.then(() => this.ensure(read)) : (own ?? this.ensure(read));
  }

  beforeForward(i: number): Promise<void> | undefined {
    return this.gatherFor(i);
  }

  afterForward(i: number): void {
    const u = this.plan.unitOf[i]!;
    if (u >= 0 && i === this.plan.units[u]!.last && !this.plan.units[u]!.pinned) this.release(u);
    const read = this.plan.reads[i]!;
    if (read >= 0 && i === this.plan.units[read]!.lastReader) this.release(read);
  }

  beforeBackward(i: number): Promise<void> | undefined {
    // the gradient workspaces zeroed (no collective), then the weights gathered
    this.gradients.beforeBackward(i);
    return this.gatherFor(i);
  }

  afterBackward(i: number): Promise<void> | undefined {
    // after the unit's reduce-scatter, its weights are released too
    const u = this.plan.unitOf[i]!;
    return this.gradients.afterBackward(i)?.then(() => this.release(u));
  }
}
