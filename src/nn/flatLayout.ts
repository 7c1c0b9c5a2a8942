import { shapeSize } from '../tensor/shape.ts';
import type { Backend } from '../kernels/backend.ts';
import type { Layer } from './layer.ts';
import { initParam } from './init.ts';

/**
 * The flat parameter layout: every parameter (and gradient) of a model is a view into ONE flat
 * Float32Array, non-trained state (BatchNorm statistics) into a second — the invariant collectives
 * rely on. Built once here for the whole model (`Sequential`) and for one device's part of a split
 * one (the model-parallel net), so both name, align, bind and initialise their tensors the same way.
 */

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
/** `n` rounded up to the alignment of flat-buffer entries. */
export const alignFloats = (n: number): number => Math.ceil(n / ALIGN) * ALIGN;

/** A layer and its index in the model's layer list (entries are named `layers.<index>.<name>`). */
export interface LayerSlot {
  index: number;
  layer: Layer;
}

export interface FlatLayout {
  /** per slot, in slot order: its parameter entries and its state entries */
  params: FlatEntry[][];
  state: FlatEntry[][];
  /** floats up to the end of the last parameter entry (aligned), from offset 0 */
  paramLength: number;
  stateLength: number;
}

/**
 * Places the slots' parameters one after another in slot order (each entry aligned), starting at
 * `paramStart` (a second section of a buffer: a model-parallel device's shards after its replicated
 * layers); state likewise from `stateStart`.
 */
export function planFlatLayout(slots: readonly LayerSlot[], paramStart = 0, stateStart = 0): FlatLayout {
  let p = paramStart,
    s = stateStart;
  const params: FlatEntry[][] = [],
    state: FlatEntry[][] = [];
  for (const { index, layer } of slots) {
    params.push(
      layer.params().map((spec) => {
        const size = shapeSize(spec.shape),
          e = { name: `layers.${index}.${spec.name}`, shape: spec.shape, offset: p, size };
        p = alignFloats(p + size);
        return e;
      }),
    );
    state.push(
      layer.state().map((spec) => {
        const size = shapeSize(spec.shape),
          e = { name: `layers.${index}.${spec.name}`, shape: spec.shape, offset: s, size };
        s = alignFloats(s + size);
        return e;
      }),
    );
  }
  return { params, state, paramLength: p, stateLength: s };
}

export interface FlatBuffers {
  params: Float32Array;
  grads: Float32Array;
  state: Float32Array;
}

/** The three flat buffers for `paramLength`/`stateLength` floats (at least one each), backend-owned. */
export function allocFlat(backend: Backend, paramLength: number, stateLength: number, shared?: boolean): FlatBuffers {
  return {
    params: backend.alloc(Math.max(paramLength, 1), shared),
    grads: backend.alloc(Math.max(paramLength, 1), shared),
    state: backend.alloc(Math.max(stateLength, 1), shared),
  };
}

const view = (buf: Float32Array, e: FlatEntry) => buf.subarray(e.offset, e.offset + e.size);

/** Gives every slot's layer its parameter, gradient and state views (in the order of params() and state()). */
export function bindFlat(slots: readonly LayerSlot[], layout: FlatLayout, buffers: FlatBuffers): void {
  slots.forEach((slot, k) => {
    const param = (e: FlatEntry) => view(buffers.params, e),
      grad = (e: FlatEntry) => view(buffers.grads, e);
    bindFlatSlot(slot, layout.params[k]!, layout.state[k]!, buffers.state, param, grad);
  });
}

/** Binds one slot's layer: its parameter and gradient views as `param`/`grad` place an entry, its state in `state`. */
export function bindFlatSlot(
  { layer }: LayerSlot,
  params: readonly FlatEntry[],
  stateEntries: readonly FlatEntry[],
  state: Float32Array,
  param: (e: FlatEntry) => Float32Array,
  grad: (e: FlatEntry) => Float32Array,
): void {
  layer.bind(
    params.map(param),
    params.map(grad),
    stateEntries.map((e) => view(state, e)),
  );
}

/**
 * Deterministic initialisation of one layer: its parameters (into `views`, in params() order) are
 * draws (seed, index) from `firstIndex` on — the index of its first parameter in the unsplit model —
 * so every replica starts identical, however the model is later split. Returns the next index.
 */
export function initializeLayer(
  layer: Layer,
  views: readonly Float32Array[],
  seed: number,
  firstIndex: number,
): number {
  let index = firstIndex;
  for (const [j, spec] of layer.params().entries()) initParam(spec, views[j]!, seed, index++);
  return index;
}

/** A layer's state at its spec's starting value (views in state() order). */
export function initializeState(layer: Layer, views: readonly Float32Array[]): void {
  for (const [j, spec] of layer.state().entries()) views[j]!.fill(spec.init === 'ones' ? 1 : 0);
}

/** Deterministic initialisation of every slot (the whole model, its layers in order) from the seed. */
export function initializeFlat(
  slots: readonly LayerSlot[],
  layout: FlatLayout,
  params: Float32Array,
  state: Float32Array,
  seed: number,
): void {
  let index = 0;
  slots.forEach(({ layer }, k) => {
    index = initializeLayer(
      layer,
      layout.params[k]!.map((e) => view(params, e)),
      seed,
      index,
    );
    initializeState(
      layer,
      layout.state[k]!.map((e) => view(state, e)),
    );
  });
}
