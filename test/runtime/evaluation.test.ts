/**
 * Evaluation during training: with a validation split, every epoch evaluates it (valLoss,
 * valAccuracy in the events, metrics.jsonl and the result) and the test set is evaluated once, at
 * the end; without one, the test set every epoch as before. train.best / train.earlyStopping pick
 * what they can measure, and refuse, before the run directory exists, what they cannot.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseYaml } from '../../src/config/load.ts';
import { tmpDir } from '../cli/helpers.ts';
import { evalConfig, eventsOf, ofType, trainSplit } from './evalHelpers.ts';

test('with a validation split: each epoch evaluates it, the test set is evaluated once at the end', async () => {
  const dir = tmpDir('paratrain-eval-');
  const config = evalConfig(dir, { train: 'best: false' });
  const result = await trainSplit(config, { out: join(dir, 'run') });
  const events = eventsOf(result.runDir);
  const start = ofType(events, 'start')[0]!;
  assert.equal(start.validationSamples, 64);
  assert.equal(start.trainSamples, 192);
  const evals = ofType(events, 'eval');
  assert.deepEqual(
    evals.map((e) => [e.epoch, e.step]),
    [
      [0, 12],
      [1, 24],
      [2, 36],
    ],
  );
  for (const e of evals) {
    assert.equal(typeof e.valLoss, 'number');
    assert.ok((e.valAccuracy as number) >= 0 && (e.valAccuracy as number) <= 1);
  }
  assert.deepEqual(
    evals.map((e) => 'testLoss' in e),
    [false, false, true],
    'the test set only at the end',
  );
  const final = evals[2]!;
  assert.equal(result.testAccuracy, final.testAccuracy);
  assert.equal(result.testLoss, final.testLoss);
  assert.equal(result.valAccuracy, final.valAccuracy);
  assert.equal(result.valLoss, final.valLoss);
  const end = ofType(events, 'end')[0]!;
  assert.equal(end.testAccuracy, result.testAccuracy);
  assert.equal(end.valAccuracy, result.valAccuracy);
  assert.ok(!existsSync(join(result.runDir, 'model-best.safetensors')), 'best: false writes none');
});

test('without a validation split the test set is evaluated every epoch, as before; best defaults to none', async () => {
  const dir = tmpDir('paratrain-eval-');
  const result = await trainSplit(evalConfig(dir, { train: 'epochs: 2' }), { out: join(dir, 'run') }, false);
  const evals = ofType(eventsOf(result.runDir), 'eval');
  assert.deepEqual(
    evals.map((e) =>
      Object.keys(e)
        .filter((k) => /Loss|Accuracy/.test(k))
        .sort(),
    ),
    [
      ['testAccuracy', 'testLoss'],
      ['testAccuracy', 'testLoss'],
    ],
  );
  assert.equal(result.valAccuracy, undefined);
  assert.equal(result.testAccuracy, evals[1]!.testAccuracy);
  assert.equal(result.bestCheckpoint, undefined);
  assert.ok(!existsSync(join(result.runDir, 'model-best.safetensors')), 'best: auto picks nothing on the test set');
  const written = parseYaml(readFileSync(join(result.runDir, 'config.yaml'), 'utf8'), 'config.yaml') as {
    train: Record<string, unknown>;
  };
  assert.equal(written.train.best, false, 'config.yaml records the resolved choice');
});

test('config.yaml records what auto resolved to; best and early stopping refuse metrics the data cannot measure', async () => {
  const dir = tmpDir('paratrain-eval-');
  const result = await trainSplit(evalConfig(dir, { train: 'epochs: 1, earlyStopping: true' }), {
    out: join(dir, 'run'),
  });
  const written = parseYaml(readFileSync(join(result.runDir, 'config.yaml'), 'utf8'), 'config.yaml') as {
    train: Record<string, unknown>;
  };
  assert.deepEqual(written.train.best, { metric: 'valAccuracy', mode: 'max' });
  assert.deepEqual(written.train.earlyStopping, { metric: 'valLoss', mode: 'min', patience: 5, minDelta: 0 });

  const out = join(dir, 'refused');
  await assert.rejects(trainSplit(evalConfig(dir, { train: 'best: { metric: valAccuracy }' }), { out }, false), {
    message:
      /^train\.best: valAccuracy is measured on a validation split, and this run has none; hold one out of the training data \(data\.validation: 0\.1\) or watch testAccuracy$/,
  });
  await assert.rejects(trainSplit(evalConfig(dir, { train: 'earlyStopping: { metric: testLoss }' }), { out }), {
    message:
      /^train\.earlyStopping: with a validation split the test set is evaluated once, at the end, so testLoss cannot be watched per epoch; watch valLoss$/,
  });
  assert.ok(!existsSync(out), 'refused before the run directory is made');
});
