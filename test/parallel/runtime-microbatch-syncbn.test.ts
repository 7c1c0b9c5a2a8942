import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { tinyConfig, trainAndReadWeights } from './helpers.ts';
import { assertClose } from '../util/close.ts';
import { readMetrics } from '../../src/runtime/events/metrics.ts';
import type { TrainEvent } from '../../src/runtime/events/events.ts';

// Tolerance: as in equivalence.test.ts — the runs differ only in summation order (gradients summed
// in micro-batches or over devices), so after 12 SGD-momentum steps weights agree to ~1e-6 relative.
const TOL = { rtol: 1e-4, atol: 1e-5 };

test('train.microBatches: 1 device with k = 3 (uneven slices of 8) and hybrid on 2 devices with k = 2 equal the plain run', async () => {
  const events: TrainEvent[] = [];
  const plain = await trainAndReadWeights(tinyConfig({ data: { batchSize: 16 } }), { onEvent: (e) => events.push(e) });
  const k3 = await trainAndReadWeights(tinyConfig({ data: { batchSize: 16 }, train: { microBatches: 3 } }));
  assertClose(k3, plain, { ...TOL, what: 'microBatches 3 weights' });
  const hybrid = await trainAndReadWeights(tinyConfig({ train: { devices: 2, strategy: 'hybrid', microBatches: 2 } }));
  assertClose(hybrid, plain, { ...TOL, what: 'hybrid G=2 microBatches 2 weights' });
  // the step events carry the activation bytes held (16 samples here)
  const step = events.find((e) => e.type === 'step') as Extract<TrainEvent, { type: 'step' }>;
  assert.ok(step.activationBytes! > 0);
});

test('activation bytes in metrics fall with micro-batches', async () => {
  const peaks: number[] = [];
  for (const k of [1, 4]) {
    const events: TrainEvent[] = [];
    await trainAndReadWeights(tinyConfig({ data: { batchSize: 16, trainLimit: 32 }, train: { microBatches: k } }), {
      onEvent: (e) => events.push(e),
    });
    const start = events.find((e) => e.type === 'start') as Extract<TrainEvent, { type: 'start' }>;
    const metrics = readMetrics(join(start.runDir, 'metrics.jsonl'));
    const epoch = metrics.find((e) => e.type === 'rankEpoch')!;
    peaks.push(epoch.peakActivationBytes as number);
  }
  assert.equal(peaks[1]! * 4, peaks[0]!, `peak activation bytes k=1 ${peaks[0]}, k=4 ${peaks[1]}`);
});

test('per-replica dropout masks (the default) make hybrid differ from one device; per-sample masks make it equal', async () => {
  const perReplica = (devices: number, batchSize: number) =>
    tinyConfig({
      data: { batchSize },
      train: { devices, strategy: 'hybrid' },
      layers: [
        { conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: 'relu' } },
        { maxPool2d: { poolSize: 2 } },
        { flatten: {} },
        { dense: { units: 16, activation: 'relu' } },
        { dropout: { rate: 0.3 } },
        { dense: { units: 10 } },
      ],
    });
  const single = await trainAndReadWeights(perReplica(1, 16));
  const hybrid = await trainAndReadWeights(perReplica(2, 8));
  assert.ok(
    hybrid.some((v, i) => Math.abs(v - single[i]!) > 1e-3),
    'per-replica masks: a G-device run draws other masks',
  );
  // (per-sample: test/parallel/equivalence.test.ts, whose tiny config sets masks: per-sample)
});

test('train.syncBatchNorm: hybrid on 2 devices with BatchNorm equals one device with the global batch', async () => {
  const layers = [
    { conv2d: { filters: 4, kernelSize: 3, strides: 2 } },
    { batchNorm: { momentum: 0.8 } },
    { relu: {} },
    { maxPool2d: { poolSize: 2 } },
    { flatten: {} },
    { dense: { units: 16 } },
    { batchNorm: {} },
    { relu: {} },
    { dense: { units: 10 } },
  ];
  // weights and the running statistics (checkpointed as layers.*.running*); 97 samples: the last
  // global batch has 1 sample: device 1 has none and still joins the statistics reductions
  const data = { trainLimit: 97 };
  const single = await trainAndReadWeights(tinyConfig({ layers, data: { ...data, batchSize: 16 } }));
  const synced = await trainAndReadWeights(
    tinyConfig({ layers, data, train: { devices: 2, strategy: 'hybrid', syncBatchNorm: true } }),
  );
  assertClose(synced, single, { ...TOL, what: 'syncBatchNorm G=2 weights and running statistics' });
  const local = await trainAndReadWeights(tinyConfig({ layers, data, train: { devices: 2, strategy: 'hybrid' } }));
  assert.ok(
    local.some((v, i) => Math.abs(v - single[i]!) > 1e-3),
    'per-device statistics (the default) must differ',
  );
});
