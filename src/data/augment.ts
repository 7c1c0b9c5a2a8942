/**
 * Random augmentation of training images ([H, W, C] samples, NHWC): horizontal flip, pad-and-crop
 * (zero padding), shift (edge fill). Every draw is keyed by (seed, epoch, sample index in the
 * training set) with Philox, so a sample is augmented the same way whichever device or batch slice
 * it lands in: G devices train exactly what one device trains.
 */
import { CounterRng } from '../tensor/rng.ts';
import type { AugmentSpec } from './spec.ts';

/** Salt separating augmentation draws from the other streams keyed by the same seed. */
const AUGMENT_STREAM = 0xa067;

/** The transform drawn for one sample. */
export interface SampleTransform {
  flip: boolean;
  cropY: number;
  cropX: number;
  shiftY: number;
  shiftX: number;
}

/** Whether the spec asks for anything. */
export function augments(spec: AugmentSpec | undefined): spec is AugmentSpec {
  return !!spec && (spec.flip === true || (spec.crop ?? 0) > 0 || (spec.shift ?? 0) > 0);
}

/** Checks that `spec` fits samples of `sampleShape`, naming data.augment. */
export function checkAugment(spec: AugmentSpec | undefined, sampleShape: readonly number[]): void {
  if (!augments(spec)) return;
  if (sampleShape.length !== 3) {
    throw new Error(
      `data.augment: flip, crop and shift work on images [H, W, C], but the samples are ${sampleShape.join('×')}; remove data.augment for this dataset`,
    );
  }
  const [H, W] = sampleShape as [number, number, number];
  for (const key of ['crop', 'shift'] as const) {
    const v = spec[key] ?? 0;
    if (v >= Math.min(H, W))
      throw new Error(`data.augment.${key}: ${v} pixels is not less than the ${H}×${W} images; use a few pixels`);
  }
}

/** The transform of training sample `index` in epoch `epoch`: a pure function of its arguments. */
export function drawTransform(spec: AugmentSpec, seed: number, epoch: number, index: number): SampleTransform {
  const rng = new CounterRng(seed, AUGMENT_STREAM, epoch, index);
  const flip = spec.flip === true && rng.at(0) < 0.5;
  const crop = spec.crop ?? 0,
    shift = spec.shift ?? 0;
  const offset = (i: number, r: number) => (r > 0 ? Math.floor(rng.at(i) * (2 * r + 1)) - r : 0);
  return { flip, cropY: offset(1, crop), cropX: offset(2, crop), shiftY: offset(3, shift), shiftX: offset(4, shift) };
}

/**
 * Applies `t` to the sample at `offset` in `images` (in place, through `scratch` of H·W·C floats):
 * out(y, x) = shifted(y + cropY, x' + cropX), zero outside; shifted(q) = in(clamp(q + shift));
 * x' = W − 1 − x when flipped.
 */
export function transformSample(
  images: Float32Array,
  offset: number,
  shape: readonly number[],
  t: SampleTransform,
  scratch: Float32Array,
): void {
  const [H, W, C] = shape as [number, number, number];
  const size = H * W * C;
  scratch.set(images.subarray(offset, offset + size));
  const clamp = (v: number, n: number) => (v < 0 ? 0 : v >= n ? n - 1 : v);
  for (let y = 0; y < H; y++) {
    const cy = y + t.cropY;
    for (let x = 0; x < W; x++) {
      const o = offset + (y * W + x) * C;
      const cx = (t.flip ? W - 1 - x : x) + t.cropX;
      if (cy < 0 || cy >= H || cx < 0 || cx >= W) {
        for (let c = 0; c < C; c++) images[o + c] = 0;
        continue;
      }
      const from = (clamp(cy + t.shiftY, H) * W + clamp(cx + t.shiftX, W)) * C;
      for (let c = 0; c < C; c++) images[o + c] = scratch[from + c]!;
    }
  }
}

/** Augments training batches: each sample by the transform of its (seed, epoch, index). */
export class Augmenter {
  private readonly scratch: Float32Array;

  constructor(
    readonly spec: AugmentSpec,
    readonly sampleShape: readonly number[],
    readonly seed: number,
  ) {
    checkAugment(spec, sampleShape);
    this.scratch = new Float32Array(sampleShape.reduce((a, b) => a * b, 1));
  }

  /** Augments the gathered `images` in place; `indices` are the samples' indices in the training set. */
  apply(images: Float32Array, indices: ArrayLike<number>, epoch: number): void {
    const size = this.scratch.length;
    for (let k = 0; k < indices.length; k++) {
      const t = drawTransform(this.spec, this.seed, epoch, indices[k]!);
      if (!t.flip && !t.cropX && !t.cropY && !t.shiftX && !t.shiftY) continue;
      transformSample(images, k * size, this.sampleShape, t, this.scratch);
    }
  }
}

/** The augmenter of a data spec, or null when it asks for none. */
export function augmenterFor(
  spec: AugmentSpec | undefined,
  sampleShape: readonly number[],
  seed: number,
): Augmenter | null {
  return augments(spec) ? new Augmenter(spec, sampleShape, seed) : null;
}
