/**
 * `--cores-per-host`: device threads beyond a host's cores share them, each computing
 * per-host/cores times as long as the layers timed alone (the optimizer too); a core for every
 * device changes nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { computeTime, onSharedCores, type ModelCosts } from '../../src/simulate/layerCosts.ts';
import { buildSetup } from '../../src/simulate/setup.ts';

const COSTS: ModelCosts = {
  layers: [
    {
      index: 0,
      type: 'dense',
      name: 'layers.0',
      forward: { fixed: 0.001, perSample: 0.0002 },
      backward: { fixed: 0.002, perSample: 0.0004 },
      paramOffset: 0,
      paramFloats: 100,
      inputShape: [10],
      outputShape: [10],
      outputElements: 10,
      flopsPerSample: 200,
    },
  ],
  paramFloats: 100,
  stateFloats: 0,
  optimizerPerFloat: 1e-9,
  source: 'by hand',
};

test('4 device threads on 2 cores compute twice as long; 2 on 2 or 4 cores as timed', () => {
  const shared = onSharedCores(COSTS, 4, 2);
  assert.equal(computeTime(shared, 8), 2 * computeTime(COSTS, 8));
  assert.equal(shared.optimizerPerFloat, 2e-9);
  assert.match(shared.source, /4 device threads sharing 2 cores a host: 2\.00× as long/);
  assert.equal(onSharedCores(COSTS, 2, 2), COSTS);
  assert.equal(onSharedCores(COSTS, 2, 4), COSTS);
});

test('--cores-per-host must be a positive integer, refused before anything is timed', async () => {
  await assert.rejects(
    buildSetup('examples/mnist-small.yaml', { coresPerHost: 0, devices: '2' }),
    /--cores-per-host: expected a positive integer, got 0/,
  );
});
