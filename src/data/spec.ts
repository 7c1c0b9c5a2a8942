/**
 * The normalised `data:` section (defaults filled in). It is also valid YAML input: the config
 * writer spreads it back as it is, so every key here is one a user may write.
 */

import type { FeatureOptions } from '../speech/featureOptions.ts';

/** What the labels of a dataset are. */
export type DataTask = 'classification' | 'regression' | 'multiLabel';
/**
 * A dataset's task: a DataTask, `transcription` (a speech dataset's label sequences, for CTC) or
 * `language` (a text dataset's windows: the next token at every position).
 */
export type DatasetTask = DataTask | 'transcription' | 'language';

/** The dataset types of the registry (src/data/registry.ts). */
export const DATASET_TYPES = ['fashion-mnist', 'idx', 'csv', 'npy', 'imageFolder', 'memory', 'speech', 'text'] as const;
export type DatasetType = (typeof DATASET_TYPES)[number];

/** A CSV column: its header name, or its 0-based index (negative counts from the end: -1 is the last). */
export type ColumnRef = string | number;

/**
 * Per-channel (images: the last axis C) or per-feature normalisation `(x − mean) / std`, applied when
 * the data is loaded. `computed`: from the training split. A single number applies to every channel.
 */
export type NormalizeSpec = 'computed' | { mean: number | number[]; std: number | number[] };

/** Random augmentation of training images ([H, W, C] samples), keyed by (seed, epoch, sample index). */
export interface AugmentSpec {
  /** mirror left–right with probability 1/2 */
  flip?: boolean;
  /** pad by this many pixels of zeros on every side, then crop H×W back at a random offset */
  crop?: number;
  /** translate by up to ± this many pixels in each direction, filling with the nearest edge pixel */
  shift?: number;
}

/** Fields every dataset type takes. */
export interface DataCommon {
  /**
   * fashion-mnist: directory holding the IDX files (when absent the lookup order in README applies);
   * the other types: the folder their relative paths resolve against (default: a config file's own
   * folder, config/dataPaths.ts; a config written in code: the working directory)
   */
  dir?: string;
  /** batch size; see batchSizeScope */
  batchSize: number;
  /** 'perDevice': every device gets batchSize samples a step; 'global': batchSize is split across devices */
  batchSizeScope: 'perDevice' | 'global';
  shuffle: boolean;
  /** use only the first N training / test samples (quick runs); the training limit applies before the validation split */
  trainLimit?: number;
  testLimit?: number;
  normalize?: NormalizeSpec;
  augment?: AugmentSpec;
}

/** An images file and a labels file in IDX format (raw or .gz). */
export interface IdxPairSpec {
  images: string;
  labels: string;
}

export interface FashionMnistDataSpec extends DataCommon {
  dataset: 'fashion-mnist';
  /** a fraction of the training set held out for validation (seeded by train.seed) */
  validation?: number;
}

export interface IdxDataSpec extends DataCommon {
  dataset: 'idx';
  /** default: train-images-idx3-ubyte / train-labels-idx1-ubyte (or .gz) in dir */
  train?: IdxPairSpec;
  /** default: t10k-images-idx3-ubyte / t10k-labels-idx1-ubyte in dir, when there */
  test?: IdxPairSpec;
  validation?: number | IdxPairSpec;
  /** names of the classes, in label order (the count of classes is then their number) */
  classNames?: string[];
}

export interface CsvDataSpec extends DataCommon {
  dataset: 'csv';
  train: string;
  test?: string;
  validation?: number | string;
  task: DataTask;
  /** the first non-blank line names the columns */
  header: boolean;
  delimiter: string;
  /** classification: the label column (default: the last) */
  label?: ColumnRef;
  /** regression / multiLabel: the target column(s) (default: the last) */
  targets?: ColumnRef | ColumnRef[];
  /** feature columns (default: every column that is not the label or a target) */
  features?: ColumnRef[];
  classNames?: string[];
}

/** An .npz file (string) or separate .npy files for the features and the labels. */
export type NpyFilesSpec = string | { x: string; y: string };

export interface NpyDataSpec extends DataCommon {
  dataset: 'npy';
  train: NpyFilesSpec;
  test?: NpyFilesSpec;
  validation?: number | NpyFilesSpec;
  task: DataTask;
  /** the names of the arrays inside an .npz (default x and y) */
  arrays: { x: string; y: string };
  classNames?: string[];
}

export interface ImageFolderDataSpec extends DataCommon {
  dataset: 'imageFolder';
  /** a folder with one sub-folder of images (.png, .jpg) per class */
  train: string;
  test?: string;
  validation?: number | string;
  /** resize (bilinear) every image to model.input's H×W; false: an image of another size is an error */
  resize: boolean;
}

export interface MemoryDataSpec extends DataCommon {
  dataset: 'memory';
  /** a name given by memoryDataset(...) in this process */
  train: string;
  test?: string;
  validation?: number | string;
}

/**
 * A speech dataset directory (docs/speech.md): `dir` holds train.csv, test.csv and optionally
 * dev.csv (the validation set), DeepSpeech manifests of WAV files and transcripts.
 */
export interface SpeechDataSpec extends DataCommon {
  dataset: 'speech';
  /** dev.csv is the validation split; a fraction is not taken (the schema refuses it, as normalize and augment) */
  validation?: number;
  /** the acoustic features (DeepSpeech's 26 MFCC by default) and the context window */
  features?: Partial<FeatureOptions>;
  /** an alphabet file (DeepSpeech's alphabet.txt format), relative to dir; default: space, a–z, apostrophe */
  alphabet?: string;
  /** keep computed features in the feature cache (default true) */
  cache: boolean;
  /** the feature cache's folder (default $PARATRAIN_CACHE/speech-features or ~/.cache/paratrain/speech-features) */
  cacheDir?: string;
  /** global batches per length-sorting pool of the bucketed sampler (default 50) */
  poolBatches: number;
}

/** Where a text dataset's windows start: every `stride` characters, or at offsets drawn anew each epoch. */
export type TextWindows = 'sequential' | 'random';

/**
 * Character-level language modelling (docs/data.md#text): windows of model.input[0] characters of
 * a text, each labelled with the next character at every position.
 */
export interface TextDataSpec extends DataCommon {
  dataset: 'text';
  /** one UTF-8 text file; or */
  file?: string;
  /** every .txt file of this folder, in name order, concatenated */
  folder?: string;
  windows: TextWindows;
  /** characters between the starts of consecutive windows (default: the context length, model.input[0]) */
  stride?: number;
  /** the fraction of the text at its end held out for validation (default 0.1; 0: none) */
  validation: number;
}

/** Normalised dataset and batching description (defaults filled in). */
export type DataSpec =
  | FashionMnistDataSpec
  | IdxDataSpec
  | CsvDataSpec
  | NpyDataSpec
  | ImageFolderDataSpec
  | MemoryDataSpec
  | SpeechDataSpec
  | TextDataSpec;
