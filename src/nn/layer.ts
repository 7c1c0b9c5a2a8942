import type { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';

/**
 * How a parameter is initialised (fan-in/fan-out are per output unit, as Glorot and He define them).
 * `rnnUniform` is PyTorch's nn.LSTM/GRU default, U(−1/√units, 1/√units), units = fanOut;
 * `normal` is N(0, std²) with the spec's `std` (GPT-2's embeddings: 0.02).
 */
export type InitKind = 'glorotUniform' | 'heNormal' | 'zeros' | 'ones' | 'rnnUniform' | 'normal';

export interface ParamSpec {
  /** short name within the layer: 'kernel', 'bias', 'gamma', … */
  name: string;
  shape: number[];
  init: InitKind;
  fanIn: number;
  fanOut: number;
  /** a constant added to elements [start, end) after initialisation (an LSTM's forget-gate bias) */
  initAdd?: { start: number; end: number; value: number };
  /** the standard deviation of `init: 'normal'` */
  std?: number;
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
  /** this replica's rank (per-replica dropout masks); default 0 */
  rank?: number;
  /**
   * index of the batch's first sample within this replica's step batch (a micro-batch starts
   * past 0), so per-replica masks do not depend on micro-batching; default 0
   */
  localOffset?: number;
  /**
   * samples of the step's batch over all devices; a model-parallel section splits it over the
   * devices (each holds its rows, by the data sampler's rule) and computes on all of it
   */
  globalBatch?: number;
  /**
   * Per-sample valid frames of a sequence batch [N, T, F] (padded to the batch's longest): frames
   * t ≥ lengths[n] are padding. Sequence layers write zeros there and ignore what they read there,
   * so padding never changes a result; absent means every frame is valid. Each layer sees the
   * lengths of ITS input (Sequential maps them through layers that shorten time).
   */
  lengths?: Int32Array;
  /**
   * Inside a model-parallel section over the frames of sequences (parallel/modelParallel/plan.ts):
   * each sample is this many rows (the step's padded frames, the same on every device), so a
   * device's rows are its samples times this. Absent: one row per sample.
   */
  rowsPerSample?: number;
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
  /**
   * Layers that may communicate (synchronised BatchNorm) implement these; a pass that lets layers
   * communicate runs a layer through them while its `needsAsync` is true (nn/pass.ts). Their sync
   * forward/backward then refuse to run where communication is needed.
   */
  forwardAsync?(x: Tensor, ctx: ForwardContext): Promise<Tensor>;
  backwardAsync?(dy: Tensor, needInputGrad?: boolean): Promise<Tensor | null>;
  /** True when the sync passes cannot be used (the layer must communicate in training); such a layer has the async ones. */
  readonly needsAsync?: boolean;
  /** The batch-sized arrays the last forward keeps for backward (activation memory accounting). */
  savedForBackward?(): readonly ArrayBufferView[];
  /**
   * Layers that change the number of frames (conv1d with stride or valid padding): the output's
   * valid frames per sample from the input's. Absent means the same lengths.
   */
  outputLengths?(lengths: Int32Array): Int32Array;
  /** Layers nested inside this one (a residual block's), for code that looks for a kind of layer. */
  sublayers?(): readonly Layer[];
}

/** Binds each of `layers` in turn to its share of a container's params, grads and state (a block's children). */
export function bindInTurn(
  layers: readonly Layer[],
  params: Float32Array[],
  grads: Float32Array[],
  state: Float32Array[],
): void {
  let p = 0,
    s = 0;
  for (const l of layers) {
    const np = l.params().length,
      ns = l.state().length;
    l.bind(params.slice(p, p + np), grads.slice(p, p + np), state.slice(s, s + ns));
    p += np;
    s += ns;
  }
}

/** `layers` and every layer nested in them, depth first. */
export function allLayers(layers: readonly Layer[]): Layer[] {
  return layers.flatMap((l) => [l, ...allLayers(l.sublayers?.() ?? [])]);
}

/**
 * Batch-sized scratch arrays kept across steps, by key. Grow-only: a smaller batch (a micro-batch,
 * a short last batch) gets a view of the existing array instead of a new allocation, so alternating
 * sizes never allocate again (the wasm heap does not reclaim). Spatial tiles of one layer share a pool.
 */
export class BufferPool {
  private readonly floats = new Map<string, Float32Array>();
  private readonly ints = new Map<string, Int32Array>();
  constructor(private readonly backend: Backend) {}

  f32(key: string, length: number): Float32Array {
    let b = this.floats.get(key);
    if (!b || b.length < length) {
      b = this.backend.alloc(length);
      this.floats.set(key, b);
    }
    return b.length === length ? b : b.subarray(0, length);
  }

  /** In the backend's memory too (an Int32Array view of its allocation), so kernels read it without copies. */
  i32(key: string, length: number): Int32Array {
    let b = this.ints.get(key);
    if (!b || b.length < length) {
      const f = this.backend.alloc(length);
      b = new Int32Array(f.buffer, f.byteOffset, length);
      this.ints.set(key, b);
    }
    return b.length === length ? b : b.subarray(0, length);
  }
}

/** Shared plumbing for layers: the backend, the name, and reusable batch-sized output buffers. */
export abstract class BaseLayer implements Layer {
  readonly name: string;
  readonly inputShape: readonly number[];
  abstract readonly outputShape: readonly number[];
  protected readonly backend: Backend;
  protected readonly pool: BufferPool;

  constructor(backend: Backend, name: string, inputShape: readonly number[], pool?: BufferPool) {
    this.backend = backend;
    this.name = name;
    this.inputShape = inputShape;
    this.pool = pool ?? new BufferPool(backend);
  }

  params(): ParamSpec[] {
    return [];
  }
  state(): StateSpec[] {
    return [];
  }
  bind(_params: Float32Array[], _grads: Float32Array[], _state: Float32Array[]): void {}
  abstract forward(x: Tensor, ctx: ForwardContext): Tensor;
  abstract backward(dy: Tensor, needInputGrad?: boolean): Tensor | null;

  /** A scratch array of `length` floats kept across steps under `key` (grown when the batch grows). */
  protected buffer(key: string, length: number): Float32Array {
    return this.pool.f32(key, length);
  }

  /** Error naming this layer, for shape and configuration problems. */
  protected error(message: string): Error {
    return new Error(`${this.name}: ${message}`);
  }
}
