/**
 * What every dataset type shares after reading: limits, the validation split, checks that the splits
 * agree (shape, task, targets) and hold finite numbers, normalisation and the augmentation's fit.
 */
import { limitDataset, sampleSize, taskOf, type Dataset } from './dataset.ts';
import { splitValidation } from './split.ts';
import { applyNormalization, resolveNormalization, type Normalization } from './normalize.ts';
import { checkAugment } from './augment.ts';
import type { DataSpec } from './spec.ts';

/** How the samples were transformed when loading (predict applies the same). */
export interface PreprocessInfo {
  normalization?: Normalization;
}

/** The splits a run uses. */
export interface LoadedData {
  train: Dataset;
  /** evaluated during training when present (held out of the training file, or a file of its own) */
  validation?: Dataset;
  /** evaluated at the end (and by `paratrain eval`) */
  test?: Dataset;
  /** human description of where the data came from */
  source: string;
  preprocess?: PreprocessInfo;
}

/** Every split agrees with the training set on what a sample and its label are. */
function checkAgree(train: Dataset, other: Dataset): void {
  const same = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((d, i) => d === b[i]);
  if (!same(train.sampleShape, other.sampleShape)) {
    throw new Error(
      `${other.name} holds samples of ${other.sampleShape.join('×')} values, but the training set ${train.name} holds ${train.sampleShape.join('×')}; every split needs the same columns / image size`,
    );
  }
  if (taskOf(train) !== taskOf(other) || (train.targetSize ?? 0) !== (other.targetSize ?? 0)) {
    throw new Error(
      `${other.name} has ${other.targetSize ?? 0} targets per sample (${taskOf(other)}), the training set ${train.name} ${train.targetSize ?? 0} (${taskOf(train)}); every split needs the same label columns`,
    );
  }
}

/** Features and targets are finite numbers; a NaN would only show up as a NaN loss steps later. */
function checkFinite(ds: Dataset): void {
  const size = sampleSize(ds);
  for (let i = 0; i < ds.images.length; i++) {
    if (!Number.isFinite(ds.images[i]!)) {
      throw new Error(
        `${ds.name}: sample ${Math.floor(i / size)} holds ${ds.images[i]} at position ${i % size}; features must be finite numbers (fill or drop missing values)`,
      );
    }
  }
  const t = ds.targetSize ?? 1;
  if (ds.targets) {
    for (let i = 0; i < ds.targets.length; i++) {
      if (!Number.isFinite(ds.targets[i]!))
        throw new Error(
          `${ds.name}: sample ${Math.floor(i / t)} has target ${ds.targets[i]}; targets must be finite numbers`,
        );
    }
  }
}

/** Limits, splits, checks and normalises the splits of `raw` as `spec` asks. */
export function prepareSplits(
  raw: { train: Dataset; validation?: Dataset; test?: Dataset; source: string },
  spec: DataSpec,
  seed: number,
): LoadedData {
  let train = spec.trainLimit ? limitDataset(raw.train, spec.trainLimit) : raw.train;
  let validation = raw.validation;
  let source = raw.source;
  const test = raw.test && spec.testLimit ? limitDataset(raw.test, spec.testLimit) : raw.test;
  // a text's validation split is its end, cut when it is read (textDataset.ts)
  if (spec.dataset !== 'text' && typeof spec.validation === 'number') {
    ({ train, validation } = splitValidation(train, spec.validation, seed));
    source += `; ${validation.count.toLocaleString('en-US')} of its training samples held out for validation`;
  }
  for (const ds of [validation, test]) if (ds) checkAgree(train, ds);
  for (const ds of [train, validation, test]) if (ds) checkFinite(ds);
  checkAugment(spec.augment, train.sampleShape);
  const out: LoadedData = { train, source };
  if (validation) out.validation = validation;
  if (test) out.test = test;
  if (spec.normalize) {
    // from the training split only: validation and test samples must not leak into it
    const norm = resolveNormalization(spec.normalize, train);
    // a limited or unsplit set is a view of the loader's arrays; normalise a copy of those alone
    for (const ds of [train, validation, test]) {
      if (!ds) continue;
      if (ds.images.byteOffset !== 0 || ds.images.length !== ds.images.buffer.byteLength / 4)
        ds.images = ds.images.slice();
      applyNormalization(ds, norm);
    }
    out.preprocess = { normalization: norm };
  }
  return out;
}
