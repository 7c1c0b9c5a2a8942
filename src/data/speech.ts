/**
 * The `speech` type of the dataset registry: a directory of DeepSpeech manifests (train.csv,
 * test.csv, dev.csv as the validation set) loaded by src/speech/speechData.ts, each split wrapped
 * as a Dataset of task `transcription` whose utterances are in `speech` (variable-length samples
 * [frames, F·(2C + 1)], labels as sequences over the alphabet; `images`/`labels` stay empty).
 */
import { VARIABLE } from '../tensor/shape.ts';
import { loadSpeechData } from '../speech/speechData.ts';
import { speechInputSize, type SpeechDataset } from '../speech/speechDataset.ts';
import { outputCount } from '../speech/alphabet.ts';
import { join } from 'node:path';
import { resolveDataPath } from './files.ts';
import type { Dataset } from './dataset.ts';
import type { SpeechDataSpec } from './spec.ts';

/** A loaded speech split as a Dataset (no copy: the utterances stay in `speech`). */
export function speechAsDataset(ds: SpeechDataset, name = ds.name): Dataset {
  return {
    name,
    images: new Float32Array(0),
    labels: new Int32Array(0),
    count: ds.count,
    sampleShape: [VARIABLE, speechInputSize(ds)],
    classes: outputCount(ds.alphabet),
    classNames: [...ds.alphabet.symbols],
    task: 'transcription',
    speech: ds,
  };
}

/** The speech dataset of a Dataset, or an error naming what needs one (a CTC loss on image data). */
export function speechOf(ds: Dataset, what: string): SpeechDataset {
  if (!ds.speech)
    throw new Error(`${what}: ${ds.name} is not a speech dataset; use data: { dataset: speech, dir: DIR }`);
  return ds.speech;
}

/** Reads `spec.dir`'s manifests (features from the cache, or computed on every core), each split as a Dataset. */
export async function loadSpeechSplits(
  spec: SpeechDataSpec,
  log?: (m: string) => void,
): Promise<{ train: Dataset; validation?: Dataset; test: Dataset; source: string }> {
  if (spec.dir === undefined) {
    throw new Error(
      'data.dir: a speech dataset needs its directory (train.csv, test.csv, optionally dev.csv); set data.dir or pass --data DIR',
    );
  }
  const loaded = await loadSpeechData(spec.dir, {
    features: spec.features,
    alphabet: spec.alphabet === undefined ? undefined : resolveDataPath(spec.alphabet, spec.dir),
    cache: spec.cache,
    cacheDir: spec.cacheDir,
    log,
  });
  // names that say which manifest, as the messages about its lines do
  const named = (ds: SpeechDataset, file: string) => speechAsDataset(ds, join(spec.dir!, file));
  return {
    train: named(loaded.train, 'train.csv'),
    test: named(loaded.test, 'test.csv'),
    ...(loaded.validation ? { validation: named(loaded.validation, 'dev.csv') } : {}),
    source: loaded.source,
  };
}
