/**
 * What a checkpoint records about its data, so predict and eval can treat new samples as training
 * did: checkpoint metadata key `paratrain.data`, JSON
 * `{ task, classNames?, inputShape, normalization?: { mean, std }, speech?: { alphabet, features },
 * columns?: { features, label?, targets?, unused? }, text?: { vocabulary, fingerprint } }`.
 */
import { taskOf, type Dataset } from './dataset.ts';
import type { DatasetTask } from './spec.ts';
import type { FeatureOptions } from '../speech/featureOptions.ts';
import type { CsvColumnNames } from './csvColumns.ts';
import { describeChar, Vocabulary } from './vocabulary.ts';

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
  /** a text model's vocabulary (token id k is vocabulary[k]) and its training text's fingerprint */
  text?: { vocabulary: string[]; fingerprint: string };
}

/** The metadata entries to write into a model checkpoint trained on `loaded.train`. */
export function dataMetadata(loaded: { train: Dataset }): Record<string, string> {
  const ds = loaded.train;
  const meta: DataMetadata = { task: taskOf(ds), inputShape: [...ds.sampleShape] };
  if (ds.classNames) meta.classNames = [...ds.classNames];
  if (ds.normalization) meta.normalization = { mean: [...ds.normalization.mean], std: [...ds.normalization.std] };
  if (ds.columns) meta.columns = structuredClone(ds.columns);
  if (ds.speech) meta.speech = { alphabet: [...ds.speech.alphabet.symbols], features: { ...ds.speech.featureOptions } };
  if (ds.text) meta.text = { vocabulary: [...ds.text.vocabulary], fingerprint: ds.text.fingerprint };
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

/**
 * The vocabulary a text model was trained with (its `paratrain.data` text entry), checked; undefined
 * when the checkpoint records none (not a text model).
 */
export function textVocabularyOf(meta: DataMetadata | undefined, file: string): Vocabulary | undefined {
  const text = meta?.text;
  if (text === undefined) return undefined;
  if (!Array.isArray(text.vocabulary) || !text.vocabulary.every((s) => typeof s === 'string'))
    throw new Error(`${file}: metadata ${DATA_METADATA_KEY} has a text vocabulary that is not a list of characters`);
  try {
    return new Vocabulary(text.vocabulary);
  } catch (e) {
    throw new Error(`${file}: metadata ${DATA_METADATA_KEY}: ${(e as Error).message}; the checkpoint is damaged`);
  }
}

/**
 * A resumed run's text must give its characters the ids the run trained with: the vocabulary of
 * `train` equals the one `saved` (a checkpoint's metadata, read from `file`) records. A different
 * text with the same vocabulary goes on, with a line to `log`.
 */
export function checkResumedText(
  saved: Record<string, string>,
  train: Dataset,
  file: string,
  log?: (m: string) => void,
): void {
  if (!train.text) return;
  const meta = readDataMetadata(saved, file);
  const before = textVocabularyOf(meta, file);
  if (!before) return;
  const now = train.text.vocabulary;
  if (!before.equals(now)) {
    const gone = before.symbols.filter((c) => !now.includes(c)),
      added = now.filter((c) => !before.symbols.includes(c));
    const list = (cs: readonly string[]) => cs.slice(0, 5).map(describeChar).join(', ') + (cs.length > 5 ? ', …' : '');
    const diff = [
      ...(added.length ? [`${added.length} new (${list(added)})`] : []),
      ...(gone.length ? [`${gone.length} missing (${list(gone)})`] : []),
    ].join(', ');
    throw new Error(
      `--resume: the training text's vocabulary (${now.length} characters) differs from the run's (${before.size}, recorded in ${file})${diff ? `: ${diff}` : ', in order'}; ` +
        'token ids would mean other characters. Resume on the text the run trained on, or start a new run',
    );
  }
  if (meta?.text?.fingerprint !== undefined && meta.text.fingerprint !== train.text.fingerprint)
    log?.(
      `resume: the training text differs from the run's (${train.text.fingerprint}, was ${meta.text.fingerprint}); its vocabulary is the same, so training goes on`,
    );
}
