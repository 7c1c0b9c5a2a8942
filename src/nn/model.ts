import type { Tensor } from '../tensor/tensor.ts';
import { formatShape } from '../tensor/shape.ts';
import type { Backend } from '../kernels/backend.ts';
import type { DeviceStorage } from '../kernels/deviceStorage.ts';
import { allLayers, type ForwardContext, type Layer } from './layer.ts';
import type { ModelSpec } from './spec.ts';
import { buildLayer, checkOutputShape } from './buildLayer.ts';
import {
  allocFlat,
  bindFlat,
  bindFlatSlot,
  initializeFlat,
  planFlatLayout,
  type FlatBuffers,
  type FlatEntry,
  type FlatLayout,
  type LayerSlot,
} from './flatLayout.ts';
import { savedActivationBytes } from './activationMemory.ts';
import type { GradientsReady, TrainableModel } from './trainableModel.ts';
import { convPoolPairs, type ConvPool } from './convPool.ts';
import { checkLengths, checkModelInput, isSequenceShape, outputLengths, shapeFits } from './sequence.ts';
import { communicates, runLater, runNow, settle, type Pass } from './pass.ts';
import { TiedEmbedding, tieEmbeddings } from './tiedEmbedding.ts';
import { Embedding } from './embedding.ts';
import type { ParameterResidency, RowBlockSource } from './residency.ts';
import { Dense } from './dense.ts';

/** Floats [start, end) of the flat buffer. */
type Range = { start: number; end: number };

export type { FlatEntry } from './flatLayout.ts';

export interface ModelOptions {
  /** put the flat parameter/gradient buffers in SharedArrayBuffer memory (for other threads) */
  shared?: boolean;
  /**
   * bind to these buffers instead of new ones: another Sequential's of the same layer types, so two
   * copies of the layers (a pipeline stage's micro-batches in flight) share weights and gradients
   */
  buffers?: FlatBuffers;
  /**
   * whole buffers in ordinary, garbage-collected memory instead of the backend's heap, as they are
   * dropped once sharded (residency.ts): the gradient (ZeRO stage 2), or the weights too (stage 3)
   */
  transient?: 'grads' | 'params and grads';
}

/**
 * A stack of layers whose parameters and gradients are views into ONE flat Float32Array each
 * (the invariant collectives rely on); non-trained state (BatchNorm statistics) in a third.
 */
export class Sequential implements TrainableModel {
  readonly layers: Layer[];
  /** the whole flat buffers; empty while a residency holds the weights elsewhere (useWhole puts them back) */
  params: Float32Array;
  grads: Float32Array;
  readonly state: Float32Array;
  readonly paramEntries: FlatEntry[];
  readonly stateEntries: FlatEntry[];
  readonly inputShape: readonly number[];
  readonly outputShape: readonly number[];

  constructor(
    readonly backend: Backend,
    layers: Layer[],
    inputShape: readonly number[],
    options: ModelOptions = {},
  ) {
    this.layers = layers;
    this.inputShape = inputShape;
    this.outputShape = layers.length ? layers[layers.length - 1]!.outputShape : inputShape;
    this.slots = layers.map((layer, index) => ({ index, layer }));
    this.layout = planFlatLayout(this.slots);
    this.paramEntries = this.layout.params.flat();
    this.stateEntries = this.layout.state.flat();
    const { paramLength: pl, stateLength: sl } = this.layout;
    const buffers =
      options.buffers ??
      (options.transient
        ? {
            params:
              options.transient === 'grads'
                ? backend.alloc(Math.max(pl, 1), options.shared)
                : new Float32Array(Math.max(pl, 1)),
            grads: new Float32Array(Math.max(pl, 1)),
            state: backend.alloc(Math.max(sl, 1), options.shared),
          }
        : allocFlat(backend, pl, sl, options.shared));
    if (buffers.params.length < this.layout.paramLength || buffers.state.length < this.layout.stateLength)
      throw new Error('Sequential: the buffers given are smaller than its layers need');
    this.params = buffers.params;
    this.grads = buffers.grads;
    this.state = buffers.state;
    bindFlat(this.slots, this.layout, buffers);
    // a tied output projection shares the embedding's views instead of holding a tensor of its own
    tieEmbeddings(layers);
    this.pairs = convPoolPairs(backend, layers);
  }
  private readonly slots: LayerSlot[];
  /** per layer index, a conv2d → max pool pair starting there that the backend runs as one step (convPool.ts) */
  private readonly pairs: (ConvPool | undefined)[];
  private readonly layout: FlatLayout;

  /** All of it is the same on every replica (a data-parallel strategy averages every gradient). */
  get replicatedLength(): number {
    return this.params.length;
  }

  /** Number of trainable values (without alignment padding). */
  get parameterCount(): number {
    return this.paramEntries.reduce((n, e) => n + e.size, 0);
  }

  /** Deterministic initialisation from the seed (identical on every replica). */
  initialize(seed: number): void {
    initializeFlat(this.slots, this.layout, this.params, this.state, seed);
  }

  /** The forward pass, synchronously: a layer that must communicate refuses to run (use forwardAsync). */
  forward(x: Tensor, ctx: ForwardContext): Tensor {
    return runNow(this.forwardPass(x, ctx, false));
  }

  /** True when some layer communicates in training (synchronised BatchNorm) or a residency gathers weights: use the async passes. */
  get needsAsync(): boolean {
    return this.residency !== null || this.layers.some((l) => l.needsAsync === true);
  }

  /** Where the layers find their weights and gradients between uses (ZeRO stages 2 and 3); null: bound to params and grads throughout. */
  residency: ParameterResidency | null = null;

  /** The layer whose weights layer i reads besides its own (a tied output projection: the embedding's); null: none. */
  sharedWeightsOf(i: number): number | null {
    if (!allLayers([this.layers[i]!]).some((l) => l instanceof TiedEmbedding)) return null;
    return this.layers.findIndex((l) => allLayers([l]).some((x) => x instanceof Embedding));
  }

  /** The floats of layer i's parameters in the flat buffer (null: it has none). */
  layerParamRange(i: number): { start: number; end: number } | null {
    const entries = this.layout.params[i]!;
    if (entries.length === 0) return null;
    const last = entries[entries.length - 1]!;
    return { start: entries[0]!.offset, end: last.offset + last.size };
  }

  /** Binds layer i to `params`/`grads` laid out as the flat buffer from offset `base` on (a gathered piece). */
  bindLayer(i: number, params: Float32Array, grads: Float32Array, base: number): void {
    const at = (buf: Float32Array, e: FlatEntry) => buf.subarray(e.offset - base, e.offset - base + e.size);
    const entries = this.layout.params[i]!;
    bindFlatSlot(
      this.slots[i]!,
      entries,
      this.layout.state[i]!,
      this.state,
      (e) => at(params, e),
      (e) => at(grads, e),
    );
  }

  /**
   * Layer i's parameters as a kernel of rows then a bias, where it can run with its kernel
   * gathered a block of rows at a time (a dense layer: rows are its input features); null: it cannot.
   */
  rowSplit(i: number): { kernel: Range; rows: number; rowFloats: number; bias: Range | null } | null {
    const layer = this.layers[i];
    if (!(layer instanceof Dense)) return null;
    const [kernel, bias] = this.layout.params[i]!;
    const range = (e: FlatEntry) => ({ start: e.offset, end: e.offset + e.size });
    return { kernel: range(kernel!), rows: layer.inFeatures, rowFloats: layer.units, bias: bias ? range(bias) : null };
  }

  /** Layer i (a dense layer, see rowSplit) takes its kernel a block of rows at a time from `blocks`; null: its views again. */
  useRowBlocks(i: number, blocks: RowBlockSource | null): void {
    const layer = this.layers[i];
    if (!(layer instanceof Dense)) throw new Error(`layer ${i} (${this.layers[i]?.name}) cannot run in row blocks`);
    layer.useRowBlocks(blocks);
  }

  /** Layer i lets go of its parameter and gradient views (empty ones in their place). */
  releaseLayer(i: number): void {
    const none = new Float32Array(0);
    bindFlatSlot(
      this.slots[i]!,
      this.layout.params[i]!,
      this.layout.state[i]!,
      this.state,
      () => none,
      () => none,
    );
  }

  /** Every layer bound to whole `params` and `grads` again (laid out as the flat buffer), without a residency. */
  useWhole(params: Float32Array, grads: Float32Array): void {
    this.params = params;
    this.grads = grads;
    this.residency = null;
    bindFlat(this.slots, this.layout, { params, grads, state: this.state });
  }

  /**
   * Runs a residency hook, awaiting it in an async pass (a synchronous one cannot gather). The
   * passes call it only when there is a residency: no generator per layer otherwise.
   */
  private *reside(hook: keyof ParameterResidency, i: number, communicating: boolean): Pass<void> {
    const done = this.residency?.[hook](i);
    if (!(done instanceof Promise)) return;
    if (!communicating)
      throw new Error(
        'sharded gradients and weights (ZeRO stages 2 and 3) are reduced and gathered by collectives: run the model asynchronously',
      );
    yield* settle(done);
  }

  /** The forward pass, awaiting the layers that communicate (every replica runs the same layers in the same order). */
  forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    return runLater(this.forwardPass(x, ctx, true));
  }

  /** The one forward loop; with `communicating`, a layer that needs to communicates (pass.ts). */
  private *forwardPass(x: Tensor, ctx: ForwardContext, communicating: boolean): Pass<Tensor> {
    this.checkInput(x, ctx);
    let h = x;
    for (let i = 0; i < this.layers.length; i++) {
      const pair = this.pairs[i];
      if (this.residency) yield* this.reside('beforeForward', i, communicating);
      // a pair's layers are images: the context (sequence lengths) passes through unchanged
      if (pair) {
        if (this.residency) yield* this.reside('beforeForward', i + 1, communicating);
        h = pair.forward(h, ctx);
        if (this.residency) yield* this.reside('afterForward', i, communicating);
        i++;
        if (this.residency) yield* this.reside('afterForward', i, communicating);
        continue;
      }
      const layer = this.layers[i]!;
      h = communicates(layer, communicating) ? yield* settle(layer.forwardAsync!(h, ctx)) : layer.forward(h, ctx);
      if (this.residency) yield* this.reside('afterForward', i, communicating);
      ctx = nextContext(layer, ctx);
    }
    if (ctx.training) this.countActivations();
    return h;
  }

  private checkInput(x: Tensor, ctx: ForwardContext): void {
    const expected = [x.batch, ...this.inputShape];
    if (!shapeFits(x.shape, expected)) {
      throw new Error(`model input: expected shape ${formatShape(expected)}, got ${formatShape(x.shape)}`);
    }
    if (ctx.lengths && isSequenceShape(this.inputShape)) checkLengths(ctx.lengths, x.batch, x.shape[1]!, 'model input');
  }

  /**
   * Valid frames per sample of the model's output from the input's `lengths` (conv1d with stride
   * or valid padding shortens time): the input lengths a sequence loss (CTC) needs.
   */
  outputLengths(lengths: Int32Array): Int32Array {
    return outputLengths(this.layers, lengths);
  }

  /** Activation memory after a training forward (see savedActivationBytes). */
  private countActivations(): void {
    const bytes = savedActivationBytes(this.layers);
    this.lastActivationBytes = bytes;
    this.peakActivationBytes = Math.max(this.peakActivationBytes, bytes);
  }
  /** activation bytes held after the last training forward */
  lastActivationBytes = 0;
  /** the most activation bytes held after any training forward since the last takePeakActivationBytes() */
  peakActivationBytes = 0;

  /** The peak since the last call (then reset). */
  takePeakActivationBytes(): number {
    const peak = this.peakActivationBytes;
    this.peakActivationBytes = 0;
    return peak;
  }

  /**
   * Back-propagates dL/doutput, accumulating into `grads`; the first layer skips its input gradient.
   * After each layer with parameters, `onReady(offset)` says grads[offset:] are final, so their
   * reduction can start while earlier layers still compute. Synchronously: a layer that must
   * communicate refuses to run (use backwardAsync).
   */
  backward(dy: Tensor, onReady?: GradientsReady): void {
    runNow(this.backwardPass(dy, onReady, false));
  }

  /** backward, awaiting the layers that communicate and what onReady returns; see backward. */
  backwardAsync(dy: Tensor, onReady?: GradientsReady): Promise<void> {
    return runLater(this.backwardPass(dy, onReady, true));
  }

  /** The one backward loop; with `communicating`, a layer that needs to communicates (pass.ts). */
  private *backwardPass(dy: Tensor, onReady: GradientsReady | undefined, communicating: boolean): Pass<void> {
    let g: Tensor | null = dy;
    for (let i = this.layers.length - 1; i >= 0 && g; i--) {
      const pair = i > 0 ? this.pairs[i - 1] : undefined;
      if (this.residency) yield* this.reside('beforeBackward', i, communicating);
      if (pair) {
        if (this.residency) yield* this.reside('beforeBackward', i - 1, communicating);
        g = pair.backward(g, i - 1 > 0);
        if (this.residency) yield* this.reside('afterBackward', i, communicating);
        yield* this.ready(i, onReady, communicating);
        i--;
      } else {
        const layer = this.layers[i]!;
        g = communicates(layer, communicating)
          ? yield* settle(layer.backwardAsync!(g, i > 0))
          : layer.backward(g, i > 0);
      }
      if (this.residency) yield* this.reside('afterBackward', i, communicating);
      yield* this.ready(i, onReady, communicating);
    }
  }

  /**
   * Tells onReady that layer i's gradients are final (layers with parameters only); an async pass
   * awaits what it returns (a turn of the event loop for the buckets in flight: hybrid's overlap).
   */
  private *ready(i: number, onReady: GradientsReady | undefined, communicating: boolean): Pass<void> {
    const first = this.firstParamOffset[i]!;
    if (!onReady || first < 0) return;
    const turn = onReady(first);
    if (turn instanceof Promise && communicating) yield* settle(turn);
  }

  get gradientReadyOffsets(): readonly number[] {
    return this.firstParamOffset.filter((o) => o >= 0).reverse();
  }

  /** Offset of each layer's first parameter in the flat buffer (−1 for layers without parameters). */
  private get firstParamOffset(): number[] {
    this.firstOffsets ??= this.layout.params.map((entries) => entries[0]?.offset ?? -1);
    return this.firstOffsets;
  }
  private firstOffsets: number[] | null = null;

  /** where the arrays live when the backend holds them on a GPU */
  get device(): DeviceStorage | undefined {
    return this.backend.device;
  }

  /** Zeroes the gradients, on the device too where they live there. */
  zeroGrads(): void {
    this.grads.fill(0);
    this.backend.device?.fromHost([this.grads]);
  }
}

/** Builds a model from its spec, checking every layer's shapes; errors name the layer. */
export function buildModel(backend: Backend, spec: ModelSpec, options: ModelOptions = {}): Sequential {
  checkModelInput(spec.input);
  const layers: Layer[] = [];
  let shape: readonly number[] = spec.input;
  spec.layers.forEach((layerSpec, i) => {
    const layer = buildLayer(backend, layerSpec, i, shape);
    checkOutputShape(layer, shape);
    layers.push(layer);
    shape = layer.outputShape;
  });
  return new Sequential(backend, layers, spec.input, options);
}

/** The context the next layer sees: the sequence lengths of this layer's output. */
function nextContext(layer: Layer, ctx: ForwardContext): ForwardContext {
  return ctx.lengths && layer.outputLengths ? { ...ctx, lengths: layer.outputLengths(ctx.lengths) } : ctx;
}
