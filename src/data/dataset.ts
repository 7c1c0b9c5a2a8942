import type { IdxImagesAndLabels } from './idx.ts';

/**
 * An in-memory labelled image set. Images are NHWC (N×H×W×1 for greyscale) scaled to [0, 1],
 * in one Float32Array so batches are gathered by plain copies.
 */
export interface Dataset {
  name: string;
  /** count × H × W × C values in [0, 1], NHWC */
  images: Float32Array;
  labels: Int32Array;
  count: number;
  /** [H, W, C], e.g. [28, 28, 1] */
  sampleShape: number[];
  /** number of classes; every label is in [0, classes) */
  classes: number;
  /** count × targetSize values: regression values or multi-hot labels (`labels` then holds zeros) */
  targets?: Float32Array;
  /** values per sample in `targets` */
  targetSize?: number;
  /** class names, by label index */
  classNames?: string[];
  /** what the samples are labelled for (default classification) */
  task?: 'classification' | 'regression' | 'multiLabel';
}

/** Values per sample (H·W·C). */
export function sampleSize(ds: Dataset): number {
  return ds.sampleShape.reduce((a, b) => a * b, 1);
}

/** The first n samples (all of them if n ≥ count): views into the same memory, no copy. */
export function limitDataset(ds: Dataset, n: number): Dataset {
  if (!Number.isInteger(n) || n < 0) throw new Error(`limitDataset(${ds.name}): the limit must be a whole number ≥ 0, got ${n}`);
  const count = Math.min(n, ds.count);
  return {
    ...ds,
    sampleShape: [...ds.sampleShape],
    images: ds.images.subarray(0, count * sampleSize(ds)),
    labels: ds.labels.subarray(0, count),
    ...(ds.targets ? { targets: ds.targets.subarray(0, count * (ds.targetSize ?? 0)) } : {}),
    count,
  };
}

/** Converts a checked images + labels IDX pair into a Dataset (bytes scaled by 1/255). */
export function datasetFromIdx(name: string, pair: IdxImagesAndLabels, classes: number, labelsPath = name): Dataset {
  const { count, rows, cols } = pair;
  const src = pair.images.data;
  const images = new Float32Array(src.length);
  // a table of the 256 values: one lookup per pixel, and each value is the correctly rounded b/255
  const table = new Float32Array(256);
  for (let b = 0; b < 256; b++) table[b] = b / 255;
  for (let i = 0; i < src.length; i++) images[i] = table[src[i]!]!;
  const labels = new Int32Array(count);
  const rawLabels = pair.labels.data;
  for (let i = 0; i < count; i++) {
    const label = rawLabels[i]!;
    if (label >= classes) {
      throw new Error(`${labelsPath}: label ${label} at index ${i} is outside 0..${classes - 1}; this is not a ${classes}-class labels file`);
    }
    labels[i] = label;
  }
  return { name, images, labels, count, sampleShape: [rows, cols, 1], classes };
}

/**
 * A copy whose arrays live in SharedArrayBuffers, so posting it to worker threads shares the
 * samples instead of copying them once per device.
 */
export function shareDataset(ds: Dataset): Dataset {
  const images = new Float32Array(new SharedArrayBuffer(ds.images.byteLength));
  images.set(ds.images);
  const labels = new Int32Array(new SharedArrayBuffer(ds.labels.byteLength));
  labels.set(ds.labels);
  const targets = ds.targets && new Float32Array(new SharedArrayBuffer(ds.targets.byteLength));
  targets?.set(ds.targets!);
  return { ...ds, sampleShape: [...ds.sampleShape], images, labels, ...(targets ? { targets } : {}) };
}
