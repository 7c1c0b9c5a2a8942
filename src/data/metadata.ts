/**
 * What a checkpoint records about its data, so predict and eval can treat new samples as training
 * did: checkpoint metadata key `paratrain.data`, JSON
 * `{ task, classNames?, inputShape, normalization?: { mean, std }, speech?: { alphabet, features },
 * columns?: { features, label?, targets?, unused? } }`.
 */
import { taskOf, type Dataset } from './dataset.ts';
import type { DatasetTask } from './spec.ts';
import type { FeatureOptions } from '../speech/featureOptions.ts';
import type { CsvColumnNames } from './csvColumns.ts';

/** The checkpoint metadata key. */
export const DATA_METADATA_KEY = 'paratrain.data';

/** The value stored under `paratrain.data`. */
export interface DataMetadata {
  task: DatasetTask;
  /** class (or target) names in index order, when the data has them */
  classNames?: string[];
  /** the per-sample shape of the training data */
  inputShape: number[];
  /** applied to the samples when loading: x' = (x − mean[c]) / std[c] per channel c (the last axis) */
  normalization?: { mean: number[]; std: number[] };
  /** a speech model's alphabet (symbol k is output k + 1, output 0 the CTC blank) and acoustic features */
  speech?: { alphabet: string[]; features: FeatureOptions };
  /** a CSV run's columns by header name; absent (no header, or older checkpoints): columns by position */
  columns?: CsvColumnNames;
}

/** The metadata entries to write into a model checkpoint trained on `loaded.train`. */
export function dataMetadata(loaded: { train: Dataset }): Record<string, string> {
  const ds = loaded.train;
  const meta: DataMetadata = { task: taskOf(ds), inputShape: [...ds.sampleShape] };
  if (ds.classNames) meta.classNames = [...ds.classNames];
  if (ds.normalization) meta.normalization = { mean: [...ds.normalization.mean], std: [...ds.normalization.std] };
  if (ds.columns) meta.columns = structuredClone(ds.columns);
  if (ds.speech) meta.speech = { alphabet: [...ds.speech.alphabet.symbols], features: { ...ds.speech.featureOptions } };
  return { [DATA_METADATA_KEY]: JSON.stringify(meta) };
}

/** The data metadata of a checkpoint, or undefined when it has none (written before it existed). */
export function readDataMetadata(metadata: Record<string, string>, file = 'checkpoint'): DataMetadata | undefined {
  const text = metadata[DATA_METADATA_KEY];
  if (text === undefined) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(
      `${file}: metadata ${DATA_METADATA_KEY} is not JSON (${(e as Error).message}); the checkpoint is damaged`,
    );
  }
  const m = v as DataMetadata;
  if (!m || typeof m !== 'object' || typeof m.task !== 'string' || !Array.isArray(m.inputShape)) {
    throw new Error(`${file}: metadata ${DATA_METADATA_KEY} lacks task or inputShape; the checkpoint is damaged`);
  }
  return m;
}
