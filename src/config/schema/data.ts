/**
 * The `data:` section: which dataset (`data.dataset` picks one of the registry's types, each a strict
 * map of its own options plus the shared ones), where, and how it is batched, split, normalised and
 * augmented; normalised into `DataSpec` (which is also valid YAML input).
 */
import { z } from 'zod';
import type {
  AugmentSpec,
  ColumnRef,
  CsvDataSpec,
  DataSpec,
  DatasetType,
  FashionMnistDataSpec,
  IdxDataSpec,
  IdxPairSpec,
  ImageFolderDataSpec,
  MemoryDataSpec,
  NormalizeSpec,
  NpyDataSpec,
  NpyFilesSpec,
  SpeechDataSpec,
  TextDataSpec,
} from '../../data/spec.ts';
import { resolveFeatureOptions, type FeatureOptions } from '../../speech/featureOptions.ts';
import { DATASET_TYPES } from '../../data/spec.ts';
import { didYouMean, type IssueParams } from '../errors.ts';
import { bool, field, isInt, isNum, nonNegInt, oneOf, openUnit, posInt, str, strict, unitRange } from './fields.ts';

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const hasKeys = (v: Record<string, unknown>, keys: string[]) =>
  Object.keys(v).length === keys.length && keys.every((k) => k in v);
const isPath = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
const isPair = (v: unknown) => isObj(v) && hasKeys(v, ['images', 'labels']) && isPath(v.images) && isPath(v.labels);
const isXY = (v: unknown) => isObj(v) && hasKeys(v, ['x', 'y']) && isPath(v.x) && isPath(v.y);
const isFraction = (v: unknown) => isNum(v) && v > 0 && v < 1;
const numOrList = (v: unknown, ok: (x: number) => boolean) =>
  (isNum(v) && ok(v)) || (Array.isArray(v) && v.length > 0 && v.every((x) => isNum(x) && ok(x)));

const FRACTION = 'a fraction of the training set to hold out (0 < v < 1, e.g. 0.1)';
const idxPair = () => field<IdxPairSpec>(isPair, 'expected { images: FILE, labels: FILE } (IDX files, raw or .gz)');
const npyFiles = () =>
  field<NpyFilesSpec>((v) => isPath(v) || isXY(v), 'expected an .npz file or { x: FEATURES.npy, y: LABELS.npy }');
const column = () =>
  field<ColumnRef>((v) => isPath(v) || isInt(v), 'expected a column name or a 0-based column index (-1: the last)');
const classNames = () =>
  field<string[]>(
    (v) => Array.isArray(v) && v.length > 0 && v.every(isPath) && new Set(v).size === v.length,
    'expected a list of distinct class names, in label order',
  );
const task = () => oneOf(['classification', 'regression', 'multiLabel'] as const).default('classification');

const normalize = () =>
  field<NormalizeSpec>(
    (v) =>
      v === 'computed' ||
      (isObj(v) && hasKeys(v, ['mean', 'std']) && numOrList(v.mean, () => true) && numOrList(v.std, (x) => x > 0)),
    'expected computed (from the training split) or { mean: number or [one per channel], std: positive number or [one per channel] }',
  );
const augment = () =>
  strict(
    { flip: bool().optional(), crop: nonNegInt().optional(), shift: nonNegInt().optional() },
    'option',
    'augment',
    '{ flip: true, crop: 4 }',
  );

/** Options every dataset type takes. */
const common = {
  dataset: z.string().optional(),
  dir: str('a directory path').optional(),
  batchSize: posInt().default(64),
  batchSizeScope: oneOf(['perDevice', 'global'] as const).default('perDevice'),
  shuffle: bool().default(true),
  trainLimit: posInt().optional(),
  testLimit: posInt().optional(),
  normalize: normalize().optional(),
  augment: augment().optional(),
};

/** Speech features: a map of FeatureOptions, each checked as loading checks it (docs/speech.md). */
const features = () =>
  field<Partial<FeatureOptions>>(
    isObj,
    'expected a map of feature options such as { type: mfcc, coefficients: 26, context: 9 }',
  ).superRefine((v, ctx) => {
    try {
      resolveFeatureOptions(v, 'features');
    } catch (e) {
      // 'features.coefficients: must be …, got 50' → the field's path and the rest
      const m = /^features\.([A-Za-z]+): (.*)$/s.exec((e as Error).message);
      ctx.addIssue({
        code: 'custom',
        path: m ? [m[1]!] : [],
        message: m ? m[2]! : (e as Error).message,
        params: { noGot: true } satisfies IssueParams,
      });
    }
  });

const { normalize: _normalize, augment: _augment, ...speechCommon } = common;
// a text has no test split: its windows are token ids, not features to normalise or images to augment
const { testLimit: _testLimit, ...textCommon } = speechCommon;

/** A text dataset: one file or a folder of .txt files, and how it is cut into windows. */
const textVariant = () =>
  strict({
    ...textCommon,
    file: str('a UTF-8 text file').optional(),
    folder: str('a folder of .txt files').optional(),
    windows: oneOf(['sequential', 'random'] as const).default('sequential'),
    stride: posInt().optional(),
    validation: unitRange().default(0.1),
  }).superRefine((o, ctx) => {
    if ((o.file === undefined) === (o.folder === undefined))
      ctx.addIssue({
        code: 'custom',
        path: [],
        params: { noGot: true } satisfies IssueParams,
        message: 'name the text: either file (one UTF-8 file) or folder (its .txt files, in name order), not both',
      });
  });

const VARIANTS: Record<DatasetType, z.ZodType> = {
  'fashion-mnist': strict({ ...common, validation: openUnit().optional() }),
  idx: strict({
    ...common,
    train: idxPair().optional(),
    test: idxPair().optional(),
    classNames: classNames().optional(),
    validation: field<number | IdxPairSpec>(
      (v) => isFraction(v) || isPair(v),
      `expected ${FRACTION} or { images: FILE, labels: FILE }`,
    ).optional(),
  }),
  csv: strict({
    ...common,
    train: str('a CSV file path'),
    test: str('a CSV file path').optional(),
    validation: field<number | string>(
      (v) => isFraction(v) || isPath(v),
      `expected ${FRACTION} or a CSV file path`,
    ).optional(),
    task: task(),
    header: bool().default(true),
    delimiter: field<string>(
      (v) => typeof v === 'string' && v.length === 1 && v !== '"' && v !== '\n' && v !== '\r',
      'expected one character, e.g. "," or ";" or "\\t"',
    ).default(','),
    label: column().optional(),
    targets: field<ColumnRef | ColumnRef[]>(
      (v) => isPath(v) || isInt(v) || (Array.isArray(v) && v.length > 0 && v.every((x) => isPath(x) || isInt(x))),
      'expected a column (name or 0-based index) or a list of them',
    ).optional(),
    features: field<ColumnRef[]>(
      (v) => Array.isArray(v) && v.length > 0 && v.every((x) => isPath(x) || isInt(x)),
      'expected a list of columns (names or 0-based indices)',
    ).optional(),
    classNames: classNames().optional(),
  }).superRefine((o, ctx) => {
    if (o.task === 'classification' && o.targets !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['targets'],
        params: { noGot: true } satisfies IssueParams,
        message:
          'targets are for task: regression or multiLabel; a classification CSV names its class column in data.label',
      });
    }
    if (o.task !== 'classification' && o.label !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['label'],
        params: { noGot: true } satisfies IssueParams,
        message: `label is for task: classification; a ${o.task} CSV names its target column(s) in data.targets`,
      });
    }
  }),
  npy: strict({
    ...common,
    train: npyFiles(),
    test: npyFiles().optional(),
    validation: field<number | NpyFilesSpec>(
      (v) => isFraction(v) || isPath(v) || isXY(v),
      `expected ${FRACTION}, an .npz file or { x: FILE, y: FILE }`,
    ).optional(),
    task: task(),
    classNames: classNames().optional(),
    arrays: strict(
      { x: str('an array name').default('x'), y: str('an array name').default('y') },
      'key',
      'arrays',
      '{ x: features, y: labels }',
    ).default({ x: 'x', y: 'y' }),
  }),
  imageFolder: strict({
    ...common,
    train: str('a folder of class folders'),
    test: str('a folder of class folders').optional(),
    validation: field<number | string>(
      (v) => isFraction(v) || isPath(v),
      `expected ${FRACTION} or a folder of class folders`,
    ).optional(),
    resize: bool().default(false),
  }),
  speech: strict({
    ...speechCommon,
    features: features().optional(),
    alphabet: str('an alphabet file (one symbol per line)').optional(),
    cache: bool().default(true),
    cacheDir: str('a directory path').optional(),
    poolBatches: posInt().default(50),
  }),
  text: textVariant(),
  memory: strict({
    ...common,
    train: str('the name given to memoryDataset()'),
    test: str('the name given to memoryDataset()').optional(),
    validation: field<number | string>(
      (v) => isFraction(v) || isPath(v),
      `expected ${FRACTION} or the name given to memoryDataset()`,
    ).optional(),
  }),
};

/** The section without keys left undefined, so the normalised form equals what parsing it again gives. */
function clean(o: Record<string, unknown>, dataset: DatasetType): DataSpec {
  const out: Record<string, unknown> = { dataset };
  for (const [k, v] of Object.entries(o)) if (v !== undefined && k !== 'dataset') out[k] = v;
  return out as unknown as DataSpec;
}

type Defaults = 'batchSize' | 'batchSizeScope' | 'shuffle';
type Input<S, D extends keyof S = never> = Omit<S, Defaults | D> & Partial<Pick<S, Extract<Defaults | D, keyof S>>>;

/** The YAML form of the data section (what a user writes; defaults may be left out). */
export type DataInput =
  | Input<Omit<FashionMnistDataSpec, 'dataset'> & { dataset?: 'fashion-mnist' }>
  | Input<IdxDataSpec>
  | Input<CsvDataSpec, 'task' | 'header' | 'delimiter'>
  | Input<NpyDataSpec, 'task' | 'arrays'>
  | Input<ImageFolderDataSpec, 'resize'>
  | Input<MemoryDataSpec>
  | Input<SpeechDataSpec, 'cache' | 'poolBatches'>
  | Input<TextDataSpec, 'windows' | 'validation'>;

export type { AugmentSpec };

export const dataSchema = z
  .unknown()
  .optional()
  .transform((v, ctx): DataSpec => {
    const input = v === undefined ? {} : v;
    if (!isObj(input)) {
      ctx.addIssue({ code: 'custom', message: 'expected a map of options such as { dataset: csv, train: data.csv }' });
      return z.NEVER;
    }
    const name = input.dataset ?? 'fashion-mnist';
    if (typeof name !== 'string' || !(DATASET_TYPES as readonly string[]).includes(name)) {
      const hint = typeof name === 'string' ? didYouMean(name, DATASET_TYPES) : '';
      ctx.addIssue({
        code: 'custom',
        path: ['dataset'],
        message: `expected one of ${DATASET_TYPES.join(', ')}`,
        params: { hint } satisfies IssueParams,
      });
      return z.NEVER;
    }
    const r = VARIANTS[name as DatasetType].safeParse(input);
    if (!r.success) {
      for (const iss of r.error.issues) ctx.addIssue(iss as z.core.$ZodRawIssue);
      return z.NEVER;
    }
    return clean(r.data as Record<string, unknown>, name as DatasetType);
  }) as unknown as z.ZodType<DataSpec, DataInput | undefined>;
