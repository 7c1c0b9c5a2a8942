import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/index.ts';
import { configToYaml } from '../../src/config/writeYaml.ts';
import { parseYaml } from '../../src/config/load.ts';

const base = { model: { input: [4], layers: [{ dense: { units: 2 } }] } };
const train = (t: Record<string, unknown>) => parseConfig({ ...base, train: t }, 'c.yaml').train;

test('train.best: auto by default, false, or a metric whose mode defaults to its better direction', () => {
  assert.equal(train({}).best, 'auto');
  assert.equal(train({ best: false }).best, false);
  assert.deepEqual(train({ best: { metric: 'valLoss' } }).best, { metric: 'valLoss', mode: 'min' });
  assert.deepEqual(train({ best: { metric: 'testAccuracy' } }).best, { metric: 'testAccuracy', mode: 'max' });
  // a speech model's error rates are better lower
  assert.deepEqual(train({ best: { metric: 'valCER' } }).best, { metric: 'valCER', mode: 'min' });
  assert.deepEqual(train({ best: { metric: 'testWER' } }).best, { metric: 'testWER', mode: 'min' });
  assert.deepEqual(train({ best: { metric: 'valAccuracy', mode: 'min' } }).best, {
    metric: 'valAccuracy',
    mode: 'min',
  });
});

test('train.earlyStopping: off by default; true or a map fills patience 5, minDelta 0, metric and mode auto', () => {
  assert.equal(train({}).earlyStopping, false);
  assert.deepEqual(train({ earlyStopping: true }).earlyStopping, {
    metric: 'auto',
    mode: 'auto',
    patience: 5,
    minDelta: 0,
  });
  assert.deepEqual(train({ earlyStopping: { metric: 'valAccuracy', patience: 3, minDelta: 0.001 } }).earlyStopping, {
    metric: 'valAccuracy',
    mode: 'max',
    patience: 3,
    minDelta: 0.001,
  });
  const c = parseConfig({ ...base, train: { best: { metric: 'valLoss' }, earlyStopping: { patience: 2 } } });
  assert.deepEqual(parseConfig(parseYaml(configToYaml(c), 'y')), c, 'written to config.yaml and read back');
});

test('train.best and train.earlyStopping: bad values name the field and what is allowed', () => {
  assert.throws(
    () => train({ best: 'yes' }),
    /c\.yaml: train\.best: expected auto, false or \{ metric: valLoss\|valAccuracy\|testLoss\|testAccuracy\|valCER\|valWER\|testCER\|testWER, mode: max\|min \}, got 'yes'/,
  );
  assert.throws(
    () => train({ best: { metric: 'valAcc' } }),
    /train\.best\.metric: expected one of valLoss, valAccuracy, testLoss, testAccuracy, valCER, valWER, testCER, testWER, got 'valAcc' \(did you mean 'valAccuracy'\?\)/,
  );
  assert.throws(
    () => train({ best: { metric: 'valLoss', goal: 'min' } }),
    /train\.best: unknown option 'goal'; allowed: metric, mode/,
  );
  assert.throws(
    () => train({ earlyStopping: { patience: 0 } }),
    /train\.earlyStopping\.patience: expected a positive integer, got 0/,
  );
  assert.throws(
    () => train({ earlyStopping: { minDelta: -1 } }),
    /train\.earlyStopping\.minDelta: expected a number ≥ 0/,
  );
  assert.throws(
    () => train({ earlyStopping: { mode: 'max' } }),
    /train\.earlyStopping\.mode: mode max needs a metric to apply to; give both, e.g\. \{ metric: valAccuracy, mode: max \}/,
  );
  assert.throws(
    () => train({ earlyStopping: true, evalEvery: 0 }),
    /train\.earlyStopping: early stopping watches the evaluation after epochs, but train\.evalEvery is 0 \(only at the end\); set evalEvery: 1 \(or N\) or leave earlyStopping out/,
  );
});
