import { Tensor } from '../tensor/tensor.ts';
import { shapeSize, formatShape, shapesEqual } from '../tensor/shape.ts';
import type { Backend } from '../kernels/backend.ts';
import type { ForwardContext, Layer } from './layer.ts';
import type { ModelSpec } from './spec.ts';
import { buildLayer, checkOutputShape } from './buildLayer.ts';
import { initParam } from './init.ts';

/** Where one named tensor lives inside a flat buffer. */
export interface FlatEntry {
  /** 'layers.3.kernel' — stable across runs, used as the checkpoint tensor name */
  name: string;
  shape: number[];
  offset: number;
  size: number;
}

/** Offsets are aligned to 16 floats (64 bytes) so SIMD kernels and cache lines see aligned views. */
const ALIGN = 16;
const align = (n: number) => Math.ceil(n / ALIGN) * ALIGN;
/** `n` rounded up to the alignment of flat-buffer entries (for layouts built outside Sequential). */
export const alignFloats = align;

export interface ModelOptions {
  /** put the flat parameter/gradient buffers in SharedArrayBuffer memory (for other threads) */
  shared?: boolean;
}

/**
 * A stack of layers whose parameters and gradients are views into ONE flat Float32Array each
 * (the invariant collectives rely on); non-trained state (BatchNorm statistics) in a third.
 */
export class Sequential {
  readonly layers: Layer[];
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly state: Float32Array;
  readonly paramEntries: FlatEntry[] = [];
  readonly stateEntries: FlatEntry[] = [];
  readonly inputShape: readonly number[];
  readonly outputShape: readonly number[];

  constructor(readonly backend: Backend, layers: Layer[], inputShape: readonly number[], options: ModelOptions = {}) {
    this.layers = layers;
    this.inputShape = inputShape;
    this.outputShape = layers.length ? layers[layers.length - 1]!.outputShape : inputShape;
    let paramSize = 0, stateSize = 0;
    layers.forEach((layer, i) => {
      for (const p of layer.params()) {
        const size = shapeSize(p.shape);
        this.paramEntries.push({ name: `layers.${i}.${p.name}`, shape: p.shape, offset: paramSize, size });
        paramSize = align(paramSize + size);
      }
      for (const s of layer.state()) {
        const size = shapeSize(s.shape);
        this.stateEntries.push({ name: `layers.${i}.${s.name}`, shape: s.shape, offset: stateSize, size });
        stateSize = align(stateSize + size);
      }
    });
    this.params = backend.alloc(Math.max(paramSize, 1), options.shared);
    this.grads = backend.alloc(Math.max(paramSize, 1), options.shared);
    this.state = backend.alloc(Math.max(stateSize, 1), options.shared);
    let p = 0, s = 0;
    for (const layer of layers) {
      const nParams = layer.params().length, nState = layer.state().length;
      const entries = this.paramEntries.slice(p, p + nParams);
      const states = this.stateEntries.slice(s, s + nState);
      layer.bind(
        entries.map((e) => this.params.subarray(e.offset, e.offset + e.size)),
        entries.map((e) => this.grads.subarray(e.offset, e.offset + e.size)),
        states.map((e) => this.state.subarray(e.offset, e.offset + e.size)),
      );
      p += nParams; s += nState;
    }
  }

  /** Number of trainable values (without alignment padding). */
  get parameterCount(): number {
    return this.paramEntries.reduce((n, e) => n + e.size, 0);
  }

  /** Deterministic initialisation from the seed (identical on every replica). */
  initialize(seed: number): void {
    let index = 0;
    this.layers.forEach((layer) => {
      for (const spec of layer.params()) {
        const e = this.paramEntries[index]!;
        initParam(spec, this.params.subarray(e.offset, e.offset + e.size), seed, index);
        index++;
      }
    });
    let s = 0;
    for (const layer of this.layers) {
      for (const spec of layer.state()) {
        const e = this.stateEntries[s++]!;
        this.state.subarray(e.offset, e.offset + e.size).fill(spec.init === 'ones' ? 1 : 0);
      }
    }
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    this.checkInput(x);
    let h = x;
    for (const layer of this.layers) h = layer.forward(h, ctx);
    if (ctx.training) this.countActivations();
    return h;
  }

  /** True when some layer communicates in training (synchronised BatchNorm): use the async passes. */
  get needsAsync(): boolean {
    return this.layers.some((l) => l.needsAsync === true);
  }

  /** forward, awaiting layers that communicate (every replica runs the same layers in the same order). */
  async forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    this.checkInput(x);
    let h = x;
    for (const layer of this.layers) h = layer.forwardAsync ? await layer.forwardAsync(h, ctx) : layer.forward(h, ctx);
    if (ctx.training) this.countActivations();
    return h;
  }

  private checkInput(x: Tensor): void {
    const expected = [x.batch, ...this.inputShape];
    if (!shapesEqual(x.shape, expected)) {
      throw new Error(`model input: expected shape ${formatShape(expected)}, got ${formatShape(x.shape)}`);
    }
  }

  /**
   * Activation memory: after a training forward, the bytes of the distinct batch-sized arrays the
   * layers keep for backward (their inputs and outputs where backward reads them, dropout masks,
   * BatchNorm's x̂, max-pool argmax). Backward's gradient scratch is not counted. This is what
   * micro-batching divides.
   */
  private countActivations(): void {
    const seen = new Map<ArrayBufferLike, Set<string>>();
    let bytes = 0;
    for (const layer of this.layers) {
      for (const a of layer.savedForBackward?.() ?? []) {
        let set = seen.get(a.buffer);
        if (!set) { set = new Set(); seen.set(a.buffer, set); }
        const key = `${a.byteOffset}:${a.byteLength}`;
        if (set.has(key)) continue;
        set.add(key);
        bytes += a.byteLength;
      }
    }
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
   * reduction can start while earlier layers still compute.
   */
  backward(dy: Tensor, onReady?: (offset: number) => void): void {
    let g: Tensor | null = dy;
    for (let i = this.layers.length - 1; i >= 0 && g; i--) {
      g = this.layers[i]!.backward(g, i > 0);
      const first = this.firstParamOffset[i]!;
      if (onReady && first >= 0) onReady(first);
    }
  }

  /** backward, awaiting layers that communicate; see backward. */
  async backwardAsync(dy: Tensor, onReady?: (offset: number) => void): Promise<void> {
    let g: Tensor | null = dy;
    for (let i = this.layers.length - 1; i >= 0 && g; i--) {
      const layer = this.layers[i]!;
      g = layer.backwardAsync ? await layer.backwardAsync(g, i > 0) : layer.backward(g, i > 0);
      const first = this.firstParamOffset[i]!;
      if (onReady && first >= 0) onReady(first);
    }
  }

  /** Offset of each layer's first parameter in the flat buffer (−1 for layers without parameters). */
  private get firstParamOffset(): number[] {
    if (!this.firstOffsets) {
      let p = 0;
      this.firstOffsets = this.layers.map((layer) => {
        const n = layer.params().length;
        const offset = n ? this.paramEntries[p]!.offset : -1;
        p += n;
        return offset;
      });
    }
    return this.firstOffsets;
  }
  private firstOffsets: number[] | null = null;

  zeroGrads(): void {
    this.grads.fill(0);
  }
}

/** Builds a model from its spec, checking every layer's shapes; errors name the layer. */
export function buildModel(backend: Backend, spec: ModelSpec, options: ModelOptions = {}): Sequential {
  if (!spec.input.length || spec.input.some((d) => !Number.isInteger(d) || d < 1)) {
    throw new Error(`model.input: expected a list of positive integers, got ${formatShape(spec.input)}`);
  }
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
