/**
 * A run whose `parallel: model` layers are split resumes on another layout — another device count,
 * another train.tensorParallel group, or with its marks removed, and the reverse: each device
 * takes its part of the set's model file (the unsplit model and its optimizer slots), so what the
 * devices hold is exactly what the set saved, and the run goes on like one trained on the new
 * layout all along (within the model-parallel equivalence tests' tolerance: summation order).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tinyConfig } from '../parallel/helpers.ts';
import { on, resumesLike, restoreGathersBack, trained } from './resumeSplitHelpers.ts';
import { TRICK_LAYERS } from './resumeHelpers.ts';
import { deviceFilesFit, savedSplitGroup } from '../../src/runtime/device/deviceLayout.ts';
import { modelHash } from '../../src/runtime/checkpoint/runConfigFiles.ts';
import type { SetState } from '../../src/runtime/checkpoint/checkpointSet.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';

/** "One weird trick": both dense layers split (the last one's 10 units unevenly on 3 or 4), dropout between them. */
const trick = tinyConfig({
  optimizer: { adam: { lr: 0.01 } },
  data: { batchSize: 16, batchSizeScope: 'global', trainLimit: 64 },
  train: { epochs: 2, devices: 2, strategy: 'hybrid', checkpointEvery: { steps: 3 } },
  layers: TRICK_LAYERS,
});

test('split dense layers saved on 2 devices: 1, 3 and 4 devices take their parts of the set exactly, and resume like one device all along', async () => {
  const split = await trained(trick, 3);
  assert.equal(split.point.state.splitGroup, 2);
  for (const devices of [1, 3, 4]) {
    const names = await restoreGathersBack(split.point, on(trick, devices));
    assert.ok(names.includes('layers.5.kernel'));
  }
  // the trick on any count trains as one device on the global batch (one-weird-trick-threads.test.ts)
  const one = await trained(on(trick, 1), 3);
  await resumesLike(split.point, on(trick, 1), one.tensors, '2 → 1 device', /devices 2 → 1/);
  await resumesLike(split.point, on(trick, 4), one.tensors, '2 → 4 devices', /devices 2 → 4/);
});

test("which layouts take the device files back: the same split of the same layers on the same devices, or whole replicas on any count; a set without splitGroup is the run's", () => {
  const state = (config: RunConfig, devices: number, splitGroup?: number): SetState =>
    ({ devices, modelHash: modelHash(config), splitGroup }) as SetState;
  const whole: RunConfig = {
    ...trick,
    model: {
      ...trick.model,
      layers: trick.model.layers.map((l) => (l.type === 'dense' ? { ...l, parallel: 'data' } : l)),
    },
  };
  const saved = state(trick, 2, 2);
  assert.equal(deviceFilesFit(saved, trick, 2), true);
  for (const [config, what] of [
    [on(trick, 1), '1 device'],
    [on(trick, 4), '4 devices'],
    [on(trick, 4, 2), 'tensorParallel 2 on 4'],
    [{ ...whole, train: trick.train }, 'marks removed'],
  ] as const)
    assert.equal(deviceFilesFit(saved, config, config.train.devices), false, what);
  assert.equal(deviceFilesFit(state(whole, 2, 1), on(whole, 3), 3), true, 'whole replicas: the resize rule');
  assert.equal(deviceFilesFit(state(whole, 2, 1), trick, 2), false, 'whole → split');
  // sets of earlier versions: the run's split, its tensorParallel from config.yaml
  assert.equal(savedSplitGroup(state(trick, 2), null, trick), 2);
  assert.equal(savedSplitGroup(state(trick, 4), on(trick, 4, 2), on(trick, 4)), 2);
  assert.equal(savedSplitGroup(state(trick, 1), null, trick), 1);
});
