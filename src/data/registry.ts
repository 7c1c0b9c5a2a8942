/**
 * The dataset registry: one loader per `data.dataset` type, each giving its splits as read from
 * files (or memory; speech: data/speech.ts; text: data/textDataset.ts); prepare.ts then applies what every type shares (limits, the validation split,
 * checks, normalisation).
 */
import type { Dataset } from './dataset.ts';
import { FASHION_MNIST_CLASSES, loadFashionMnist } from './fashionMnist.ts';
import { idxPairOf, loadIdxPair } from './idxDataset.ts';
import { loadCsvFiles } from './csvDataset.ts';
import { readXY, xyToDataset } from './npyDataset.ts';
import { loadImageFolder } from './imageFolder.ts';
import { memoryDatasetNamed } from './memory.ts';
import { classesOfIntegerLabels } from './labels.ts';
import { resolveDataPath } from './files.ts';
import { prepareSplits, type LoadedData } from './prepare.ts';
import { loadSpeechSplits } from './speech.ts';
import { loadTextSplits } from './textDataset.ts';
import type { DataSpec, DatasetType, NpyFilesSpec } from './spec.ts';

export type { LoadedData, PreprocessInfo } from './prepare.ts';

/** What loading needs besides the data section. */
export interface LoadContext {
  /** model.input: image folders are brought to it; a text's windows are model.input[0] characters */
  inputShape: readonly number[];
  /** train.seed: the validation split's seed */
  seed: number;
  /** notes for people (where the data came from, fall-backs) */
  log?: (message: string) => void;
}

/** A type's splits as read; `validation` only when the config names one (a fraction is split later). */
export interface RawSplits {
  train: Dataset;
  validation?: Dataset;
  test?: Dataset;
  source: string;
}

type Loader<S extends DataSpec> = (spec: S, ctx: LoadContext) => Promise<RawSplits> | RawSplits;
type Loaders = { [K in DatasetType]: Loader<Extract<DataSpec, { dataset: K }>> };

/** A path the config names as a split, or undefined for a fraction / nothing. */
const named = <T>(v: number | T | undefined): T | undefined =>
  v === undefined || typeof v === 'number' ? undefined : v;

const counts = (s: RawSplits) =>
  [s.train, s.validation, s.test]
    .filter((d) => d)
    .map((d) => d!.count.toLocaleString('en-US'))
    .join(' / ');

/** Sets every split's class count to the one from all their integer labels (and names, when given). */
function integerClasses(splits: (Dataset | undefined)[], classNames?: string[]): void {
  const present = splits.filter(
    (d): d is Dataset => d !== undefined && (d.task ?? 'classification') === 'classification',
  );
  const classes = classesOfIntegerLabels(present, classNames);
  for (const ds of present) {
    ds.classes = classes;
    if (classNames) ds.classNames = [...classNames];
  }
}

const LOADERS: Loaders = {
  'fashion-mnist': async (spec, ctx) => {
    const data = await loadFashionMnist({ dir: spec.dir, log: ctx.log });
    for (const ds of [data.train, data.test])
      Object.assign(ds, { classNames: [...FASHION_MNIST_CLASSES], task: 'classification' });
    return data;
  },
  idx: (spec) => {
    const trainPair = idxPairOf(spec.train, 'train', spec.dir)!;
    const train = loadIdxPair(trainPair, 'data.train');
    const testPair = idxPairOf(spec.test, 'test', spec.dir);
    const test = testPair && loadIdxPair(testPair, 'data.test');
    const v = named(spec.validation);
    const validation =
      v &&
      loadIdxPair(
        { images: resolveDataPath(v.images, spec.dir), labels: resolveDataPath(v.labels, spec.dir) },
        'data.validation',
      );
    integerClasses([train, validation, test], spec.classNames);
    return { train, validation, test, source: `IDX ${trainPair.images}` };
  },
  csv: (spec) => {
    const path = (p: string | undefined) => (p === undefined ? undefined : resolveDataPath(p, spec.dir));
    const files = { train: path(spec.train)!, validation: path(named(spec.validation)), test: path(spec.test) };
    const { train, validation, test } = loadCsvFiles(files, spec);
    return { train: train!, validation, test, source: `CSV ${files.train}` };
  },
  npy: (spec) => {
    const resolve = (f: NpyFilesSpec): NpyFilesSpec =>
      typeof f === 'string'
        ? resolveDataPath(f, spec.dir)
        : { x: resolveDataPath(f.x, spec.dir), y: resolveDataPath(f.y, spec.dir) };
    const load = (f: NpyFilesSpec | undefined, field: string) =>
      f === undefined ? undefined : xyToDataset(readXY(resolve(f), spec.arrays, field), spec.task, spec.classNames);
    const train = load(spec.train, 'data.train')!;
    const validation = load(named(spec.validation), 'data.validation');
    const test = load(spec.test, 'data.test');
    if (spec.task === 'classification') integerClasses([train, validation, test], spec.classNames);
    return { train, validation, test, source: `NumPy ${train.name}` };
  },
  imageFolder: (spec, ctx) => {
    const shape = ctx.inputShape;
    if (shape.length !== 3) {
      throw new Error(
        `model.input: an image folder is loaded as images of model.input [H, W, C], but model.input is [${shape.join(', ')}]; write it as [height, width, channels] (channels 1 grey, 3 RGB, 4 RGBA) and flatten in the model`,
      );
    }
    const o = { shape: shape as [number, number, number], resize: spec.resize };
    const train = loadImageFolder(resolveDataPath(spec.train, spec.dir), 'data.train', o);
    const more = { ...o, classNames: train.classNames };
    const v = named(spec.validation);
    const validation =
      v === undefined ? undefined : loadImageFolder(resolveDataPath(v, spec.dir), 'data.validation', more);
    const test =
      spec.test === undefined ? undefined : loadImageFolder(resolveDataPath(spec.test, spec.dir), 'data.test', more);
    return { train, validation, test, source: `image folder ${train.name} (${train.classes} classes)` };
  },
  memory: (spec) => {
    const train = memoryDatasetNamed(spec.train, 'data.train');
    const v = named(spec.validation);
    const validation = v === undefined ? undefined : memoryDatasetNamed(v, 'data.validation');
    const test = spec.test === undefined ? undefined : memoryDatasetNamed(spec.test, 'data.test');
    // the class count of integer labels spans every split
    if ((train.task ?? 'classification') === 'classification')
      integerClasses([train, validation, test], train.classNames);
    return { train, validation, test, source: train.name };
  },
  // utterances of WAV files with transcripts (docs/speech.md): dev.csv is the validation split
  speech: (spec, ctx) => loadSpeechSplits(spec, ctx.log),
  // windows of model.input[0] characters; the validation split is the text's end (docs/data.md#text)
  text: (spec, ctx) => loadTextSplits(spec, ctx.inputShape),
};

/**
 * Loads the configured dataset: its splits (a validation fraction held out of training, seeded),
 * limited, checked and normalised as the config asks. Errors name the file, line or record.
 */
export async function loadDataset(spec: DataSpec, ctx: LoadContext): Promise<LoadedData> {
  const loader = LOADERS[spec.dataset] as Loader<DataSpec> | undefined;
  if (!loader) throw new Error(`data.dataset: unknown dataset type ${JSON.stringify(spec.dataset)}`);
  const raw = await loader(spec, ctx);
  const source =
    spec.dataset === 'fashion-mnist' || spec.dataset === 'speech' ? raw.source : `${raw.source} (${counts(raw)})`;
  return prepareSplits({ ...raw, source }, spec, ctx.seed);
}
