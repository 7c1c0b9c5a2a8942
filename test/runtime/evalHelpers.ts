/** Shared by the evaluation, best-checkpoint and early-stopping tests: a tiny run on a validation split cut from the training set. */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.ts';
import {
  loadData,
  trainOnData,
  type LoadedData,
  type TrainOptions,
  type TrainResult,
} from '../../src/runtime/run/train.ts';
import { sampleSize, type Dataset } from '../../src/data/dataset.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { SUBSET } from '../cli/helpers.ts';

/** Samples [from, to) of a dataset: views into the same memory. */
export function sliceDataset(ds: Dataset, from: number, to: number): Dataset {
  const n = sampleSize(ds);
  return {
    ...ds,
    name: `${ds.name}[${from}:${to}]`,
    images: ds.images.subarray(from * n, to * n),
    labels: ds.labels.subarray(from, to),
    count: to - from,
  };
}

/**
 * A small MLP on 192 training samples of the shipped subset (12 steps an epoch at batch 16 on one
 * device), 64 more held out as the validation split, 100 test samples, 3 epochs; `train` adds train fields,
 * `optimizer` replaces Adam 0.01.
 */
export function evalConfig(dir: string, o: { train?: string; optimizer?: string } = {}): RunConfig {
  const path = join(dir, 'eval.yaml');
  writeFileSync(
    path,
    `model:
  input: [28, 28, 1]
  layers:
    - flatten: {}
    - dense: { units: 16, activation: relu }
    - dense: { units: 10 }
optimizer: ${o.optimizer ?? '{ adam: { lr: 0.01 } }'}
data: { dir: ${JSON.stringify(SUBSET)}, batchSize: 16, trainLimit: 256, testLimit: 100 }
train: { ${/\bepochs:/.test(o.train ?? '') ? '' : 'epochs: 3, '}seed: 7, backend: js${o.train ? `, ${o.train}` : ''} }
`,
  );
  return loadConfig(path);
}

/** The config's data with the last 64 of its 256 training samples held out as the validation split (none: `validation: false`). */
export async function splitData(config: RunConfig, validation = true): Promise<LoadedData> {
  const data = await loadData(config);
  if (!validation) return { ...data, train: sliceDataset(data.train, 0, 192) };
  return { ...data, train: sliceDataset(data.train, 0, 192), validation: sliceDataset(data.train, 192, 256) };
}

/** Trains `config` on the split data. */
export async function trainSplit(config: RunConfig, options: TrainOptions, validation = true): Promise<TrainResult> {
  return trainOnData(config, await splitData(config, validation), options);
}

/** The events of a run directory's metrics.jsonl. */
export function eventsOf(runDir: string): Record<string, unknown>[] {
  return readFileSync(join(runDir, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

export const ofType = (events: Record<string, unknown>[], type: string) => events.filter((e) => e.type === type);
