import type { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';

/** How a parameter is initialised (fan-in/fan-out are per output unit, as Glorot and He define them). */
export type InitKind = 'glorotUniform' | 'heNormal' | 'zeros' | 'ones';

export interface ParamSpec {
  /** short name within the layer: 'kernel', 'bias', 'gamma', … */
  name: string;
  shape: number[];
  init: InitKind;
  fanIn: number;
  fanOut: number;
}

/** Non-trained state that still belongs in a checkpoint (BatchNorm running statistics). */
export interface StateSpec {
  name: string;
  shape: number[];
  init: 'zeros' | 'ones';
}

/** What a forward pass may depend on besides its input. */
export interface ForwardContext {
  training: boolean;
  /** run seed, for dropout masks */
  seed: number;
  /** optimizer step number (0-based), so masks differ per step */
  step: number;
  /** global index of the batch's first sample, so a sample's mask does not depend on batch splits */
  sampleOffset: number;
}

/**
 * A layer with explicit forward and backward. Shapes exclude the batch dimension.
 * `forward` keeps what `backward` needs; `backward` returns dL/dinput and ACCUMULATES parameter
 * gradients into the bound gradient views. With `needInputGrad` false (the first layer) it may
 * skip computing dL/dinput and return null.
 */
export interface Layer {
  /** e.g. 'layers[2] conv2d', used in every error message about this layer */
  readonly name: string;
  readonly inputShape: readonly number[];
  readonly outputShape: readonly number[];
  params(): ParamSpec[];
  state(): StateSpec[];
  /** Gives the layer its parameter/gradient/state views (in the order of params() and state()). */
  bind(params: Float32Array[], grads: Float32Array[], state: Float32Array[]): void;
  forward(x: Tensor, ctx: ForwardContext): Tensor;
  backward(dy: Tensor, needInputGrad?: boolean): Tensor | null;
}

/** Shared plumbing for layers: the backend, the name, and reusable batch-sized output buffers. */
export abstract class BaseLayer implements Layer {
  readonly name: string;
  readonly inputShape: readonly number[];
  abstract readonly outputShape: readonly number[];
  protected readonly backend: Backend;
  private buffers = new Map<string, Float32Array>();

  constructor(backend: Backend, name: string, inputShape: readonly number[]) {
    this.backend = backend;
    this.name = name;
    this.inputShape = inputShape;
  }

  params(): ParamSpec[] { return []; }
  state(): StateSpec[] { return []; }
  bind(_params: Float32Array[], _grads: Float32Array[], _state: Float32Array[]): void {}
  abstract forward(x: Tensor, ctx: ForwardContext): Tensor;
  abstract backward(dy: Tensor, needInputGrad?: boolean): Tensor | null;

  /** A scratch array of `length` floats kept across steps under `key` (reallocated when the batch changes). */
  protected buffer(key: string, length: number): Float32Array {
    let b = this.buffers.get(key);
    if (!b || b.length !== length) {
      b = this.backend.alloc(length);
      this.buffers.set(key, b);
    }
    return b;
  }

  /** Error naming this layer, for shape and configuration problems. */
  protected error(message: string): Error {
    return new Error(`${this.name}: ${message}`);
  }
}
