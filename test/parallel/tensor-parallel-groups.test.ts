/**
 * train.tensorParallel: groups of consecutive devices split the `parallel: model` layers, the groups
 * data-parallel — a training run of 2 × 2 on 4 devices equals 4 data-parallel devices (and so one
 * device with the whole batch), through the runtime's own replica, strategy and checkpoints.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig, type RunConfig } from '../../src/config/index.ts';
import { syntheticDataset, trainInMemory } from './inMemory.ts';
import { assertClose } from '../util/close.ts';

function config(parallel: 'data' | 'model', train: Record<string, unknown>): RunConfig {
  return parseConfig(
    {
      model: {
        input: [6],
        layers: [
          { dense: { units: 10, parallel } },
          { relu: {} },
          { dense: { units: 8, parallel } },
          { tanh: {} },
          { dense: { units: 3 } },
        ],
      },
      optimizer: { adam: { lr: 0.01 } },
      data: { batchSize: 12, batchSizeScope: 'global' },
      train: { epochs: 2, seed: 5, backend: 'js', evalEvery: 0, devices: 4, strategy: 'hybrid', ...train },
    },
    'test config',
  );
}

test('tensorParallel: 2 on 4 devices (two groups splitting the dense layers, data-parallel across) trains as 4 data-parallel devices; the checkpoint is the unsplit model', async () => {
  // 46 samples: the last global batch (10) splits 3, 3, 2, 2, so the groups compute 6 and 4 rows
  const data = syntheticDataset('classification', 46, [6], 3, 7);
  const dp = await trainInMemory(config('data', {}), data, null, { bucketBytes: 1 << 30 });
  const tp = await trainInMemory(config('model', { tensorParallel: 2 }), data, null, { bucketBytes: 1 << 30 });
  assert.deepEqual([...tp.tensors.keys()].sort(), [...dp.tensors.keys()].sort());
  for (const [name, t] of dp.tensors) assertClose(tp.tensors.get(name)!, t, { rtol: 1e-4, atol: 1e-5, what: name });
  // each device's loss on its own rows, step by step
  const losses = (r: typeof dp) =>
    r.events
      .flatMap((e) => (e.type === 'step' ? [e] : []))
      .sort((a, b) => a.step - b.step || a.rank - b.rank)
      .map((e) => e.loss);
  assert.equal(losses(dp).length, 4 * 8);
  assertClose(Float32Array.from(losses(tp)), Float32Array.from(losses(dp)), { rtol: 1e-5, atol: 1e-6, what: 'losses' });
});

test('tensorParallel names the fix: no marked layer, or a group that does not divide the devices', () => {
  assert.throws(
    () => config('data', { tensorParallel: 2 }),
    /train\.tensorParallel: train\.tensorParallel sizes the groups of devices that split the layers marked 'parallel: model', and no layer is marked/,
  );
  assert.throws(
    () => config('model', { tensorParallel: 3 }),
    /train\.tensorParallel: a tensor-parallel group of 3 devices must have at least 2 and divide the job's 4; use 2, 4/,
  );
});
