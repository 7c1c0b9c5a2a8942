import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/index.ts';
import type { TrainEvent } from '../../src/runtime/events/events.ts';
import type { Dataset } from '../../src/data/dataset.ts';
import { Batcher, gather } from '../../src/data/batcher.ts';
import { limitDataset, shareDataset } from '../../src/data/dataset.ts';
import { checkLossMatchesData } from '../../src/runtime/run/lossChecks.ts';
import { syntheticDataset, trainInMemory } from '../parallel/inMemory.ts';

type Eval = Extract<TrainEvent, { type: 'eval' }>;
/** The test-set evaluations (no validation split here: the test set is evaluated every epoch). */
type TestEval = Eval & { testLoss: number; testAccuracy: number };
const evals = (events: TrainEvent[]) =>
  events.filter((e): e is TestEval => e.type === 'eval' && e.testLoss !== undefined);

/** y = 2·tanh(a·x) + 0.5 for a fixed random a: a smooth target a small MLP fits in a few epochs. */
const regression = (count: number, seed: number): Dataset => syntheticDataset('regression', count, [5], 2, seed);

test('end to end: a tiny regression (in-memory dataset with targets) trains, its MSE falls, MAE is reported, accuracy does not apply', async () => {
  const config = parseConfig(
    {
      model: { input: [5], layers: [{ dense: { units: 16, activation: 'gelu' } }, { dense: { units: 2 } }] },
      loss: 'meanSquaredError',
      optimizer: { adam: { lr: 0.01 } },
      data: { batchSize: 16 },
      train: { epochs: 8, seed: 1, backend: 'js' },
    },
    'regression config',
  );
  // the same generator and seed: the test set follows the same function as the training set
  const all = regression(320, 4);
  const train: Dataset = { ...limitDataset(all, 256) };
  const test: Dataset = {
    ...all,
    images: all.images.subarray(256 * 5),
    targets: all.targets!.subarray(256 * 2),
    labels: all.labels.subarray(256),
    count: 64,
  };
  const run = await trainInMemory(config, train, test);
  const e = evals(run.events);
  assert.equal(e.length, 8);
  const first = e[0]!,
    last = e[e.length - 1]!;
  assert.ok(last.testLoss < 0.5 * first.testLoss, `test MSE fell: ${first.testLoss} → ${last.testLoss}`);
  assert.ok(last.testLoss < 0.1, `test MSE ${last.testLoss} is small`);
  assert.ok(
    last.testMae! > 0 && last.testMae! < Math.sqrt(last.testLoss) * 1.01,
    `MAE ${last.testMae} ≤ RMSE ${Math.sqrt(last.testLoss)}`,
  );
  assert.ok(Number.isNaN(last.testAccuracy) && last.testExactMatch === undefined);
  const steps = run.events.filter((s) => s.type === 'step') as Extract<TrainEvent, { type: 'step' }>[];
  assert.ok(steps.every((s) => Number.isNaN(s.accuracy) && Number.isFinite(s.loss)));
});

test('multi-label evaluation reports per-label accuracy and exact match; BCE falls', async () => {
  const config = parseConfig(
    {
      model: { input: [6], layers: [{ dense: { units: 16, activation: 'leakyRelu' } }, { dense: { units: 3 } }] },
      loss: { type: 'binaryCrossEntropy' },
      optimizer: { adam: { lr: 0.02 } },
      data: { batchSize: 16 },
      train: { epochs: 4, seed: 1, backend: 'js' },
    },
    'multi-label config',
  );
  const data = syntheticDataset('multiLabel', 128, [6], 3, 6);
  const e = evals((await trainInMemory(config, data, data)).events);
  const first = e[0]!,
    last = e[e.length - 1]!;
  assert.ok(last.testLoss < first.testLoss, `BCE fell: ${first.testLoss} → ${last.testLoss}`);
  assert.ok(last.testAccuracy > 0.8 && last.testAccuracy <= 1, `per-label accuracy ${last.testAccuracy}`);
  assert.ok(
    last.testExactMatch! <= last.testAccuracy && last.testExactMatch! > 0.5,
    `exact match ${last.testExactMatch}`,
  );
  assert.equal(last.testMae, undefined);
});

test('batches carry targets: gather, Batcher (reused buffers), limitDataset and shareDataset keep them aligned', () => {
  const ds = regression(10, 2);
  const b = gather(ds, [3, 7]);
  assert.deepEqual([...b.targets!], [...ds.targets!.subarray(6, 8), ...ds.targets!.subarray(14, 16)]);
  const batcher = new Batcher(ds);
  const first = batcher.gather([1, 2, 3]);
  const again = batcher.gather([9]);
  assert.equal(again.targets!.buffer, first.targets!.buffer, 'the target buffer is reused');
  assert.deepEqual([...again.targets!], [...ds.targets!.subarray(18, 20)]);
  assert.equal(limitDataset(ds, 4).targets!.length, 8);
  const shared = shareDataset(ds);
  assert.ok(shared.targets!.buffer instanceof SharedArrayBuffer);
  assert.deepEqual([...shared.targets!], [...ds.targets!]);
  assert.equal(
    gather(syntheticDataset('classification', 4, [5], 3), [0, 1]).targets,
    undefined,
    'no targets for classification data',
  );
});

test('the loss must match the dataset task; regression outputs must match the targets per sample', () => {
  const mk = (loss: unknown, units: number) =>
    parseConfig({ model: { input: [5], layers: [{ dense: { units } }] }, loss }, 'f.yaml');
  const reg = regression(4, 1),
    cls = syntheticDataset('classification', 4, [5], 3);
  assert.throws(
    () => checkLossMatchesData(mk('softmaxCrossEntropy', 2), reg, [2]),
    /^Error: loss: softmaxCrossEntropy trains on a classification dataset \(one class label per sample\), but synthetic-regression is a regression dataset \(real-valued targets\); use loss: meanSquaredError for this data, or data that matches the loss$/,
  );
  assert.throws(
    () => checkLossMatchesData(mk('meanSquaredError', 3), cls, [3]),
    /^Error: loss: meanSquaredError trains on a regression dataset .* but synthetic-classification is a classification dataset .*; use loss: softmaxCrossEntropy/,
  );
  assert.throws(() => checkLossMatchesData(mk('binaryCrossEntropy', 2), reg, [2]), /use loss: meanSquaredError/);
  assert.throws(
    () => checkLossMatchesData(mk('meanSquaredError', 3), reg, [3]),
    /^Error: model\.layers\[0\]: the model gives 3 outputs per sample but synthetic-regression has 2 target values per sample; end with a dense layer of 2 units$/,
  );
  assert.throws(
    () => checkLossMatchesData(mk('meanSquaredError', 2), { ...reg, targets: undefined }, [2]),
    /holds no targets/,
  );
  checkLossMatchesData(mk('meanSquaredError', 2), reg, [2]);
  checkLossMatchesData(mk({ type: 'softmaxCrossEntropy', labelSmoothing: 0.1 }, 3), cls, [3]);
});
