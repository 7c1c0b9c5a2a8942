/**
 * What a model checkpoint says about itself, beyond its weights: the config it was trained with
 * (metadata `config`, the RunConfig as JSON) and what the data was (metadata `paratrain.data`,
 * JSON `{ task, classNames?, inputShape, normalization?: { mean, std }, columns? }`, written where
 * the data is loaded). Predict and eval read both; a checkpoint without `paratrain.data` (older runs) means
 * classification, no normalisation, classes named by their index (Fashion-MNIST's own names for
 * that dataset).
 */
import type { RunConfig } from '../../config/runConfig.ts';
import { resolveConfig } from '../../config/inCode.ts';
import { ConfigError } from '../../config/errors.ts';
import { FASHION_MNIST_CLASSES } from '../../data/fashionMnist.ts';
import { formatShape, shapeSize, shapesEqual } from '../../tensor/shape.ts';
import type { CsvColumnNames } from '../../data/csvColumns.ts';

import { DATA_METADATA_KEY } from '../../data/metadata.ts';

export { DATA_METADATA_KEY };

/** What a model predicts: one class, values, or a set of labels. */
export type Task = 'classification' | 'regression' | 'multiLabel';
const TASKS: readonly Task[] = ['classification', 'regression', 'multiLabel'];

/** The data a checkpoint was trained on, as predict needs it. */
export interface DataInfo {
  task: Task;
  /** a name per class (classification) or label (multi-label); absent: the index names it */
  classNames?: string[];
  /** one sample's shape, the model's input ([H, W, C] or [features]) */
  inputShape: number[];
  /** per channel (the last axis; one value: every channel): the model saw (x − mean) / std */
  normalization?: { mean: number[]; std: number[] };
  /** a CSV run's columns by header name (absent: CSV inputs are read by position) */
  columns?: CsvColumnNames;
}

/** The config stored in a checkpoint's metadata, validated like a config file. */
export function configOfCheckpoint(path: string, metadata: Record<string, string>): RunConfig {
  const text = metadata['config'];
  if (text === undefined) {
    throw new Error(
      `checkpoint ${path} holds no config (metadata 'config'); give the config it was trained with (paratrain eval CONFIG --checkpoint ${path})`,
    );
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new Error(
      `checkpoint ${path}: its metadata 'config' is not JSON (${(e as Error).message}); give the config it was trained with`,
    );
  }
  try {
    return resolveConfig(raw as RunConfig, `checkpoint ${path} (its stored config)`);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    throw new ConfigError([
      ...e.issues,
      `the config stored in ${path} does not validate with this paratrain; give the config it was trained with`,
    ]);
  }
}

/** The task a config's loss implies, for checkpoints without `paratrain.data`. */
function taskOfLoss(loss: string): Task {
  if (loss === 'meanSquaredError') return 'regression';
  if (loss === 'binaryCrossEntropy') return 'multiLabel';
  return 'classification';
}

/**
 * The checkpoint's data description, checked against the model (`inputShape`, `outputs` scores per
 * sample); errors name the checkpoint and the metadata field.
 */
export function dataInfoOf(
  path: string,
  metadata: Record<string, string>,
  config: RunConfig,
  outputs: number,
): DataInfo {
  const text = metadata[DATA_METADATA_KEY];
  const inputShape = [...config.model.input];
  if (text === undefined) {
    const fashion = config.data.dataset === 'fashion-mnist' && outputs === FASHION_MNIST_CLASSES.length;
    return {
      task: taskOfLoss(config.loss.type),
      inputShape,
      ...(fashion ? { classNames: [...FASHION_MNIST_CLASSES] } : {}),
    };
  }
  const bad = (what: string) => new Error(`checkpoint ${path}: metadata '${DATA_METADATA_KEY}' ${what}`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw bad(`is not JSON (${(e as Error).message})`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw bad('is not a JSON object');
  const o = raw as Record<string, unknown>;
  const task = o.task ?? 'classification';
  if (!TASKS.includes(task as Task)) throw bad(`has task ${JSON.stringify(task)}; expected one of ${TASKS.join(', ')}`);
  const info: DataInfo = { task: task as Task, inputShape };
  if (o.inputShape !== undefined) {
    if (!isNumbers(o.inputShape) || !shapesEqual(o.inputShape, inputShape)) {
      throw bad(
        `says the input is ${Array.isArray(o.inputShape) ? formatShape(o.inputShape as number[]) : JSON.stringify(o.inputShape)} but the model takes ${formatShape(inputShape)}`,
      );
    }
  }
  if (o.classNames !== undefined) {
    if (!Array.isArray(o.classNames) || !o.classNames.every((n) => typeof n === 'string'))
      throw bad('has classNames that are not a list of strings');
    if (info.task !== 'regression' && o.classNames.length !== outputs) {
      throw bad(`names ${o.classNames.length} classes but the model produces ${outputs} scores per sample`);
    }
    info.classNames = [...o.classNames];
  }
  if (o.normalization !== undefined) {
    const n = o.normalization as { mean?: unknown; std?: unknown } | null;
    if (!n || !isNumbers(n.mean) || !isNumbers(n.std) || n.mean.length !== n.std.length || n.mean.length === 0) {
      throw bad('has a normalization that is not { mean: [...], std: [...] } of equal, non-zero lengths');
    }
    const channels = inputShape[inputShape.length - 1]!;
    if (n.mean.length !== 1 && n.mean.length !== channels) {
      throw bad(
        `has a normalization of ${n.mean.length} channels but the input ${formatShape(inputShape)} has ${channels}`,
      );
    }
    if (n.std.some((s) => !(s > 0))) throw bad('has a normalization std that is not positive');
    info.normalization = { mean: [...n.mean], std: [...n.std] };
  }
  if (o.columns !== undefined) info.columns = columnsOf(o.columns, shapeSize(inputShape), bad);
  return info;
}

/** The recorded CSV columns, checked: feature names, one per input value, and optional label, targets, unused. */
function columnsOf(v: unknown, inputs: number, bad: (what: string) => Error): CsvColumnNames {
  const c = v as Partial<Record<keyof CsvColumnNames, unknown>> | null;
  const names = (x: unknown) => Array.isArray(x) && x.every((n) => typeof n === 'string');
  if (
    !c ||
    typeof c !== 'object' ||
    !names(c.features) ||
    (c.label !== undefined && typeof c.label !== 'string') ||
    (c.targets !== undefined && !names(c.targets)) ||
    (c.unused !== undefined && !names(c.unused))
  )
    throw bad('has columns that are not { features: [names], label?: name, targets?: [names], unused?: [names] }');
  const columns = structuredClone(c) as CsvColumnNames;
  if (columns.features.length !== inputs)
    throw bad(`names ${columns.features.length} feature columns but the model takes ${inputs} values per sample`);
  return columns;
}

function isNumbers(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'number' && Number.isFinite(x));
}
