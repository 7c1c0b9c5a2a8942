import type { Backend } from '../kernels/backend.ts';
import type { OptimizerSpec } from './spec.ts';

/** Named state buffers of an optimizer, for checkpoints. */
export interface OptimizerState {
  step: number;
  buffers: { name: string; data: Float32Array }[];
  /** Adam's step at which its variance was frozen (1-bit Adam); absent: not frozen */
  varianceFrozenAt?: number;
}

/** Floats start … end − 1 of a flat buffer. */
export interface FlatRange {
  start: number;
  end: number;
}

/**
 * An optimizer updates one flat parameter buffer from one flat gradient buffer of the same length;
 * its own state (moments, velocity) is flat too. Frozen ranges are never updated (nor their state):
 * the step runs on the ranges between them, which equals stepping the whole as the updates are
 * elementwise.
 */
export interface Optimizer {
  readonly spec: OptimizerSpec;
  /** updates taken so far (settable: a shared parameter server keeps the count for all devices) */
  stepCount: number;
  /** One update with learning rate `lr` (the schedule decides it). */
  step(params: Float32Array, grads: Float32Array, lr: number): void;
  state(): OptimizerState;
  /** Restores state saved by state(); buffers are matched by name. */
  loadState(state: OptimizerState): void;
  /**
   * Adam/AdamW only (absent elsewhere): from now on v is not updated from the gradient and is
   * bias-corrected by the current step, so the update is linear in the momentum (1-bit Adam's
   * compression stage); v only rises where the momentum outgrows it (v̂ ≥ m̂², the kernels'
   * AdamParams.varianceFrozenAt). Once frozen, later calls change nothing; before any step, nothing
   * either (v is still all zeros).
   */
  freezeVariance?(): void;
  /** Adam/AdamW only: the first moment m (the live buffer, not a copy) and its β1, which 1-bit Adam compresses. */
  momentum?(): { m: Float32Array; beta1: number };
}

/** The ranges of [0, size) outside `frozen`, in order (the whole buffer when nothing is frozen). */
export function trainableRanges(size: number, frozen: readonly FlatRange[]): FlatRange[] {
  const out: FlatRange[] = [];
  let at = 0;
  for (const f of [...frozen].sort((a, b) => a.start - b.start)) {
    if (f.start > at) out.push({ start: at, end: Math.min(f.start, size) });
    at = Math.max(at, f.end);
  }
  if (at < size) out.push({ start: at, end: size });
  return out.filter((r) => r.end > r.start);
}

/** `a` itself when `r` covers it, else its view over `r`. */
const over = (a: Float32Array, r: FlatRange) => (r.start === 0 && r.end === a.length ? a : a.subarray(r.start, r.end));

class Sgd implements Optimizer {
  stepCount = 0;
  private readonly velocity: Float32Array | null;

  constructor(
    private readonly backend: Backend,
    readonly spec: Extract<OptimizerSpec, { type: 'sgd' }>,
    size: number,
    allocate: Allocate,
    private readonly trainable: readonly FlatRange[],
  ) {
    this.velocity = spec.momentum > 0 ? allocate(size) : null;
  }

  step(params: Float32Array, grads: Float32Array, lr: number): void {
    const { momentum, nesterov, weightDecay } = this.spec;
    for (const r of this.trainable) {
      const velocity = this.velocity && over(this.velocity, r);
      this.backend.sgdStep(over(params, r), over(grads, r), velocity, { lr, momentum, nesterov, weightDecay });
    }
    this.stepCount++;
  }

  state(): OptimizerState {
    return { step: this.stepCount, buffers: this.velocity ? [{ name: 'velocity', data: this.velocity }] : [] };
  }

  loadState(state: OptimizerState): void {
    this.stepCount = state.step;
    if (this.velocity) copyBuffer(state, 'velocity', this.velocity);
  }
}

class Adam implements Optimizer {
  stepCount = 0;
  /** the step after which v was frozen (freezeVariance), null while it is updated */
  private varianceFrozenAt: number | null = null;
  private readonly m: Float32Array;
  private readonly v: Float32Array;

  constructor(
    private readonly backend: Backend,
    readonly spec: Extract<OptimizerSpec, { type: 'adam' | 'adamw' }>,
    size: number,
    allocate: Allocate,
    private readonly trainable: readonly FlatRange[],
  ) {
    this.m = allocate(size);
    this.v = allocate(size);
  }

  step(params: Float32Array, grads: Float32Array, lr: number): void {
    const { beta1, beta2, eps, weightDecay } = this.spec;
    this.stepCount++;
    for (const r of this.trainable) {
      this.backend.adamStep(over(params, r), over(grads, r), over(this.m, r), over(this.v, r), {
        lr,
        beta1,
        beta2,
        eps,
        weightDecay,
        decoupled: this.spec.type === 'adamw',
        step: this.stepCount,
        ...(this.varianceFrozenAt === null ? {} : { varianceFrozenAt: this.varianceFrozenAt }),
      });
    }
  }

  freezeVariance(): void {
    // v before any step is all zeros, nothing to keep: it freezes at a call after a first step
    if (this.stepCount >= 1) this.varianceFrozenAt ??= this.stepCount;
  }

  momentum(): { m: Float32Array; beta1: number } {
    return { m: this.m, beta1: this.spec.beta1 };
  }

  state(): OptimizerState {
    return {
      step: this.stepCount,
      buffers: [
        { name: 'm', data: this.m },
        { name: 'v', data: this.v },
      ],
      ...(this.varianceFrozenAt === null ? {} : { varianceFrozenAt: this.varianceFrozenAt }),
    };
  }

  loadState(state: OptimizerState): void {
    this.stepCount = state.step;
    // a state saved before the variance froze (or before the field existed) is an unfrozen one
    this.varianceFrozenAt = state.varianceFrozenAt ?? null;
    copyBuffer(state, 'm', this.m);
    copyBuffer(state, 'v', this.v);
  }
}

function copyBuffer(state: OptimizerState, name: string, into: Float32Array): void {
  const found = state.buffers.find((b) => b.name === name);
  if (!found)
    throw new Error(`optimizer state has no '${name}' buffer; the checkpoint was written with another optimizer`);
  if (found.data.length !== into.length) {
    throw new Error(
      `optimizer state '${name}' holds ${found.data.length} values, the model needs ${into.length}; the checkpoint belongs to another model`,
    );
  }
  into.set(found.data);
}

/** Where an optimizer's state buffers come from (default: the backend; a parameter server: shared memory). */
export type Allocate = (length: number) => Float32Array;

/** Floats of state an optimizer keeps for `size` parameters. */
export function optimizerStateSize(spec: OptimizerSpec, size: number): number {
  return spec.type === 'sgd' ? (spec.momentum > 0 ? size : 0) : 2 * size;
}

/** An optimizer for a flat buffer of `size` parameters, of which the `frozen` ranges never change. */
export function createOptimizer(
  backend: Backend,
  spec: OptimizerSpec,
  size: number,
  allocate: Allocate = (n) => backend.alloc(n),
  frozen: readonly FlatRange[] = [],
): Optimizer {
  const trainable = trainableRanges(size, frozen);
  return spec.type === 'sgd'
    ? new Sgd(backend, spec, size, allocate, trainable)
    : new Adam(backend, spec, size, allocate, trainable);
}
