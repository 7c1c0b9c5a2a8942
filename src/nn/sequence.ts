/**
 * Sequence batches: `[N, T, F]`, each sample padded to the batch's longest with per-sample valid
 * frame counts (`ForwardContext.lengths`). A per-sample shape of rank 2, `[T, F]`, is a sequence;
 * T may be `VARIABLE` (each batch decides it). These helpers keep padding from changing a result:
 * layers write zeros at padded frames and ignore what they read there.
 */
import { formatShape, shapeSize, VARIABLE } from '../tensor/shape.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { BufferPool, Layer } from './layer.ts';

/** True for a per-sample shape `[frames, features]` (a sequence). */
export const isSequenceShape = (shape: readonly number[]): boolean => shape.length === 2;

/**
 * model.input: `[features]`, `[height, width, channels]` or a sequence `[frames, features]` whose
 * frames may be variable (`null` in a config); every other dimension a positive integer.
 */
export function checkModelInput(input: readonly number[]): void {
  const ok =
    input.length >= 1 &&
    input.length <= 3 &&
    input.every((d, i) => (Number.isInteger(d) && d >= 1) || (d === VARIABLE && i === 0 && input.length === 2));
  if (!ok) {
    throw new Error(
      `model.input: expected [features], [height, width, channels] or [frames, features] (frames may be null: variable) ` +
        `of positive integers, got ${formatShape(input)}`,
    );
  }
}

/** `actual` (a tensor's shape) fits `expected`, where a VARIABLE dimension takes any size ≥ 1. */
export function shapeFits(actual: readonly number[], expected: readonly number[]): boolean {
  return (
    actual.length === expected.length &&
    expected.every((d, i) => d === actual[i] || (d === VARIABLE && actual[i]! >= 1))
  );
}

/** Size of a layer's output shape for the "empty output" check: variable dimensions count as 1. */
export const fixedSize = (shape: readonly number[]): number => shapeSize(shape.map((d) => (d === VARIABLE ? 1 : d)));

/**
 * The lengths of a batch of `n` sequences of `frames`: refuses a wrong count or a length outside
 * [0, frames], naming `what` (the model input, a layer).
 */
export function checkLengths(lengths: Int32Array, n: number, frames: number, what: string): void {
  if (lengths.length !== n)
    throw new Error(
      `${what}: ${lengths.length} sequence lengths for a batch of ${n} samples; give one length per sample`,
    );
  for (let i = 0; i < n; i++) {
    const l = lengths[i]!;
    if (!(l >= 0 && l <= frames)) {
      throw new Error(
        `${what}: sample ${i} has length ${l} but the batch holds ${frames} frames; lengths must be in [0, ${frames}]`,
      );
    }
  }
}

/** [N, T, F] of a sequence tensor. */
export function sequenceDims(x: Tensor): [number, number, number] {
  return [x.shape[0]!, x.shape[1]!, x.shape[2]!];
}

/** The valid frames of sample n: `lengths[n]`, or every frame when the batch has no lengths. */
export const validFrames = (lengths: Int32Array | undefined, n: number, frames: number): number =>
  lengths ? Math.min(lengths[n]!, frames) : frames;

/**
 * A layer's own copy of the lengths its forward saw (backward needs them; the caller's array may
 * change in between), or undefined for a batch without lengths. From the layer's pool: no allocation.
 */
export function keepLengths(pool: BufferPool, lengths: Int32Array | undefined): Int32Array | undefined {
  if (!lengths) return undefined;
  const own = pool.i32('lengths', lengths.length);
  own.set(lengths);
  return own;
}

/** Zeroes frames t ≥ lengths[n] of data [N, T, F] in place (nothing without lengths). */
export function zeroPadding(
  data: Float32Array,
  n: number,
  frames: number,
  features: number,
  lengths: Int32Array | undefined,
): void {
  if (!lengths) return;
  for (let s = 0; s < n; s++) {
    const len = validFrames(lengths, s, frames);
    if (len < frames) data.fill(0, (s * frames + len) * features, (s + 1) * frames * features);
  }
}

/**
 * The lengths after `layers` (each maps its input's to its output's), from the model input's: what
 * a sequence loss (CTC) needs when layers shorten time. Returns `lengths` itself when none does.
 */
export function outputLengths(layers: readonly Layer[], lengths: Int32Array): Int32Array {
  let l = lengths;
  for (const layer of layers) if (layer.outputLengths) l = layer.outputLengths(l);
  return l;
}
