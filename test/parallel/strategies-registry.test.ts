import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  STRATEGIES,
  STRATEGY_NAMES,
  createStrategy,
  needsParameterServer,
  stepsInLockstep,
  runsModelParallel,
  checkStrategy,
  type StrategySpec,
} from '../../src/parallel/strategies/index.ts';
import { parseConfig } from '../../src/config/index.ts';
import { multiDeviceIssues } from '../../src/config/schema/deviceChecks.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { localGroup } from './localGroup.ts';
import { localParameterServer } from './strategyHarness.ts';

/** Every strategy with its defaults, as the config schema gives them. */
const specs = STRATEGY_NAMES.map(
  (name) =>
    parseConfig({ model: { input: [2], layers: [{ dense: { units: 2 } }] }, train: { strategy: name } }).train.strategy,
);

test('registry: one entry per strategy, in the order messages list them', () => {
  assert.deepEqual(STRATEGY_NAMES, ['sync', 'async', 'hybrid', 'bsp', 'easgd', 'bmuf', 'diloco']);
  assert.deepEqual(
    STRATEGIES.map((e) => e.name),
    STRATEGY_NAMES,
  );
});

test('registry: what each strategy needs from the run', () => {
  const table = specs.map((s) => [s.type, needsParameterServer(s), stepsInLockstep(s), runsModelParallel(s)]);
  assert.deepEqual(table, [
    ['sync', true, false, false],
    ['async', true, false, false],
    ['hybrid', false, true, true],
    ['bsp', false, true, false],
    ['easgd', false, true, false],
    ['bmuf', false, true, false],
    ['diloco', false, true, false],
  ]);
  const asyncEasgd: StrategySpec = { type: 'easgd', alpha: 0.1, period: 1, mode: 'async' };
  assert.equal(needsParameterServer(asyncEasgd), true);
  assert.equal(stepsInLockstep(asyncEasgd), false);
});

test("registry: createStrategy builds each strategy's hooks, with a parameter server where one is needed", () => {
  const [comm] = localGroup(1);
  for (const spec of specs) {
    const ps = needsParameterServer(spec) ? localParameterServer([0]) : null;
    assert.equal(createStrategy(spec, { comm: comm!, ps }).name, spec.type);
    if (ps)
      assert.throws(() => createStrategy(spec, { comm: comm!, ps: null }), {
        message: `strategy ${spec.type} needs a parameter server`,
      });
  }
});

test('registry: run checks name the field (options against the device count, syncBatchNorm needs lockstep)', () => {
  const easgd: StrategySpec = { type: 'easgd', alpha: 0.5, period: 1, mode: 'sync' };
  assert.throws(() => checkStrategy(easgd, 2), /^Error: train\.strategy\.easgd\.alpha: /);
  assert.throws(() => createStrategy(easgd, { comm: localGroup(2)[0]!, ps: null }), /alpha·devices < 1/);
  const train = (strategy: StrategySpec, syncBatchNorm: boolean) =>
    ({ model: { input: [4], layers: [] }, train: { strategy, syncBatchNorm, microBatches: 1 } }) as unknown as Pick<
      RunConfig,
      'model' | 'train'
    >;
  assert.deepEqual(multiDeviceIssues(train(specs[1]!, true), 2), [
    {
      path: ['train', 'syncBatchNorm'],
      message:
        'syncBatchNorm needs devices that step together (hybrid, bsp, bmuf, diloco, easgd with mode: sync); strategy async runs them at their own pace; use one of those or syncBatchNorm: false',
    },
  ]);
  assert.deepEqual(multiDeviceIssues(train(specs[1]!, true), 1), []);
  assert.deepEqual(multiDeviceIssues(train(specs[2]!, true), 8), []);
});
