import type { IdxImagesAndLabels } from './idx.ts';
import type { DatasetTask } from './spec.ts';
import type { CsvColumnNames } from './csvColumns.ts';
import { limitSpeechDataset, shareSpeechDataset, type SpeechDataset } from '../speech/speechDataset.ts';
import type { TextTokens } from './textTokens.ts';

/**
 * An in-memory labelled set. Samples are in one Float32Array (images NHWC, N×H×W×1 for greyscale,
 * pixels scaled to [0, 1]; tabular rows [N, F]) so batches are gathered by plain copies.
 */
export interface Dataset {
  /** names the source in messages (a file, a folder, a split of one) */
  name: string;
  /** count × (product of sampleShape) values, NHWC for images */
  images: Float32Array;
  /** class indices (classification; `labelsPerSample` per sample); zeros when `targets` holds the labels */
  labels: Int32Array;
  /** labels per sample (default 1): a text dataset's windows have T, the next token at each position */
  labelsPerSample?: number;
  count: number;
  /** per-sample shape: [H, W, C] for images (e.g. [28, 28, 1]), [F] for rows of features */
  sampleShape: number[];
  /** number of classes; every label is in [0, classes). 0 for regression */
  classes: number;
  /** classification (default), regression (targets are values), multiLabel (targets are 0/1) or transcription (`speech`) */
  task?: DatasetTask;
  /** count × targetSize values: regression targets or multi-hot labels */
  targets?: Float32Array;
  /** values per sample in `targets` */
  targetSize?: number;
  /** the name of each class (classification) or target (multiLabel, regression), in index order */
  classNames?: string[];
  /** the normalisation already applied to `images` (predict applies it to new samples) */
  normalization?: { mean: number[]; std: number[] };
  /** a CSV training set's columns by header name (predict and eval find them by name in other files) */
  columns?: CsvColumnNames;
  /**
   * A speech dataset (task transcription, data/speech.ts): its utterances of variable length, their
   * features and label sequences; `images` and `labels` are then empty and `count` its utterances
   */
  speech?: SpeechDataset;
  /** a text dataset (task language, data/textDataset.ts): its token ids, vocabulary and windows */
  text?: TextTokens;
}

/** The task of a dataset (classification when not said). */
export function taskOf(ds: Dataset): DatasetTask {
  return ds.task ?? 'classification';
}

/** What the model's last layer must produce per sample (per position, language): a score per class, or a value per target. */
export function outputUnits(ds: Dataset): number {
  const task = taskOf(ds);
  return task === 'classification' || task === 'language' ? ds.classes : (ds.targetSize ?? 0);
}

/** Labels per sample in `labels`: 1, or a text window's T next tokens. */
export function labelsPerSample(ds: Dataset): number {
  return ds.labelsPerSample ?? 1;
}

/** A dataset's samples at `indices` (in that order), copied: the split of a set into training and validation. */
export function subsetDataset(ds: Dataset, indices: ArrayLike<number>, name: string): Dataset {
  const size = sampleSize(ds),
    t = ds.targetSize ?? 0,
    l = labelsPerSample(ds),
    n = indices.length;
  const images = new Float32Array(n * size),
    labels = new Int32Array(n * l);
  const targets = ds.targets ? new Float32Array(n * t) : undefined;
  for (let k = 0; k < n; k++) {
    const i = indices[k]!;
    images.set(ds.images.subarray(i * size, (i + 1) * size), k * size);
    labels.set(ds.labels.subarray(i * l, (i + 1) * l), k * l);
    if (targets) targets.set(ds.targets!.subarray(i * t, (i + 1) * t), k * t);
  }
  return { ...ds, name, images, labels, count: n, sampleShape: [...ds.sampleShape], ...(targets ? { targets } : {}) };
}

/** Values per sample (H·W·C). */
export function sampleSize(ds: Dataset): number {
  return ds.sampleShape.reduce((a, b) => a * b, 1);
}

/** The first n samples (all of them if n ≥ count): views into the same memory, no copy. */
export function limitDataset(ds: Dataset, n: number): Dataset {
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`limitDataset(${ds.name}): the limit must be a whole number ≥ 0, got ${n}`);
  const count = Math.min(n, ds.count);
  if (ds.speech)
    return { ...ds, sampleShape: [...ds.sampleShape], count, speech: limitSpeechDataset(ds.speech, count) };
  return {
    ...ds,
    sampleShape: [...ds.sampleShape],
    images: ds.images.subarray(0, count * sampleSize(ds)),
    labels: ds.labels.subarray(0, count * labelsPerSample(ds)),
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
      throw new Error(
        `${labelsPath}: label ${label} at index ${i} is outside 0..${classes - 1}; this is not a ${classes}-class labels file`,
      );
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
  if (ds.speech) return { ...ds, sampleShape: [...ds.sampleShape], speech: shareSpeechDataset(ds.speech) };
  const images = new Float32Array(new SharedArrayBuffer(ds.images.byteLength));
  images.set(ds.images);
  const labels = new Int32Array(new SharedArrayBuffer(ds.labels.byteLength));
  labels.set(ds.labels);
  let targets: Float32Array | undefined;
  if (ds.targets) {
    targets = new Float32Array(new SharedArrayBuffer(ds.targets.byteLength));
    targets.set(ds.targets);
  }
  let text = ds.text;
  if (text) {
    const tokens = new Int32Array(new SharedArrayBuffer(text.tokens.byteLength));
    tokens.set(text.tokens);
    text = { ...text, tokens };
  }
  return {
    ...ds,
    sampleShape: [...ds.sampleShape],
    images,
    labels,
    ...(targets ? { targets } : {}),
    ...(text ? { text } : {}),
  };
}
