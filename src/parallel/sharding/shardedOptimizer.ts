/**
 * The optimizer of a device under ZeRO sharding: state (Adam's moments, momentum's velocity) only
 * for the ranges of the flat buffer this device owns (ShardLayout), and a step that updates only
 * those weights. Optimizers are elementwise, so stepping a range with state sized for it equals the
 * whole optimizer's step on that range, bit for bit.
 *
 * Checkpoints stay whole: `assemble` (collective) all-gathers every device's state into buffers of
 * the unsharded layout, which `state()` then returns until the next step; `loadState` takes whole
 * buffers (from any stage or device count) and keeps this device's ranges.
 */
import type { Backend } from '../../kernels/backend.ts';
import type { Communicator } from '../../comm/communicator.ts';
import type { OptimizerSpec } from '../../optim/spec.ts';
import { createOptimizer, type FlatRange, type Optimizer, type OptimizerState } from '../../optim/optimizer.ts';
import type { ShardLayout } from './shardLayout.ts';

/** `frozen` ∩ `range`, shifted to the range's start. */
function frozenWithin(frozen: readonly FlatRange[], range: FlatRange): FlatRange[] {
  return frozen
    .map((f) => ({
      start: Math.max(f.start, range.start) - range.start,
      end: Math.min(f.end, range.end) - range.start,
    }))
    .filter((f) => f.end > f.start);
}

export class ShardedOptimizer implements Optimizer {
  /** one optimizer per owned range, its state sized for that range */
  private readonly parts: Optimizer[];
  private steps = 0;
  /** the whole state as of the last assemble, until the next step (checkpoints) */
  private assembled: OptimizerState | null = null;
  /** as the parts' (Adam's freezeVariance), kept here too for a device that owns nothing */
  private varianceFrozenAt: number | undefined;

  constructor(
    private readonly backend: Backend,
    readonly spec: OptimizerSpec,
    readonly layout: ShardLayout,
    private readonly comm: Communicator,
    frozen: readonly FlatRange[] = [],
  ) {
    this.parts = layout.owned.map((r) =>
      createOptimizer(backend, spec, r.end - r.start, undefined, frozenWithin(frozen, r)),
    );
  }

  get stepCount(): number {
    return this.steps;
  }

  set stepCount(n: number) {
    this.steps = n;
    for (const p of this.parts) p.stepCount = n;
  }

  /** Updates this device's ranges of `params` from the same ranges of `grads` (the rest is left alone). */
  step(params: Float32Array, grads: Float32Array, lr: number): void {
    this.stepParts(this.layout.views(params), this.layout.views(grads), lr);
  }

  /**
   * Updates the owned ranges given as views, one per range of `layout.owned`, in its order: of the
   * whole buffers, or of buffers holding only the owned ranges (ShardLayout.packed: ZeRO stage 2's
   * gradient, stage 3's weights and gradient).
   */
  stepParts(params: readonly Float32Array[], grads: readonly Float32Array[], lr: number): void {
    this.assembled = null;
    for (let k = 0; k < this.parts.length; k++) this.parts[k]!.step(params[k]!, grads[k]!, lr);
    this.steps++;
  }

  freezeVariance(): void {
    if (this.spec.type === 'sgd') throw new Error('freezeVariance: only Adam/AdamW keep a variance to freeze');
    for (const p of this.parts) p.freezeVariance?.();
    if (this.steps >= 1) this.varianceFrozenAt ??= this.steps;
  }

  /** The state's buffer names, in the whole optimizer's order. */
  private names(): string[] {
    // a device that owns nothing still names the buffers, to take part in assembling them
    const any = this.parts[0] ?? createOptimizer(this.backend, this.spec, 0);
    return any.state().buffers.map((b) => b.name);
  }

  /** Floats of state this device holds (the memory sharding saves is the rest). */
  get stateFloats(): number {
    return this.parts.reduce((n, p) => n + p.state().buffers.reduce((m, b) => m + b.data.length, 0), 0);
  }

  /**
   * Collective: every device's owned state into whole buffers on every device, so the next `state()`
   * (a checkpoint set, the model file) is the unsharded optimizer's.
   */
  async assemble(): Promise<void> {
    const { layout } = this;
    const buffers = this.names().map((name, i) => {
      const data = new Float32Array(layout.size);
      for (let k = 0; k < layout.owned.length; k++)
        data.set(this.parts[k]!.state().buffers[i]!.data, layout.owned[k]!.start);
      return { name, data };
    });
    for (const b of buffers) await layout.allgather(this.comm, b.data);
    const frozen = this.varianceFrozenAt;
    this.assembled = { step: this.steps, buffers, ...(frozen === undefined ? {} : { varianceFrozenAt: frozen }) };
  }

  /** The whole state, as assembled at this step boundary (a collective no device can call alone). */
  state(): OptimizerState {
    if (!this.assembled)
      throw new Error('a sharded optimizer state is whole only after assemble() (collective) since the last step');
    return this.assembled;
  }

  /** Restores from whole buffers (an unsharded optimizer's layout): this device keeps its ranges. */
  loadState(state: OptimizerState): void {
    this.assembled = null;
    const { owned, size } = this.layout;
    for (let k = 0; k < owned.length; k++) {
      const r = owned[k]!;
      const buffers = state.buffers.map((b) => {
        if (b.data.length !== size)
          throw new Error(
            `optimizer state '${b.name}' holds ${b.data.length} values, the model needs ${size}; the checkpoint belongs to another model`,
          );
        return { name: b.name, data: b.data.subarray(r.start, r.end) };
      });
      this.parts[k]!.loadState({ ...state, buffers });
    }
    this.stepCount = state.step;
    this.varianceFrozenAt = state.varianceFrozenAt;
  }
}
