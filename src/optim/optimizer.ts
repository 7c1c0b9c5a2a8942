import type { Backend } from '../kernels/backend.ts';
import type { OptimizerSpec } from './spec.ts';

/** Named state buffers of an optimizer, for checkpoints. */
export interface OptimizerState {
  step: number;
  buffers: { name: string; data: Float32Array }[];
}

/**
 * An optimizer updates one flat parameter buffer from one flat gradient buffer of the same length;
 * its own state (moments, velocity) is flat too.
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
}

class Sgd implements Optimizer {
  stepCount = 0;
  private readonly velocity: Float32Array | null;

  constructor(
    private readonly backend: Backend,
    readonly spec: Extract<OptimizerSpec, { type: 'sgd' }>,
    size: number,
    allocate: Allocate,
  ) {
    this.velocity = spec.momentum > 0 ? allocate(size) : null;
  }

  step(params: Float32Array, grads: Float32Array, lr: number): void {
    const { momentum, nesterov, weightDecay } = this.spec;
    this.backend.sgdStep(params, grads, this.velocity, { lr, momentum, nesterov, weightDecay });
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
  private readonly m: Float32Array;
  private readonly v: Float32Array;

  constructor(
    private readonly backend: Backend,
    readonly spec: Extract<OptimizerSpec, { type: 'adam' | 'adamw' }>,
    size: number,
    allocate: Allocate,
  ) {
    this.m = allocate(size);
    this.v = allocate(size);
  }

  step(params: Float32Array, grads: Float32Array, lr: number): void {
    const { beta1, beta2, eps, weightDecay } = this.spec;
    this.stepCount++;
    this.backend.adamStep(params, grads, this.m, this.v, {
      lr,
      beta1,
      beta2,
      eps,
      weightDecay,
      decoupled: this.spec.type === 'adamw',
      step: this.stepCount,
    });
  }

  state(): OptimizerState {
    return {
      step: this.stepCount,
      buffers: [
        { name: 'm', data: this.m },
        { name: 'v', data: this.v },
      ],
    };
  }

  loadState(state: OptimizerState): void {
    this.stepCount = state.step;
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

/** An optimizer for a flat buffer of `size` parameters. */
export function createOptimizer(
  backend: Backend,
  spec: OptimizerSpec,
  size: number,
  allocate: Allocate = (n) => backend.alloc(n),
): Optimizer {
  return spec.type === 'sgd' ? new Sgd(backend, spec, size, allocate) : new Adam(backend, spec, size, allocate);
}
