/**
 * Normalisation `(x − mean) / std` per channel: the last axis of a sample (C of an [H, W, C] image,
 * each feature of an [F] row). `computed` takes mean and std (population) from the training split;
 * the values are recorded in the datasets and the checkpoint so predict applies the same.
 */
import { sampleSize, type Dataset } from './dataset.ts';
import type { NormalizeSpec } from './spec.ts';

export interface Normalization {
  mean: number[];
  std: number[];
}

/** Channels of a dataset's samples: the size of their last axis. */
export function channelsOf(ds: Dataset): number {
  return ds.sampleShape[ds.sampleShape.length - 1] ?? 1;
}

/** Mean and standard deviation of every channel over every sample of `ds`. A constant channel gets std 1. */
export function computeNormalization(ds: Dataset): Normalization {
  const C = channelsOf(ds),
    n = ds.count * sampleSize(ds);
  const sum = new Float64Array(C),
    sq = new Float64Array(C);
  for (let i = 0; i < n; i++) sum[i % C] += ds.images[i]!;
  const per = n / C;
  const mean = Array.from(sum, (s) => s / per);
  for (let i = 0; i < n; i++) {
    const d = ds.images[i]! - mean[i % C]!;
    sq[i % C] += d * d;
  }
  const std = Array.from(sq, (s) => Math.sqrt(s / per)).map((s) => (s > 1e-12 ? s : 1));
  return { mean, std };
}

/** The normalisation a spec asks for (given values expanded to one per channel), checked against the data. */
export function resolveNormalization(spec: NormalizeSpec, train: Dataset): Normalization {
  if (spec === 'computed') return computeNormalization(train);
  const C = channelsOf(train);
  const expand = (v: number | number[], key: string): number[] => {
    if (typeof v === 'number') return new Array<number>(C).fill(v);
    if (v.length !== C) {
      throw new Error(
        `data.normalize.${key}: ${v.length} values, but the samples of ${train.name} have ${C} channels (the last axis of ${train.sampleShape.join('×')}); give ${C} values or one for all`,
      );
    }
    return [...v];
  };
  return { mean: expand(spec.mean, 'mean'), std: expand(spec.std, 'std') };
}

/**
 * Normalises samples in place: `values` holds whole samples whose last axis has `norm.mean.length`
 * channels (what predict does to new samples with a checkpoint's `paratrain.data` normalisation).
 */
export function normalizeValues(values: Float32Array, norm: Normalization): void {
  const C = norm.mean.length;
  if (values.length % C !== 0)
    throw new Error(`normalizeValues: ${values.length} values are not whole samples of ${C} channels`);
  const scale = norm.std.map((s) => 1 / s);
  for (let i = 0; i < values.length; i++) {
    const c = i % C;
    values[i] = (values[i]! - norm.mean[c]!) * scale[c]!;
  }
}

/** Normalises `ds`'s samples in place and records the values in it. */
export function applyNormalization(ds: Dataset, norm: Normalization): void {
  normalizeValues(ds.images.subarray(0, ds.count * sampleSize(ds)), norm);
  ds.normalization = { mean: [...norm.mean], std: [...norm.std] };
}
