/**
 * Holding out a validation set: a seeded, deterministic choice of round(fraction × N) samples of the
 * training set (Philox keyed by the run's seed), the rest stays for training; both keep file order.
 */
import { CounterRng } from '../tensor/rng.ts';
import { subsetDataset, type Dataset } from './dataset.ts';

/** Salt separating the split's stream from the other streams keyed by the same seed. */
const SPLIT_STREAM = 0x5b17;

/** The indices of the validation part and of the training part, each ascending. */
export function validationIndices(
  count: number,
  fraction: number,
  seed: number,
): { validation: Int32Array; train: Int32Array } {
  const n = Math.round(count * fraction);
  if (n < 1)
    throw new Error(
      `data.validation: ${fraction} of ${count} training samples is no sample; use a larger fraction (at least ${(1 / count).toPrecision(2)})`,
    );
  if (n >= count)
    throw new Error(
      `data.validation: ${fraction} of ${count} training samples leaves none to train on; use a smaller fraction`,
    );
  const order = new Int32Array(count);
  for (let i = 0; i < count; i++) order[i] = i;
  new CounterRng(seed, SPLIT_STREAM).shuffle(order);
  return { validation: order.slice(0, n).sort(), train: order.slice(n).sort() };
}

/** Splits `ds` into a training part and a validation part of `fraction` of its samples. */
export function splitValidation(ds: Dataset, fraction: number, seed: number): { train: Dataset; validation: Dataset } {
  const { validation, train } = validationIndices(ds.count, fraction, seed);
  return {
    train: subsetDataset(ds, train, `${ds.name} (training part)`),
    validation: subsetDataset(ds, validation, `${ds.name} (validation ${fraction})`),
  };
}
