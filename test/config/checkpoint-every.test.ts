import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/index.ts';
import { configToYaml } from '../../src/config/writeYaml.ts';
import { parseYaml } from '../../src/config/load.ts';

const base = { model: { input: [4], layers: [{ dense: { units: 2 } }] } };
const train = (t: Record<string, unknown>) => parseConfig({ ...base, train: t }, 'c.yaml').train;

test('train.checkpointEvery: epochs (number or { epochs }), { steps }, default every epoch, keepLast default 3', () => {
  assert.equal(train({}).checkpointEvery, 1);
  assert.equal(train({}).keepLast, 3);
  assert.equal(train({ checkpointEvery: 0 }).checkpointEvery, 0);
  assert.equal(train({ checkpointEvery: { epochs: 2 } }).checkpointEvery, 2);
  assert.deepEqual(train({ checkpointEvery: { steps: 500 } }).checkpointEvery, { steps: 500 });
  assert.equal(train({ keepLast: 5 }).keepLast, 5);
  const c = parseConfig({ ...base, train: { checkpointEvery: { steps: 7 } } });
  assert.deepEqual(parseConfig(parseYaml(configToYaml(c), 'y')), c, 'written to config.yaml and read back');
});

test('train.checkpointEvery and keepLast: bad values name the field and the forms allowed', () => {
  for (const bad of [-1, { steps: 0 }, { minutes: 5 }, { steps: 2, epochs: 1 }, 'often']) {
    assert.throws(
      () => train({ checkpointEvery: bad }),
      /c\.yaml: train\.checkpointEvery: expected a number of epochs \(0: only at the end\), \{ epochs: N \} or \{ steps: N \}/,
    );
  }
  assert.throws(() => train({ keepLast: 0 }), /train\.keepLast: expected a positive integer/);
});
