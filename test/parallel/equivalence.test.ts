import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tinyConfig, trainAndReadWeights } from './helpers.ts';
import { assertClose } from '../util/close.ts';

// Tolerance: the runs differ only in floating-point summation order (a batch split across devices
// sums its gradient in pieces), so after 12 SGD-momentum steps weights agree to ~1e-6 relative.
const TOL = { rtol: 1e-4, atol: 1e-5 };

/** One device with the global batch `batchSize`, trained once per size (several tests compare with it). */
const singles = new Map<number, Promise<Float32Array>>();
const oneDevice = (batchSize: number) => {
  if (!singles.has(batchSize)) singles.set(batchSize, trainAndReadWeights(tinyConfig({ data: { batchSize } })));
  return singles.get(batchSize)!;
};

test('hybrid on 2 and 4 devices equals one device with the global batch (dropout on, per-sample masks)', async () => {
  for (const devices of [2, 4]) {
    const single = await oneDevice(8 * devices);
    const hybrid = await trainAndReadWeights(tinyConfig({ train: { devices, strategy: 'hybrid' } }));
    assertClose(hybrid, single, { ...TOL, what: `hybrid G=${devices} weights` });
  }
});

test('hybrid with small gradient buckets (reduced during backward) equals one device', async () => {
  const single = await oneDevice(16);
  // 600 bytes: the dense layers' gradients go in separate buckets, the conv layer's in the last
  const hybrid = await trainAndReadWeights(
    tinyConfig({ train: { devices: 2, strategy: { hybrid: { bucketBytes: 600 } } } }),
  );
  assertClose(hybrid, single, { ...TOL, what: 'bucketed hybrid weights' });
});

test('bucketed hybrid with a last step that leaves a device without samples equals one device', async () => {
  // 97 samples in global batches of 16: the last step has 1 sample, so device 1 has none and must
  // still make the same bucket calls as device 0 (it once reduced everything in one call and failed)
  const data = { trainLimit: 97 };
  const single = await trainAndReadWeights(tinyConfig({ data: { ...data, batchSize: 16 } }));
  const hybrid = await trainAndReadWeights(
    tinyConfig({ data, train: { devices: 2, strategy: { hybrid: { bucketBytes: 600 } } } }),
  );
  assertClose(hybrid, single, { ...TOL, what: 'bucketed hybrid weights with an empty device' });
});

test('bsp with period 1 and plain SGD equals hybrid', async () => {
  const sgd = { sgd: { lr: 0.1 } };
  const hybrid = await trainAndReadWeights(tinyConfig({ optimizer: sgd, train: { devices: 2, strategy: 'hybrid' } }));
  const bsp = await trainAndReadWeights(
    tinyConfig({ optimizer: sgd, train: { devices: 2, strategy: { bsp: { period: 1 } } } }),
  );
  assertClose(bsp, hybrid, { ...TOL, what: 'bsp K=1 weights' });
});

test('bmuf with block momentum 0 and block lr 1 equals bsp', async () => {
  const bsp = await trainAndReadWeights(tinyConfig({ train: { devices: 3, strategy: { bsp: { period: 3 } } } }));
  const bmuf = await trainAndReadWeights(
    tinyConfig({ train: { devices: 3, strategy: { bmuf: { period: 3, blockMomentum: 0, blockLr: 1 } } } }),
  );
  assertClose(bmuf, bsp, { ...TOL, what: 'bmuf η=0 ζ=1 weights' });
});

test('sync on 2 devices equals one device taking the same batches one after another', async () => {
  // sync: device 0 then device 1 each apply an 8-sample step to the shared weights — the same
  // sequence of updates as one device with batch 8 walking the same permutation. (No dropout: its
  // masks are keyed by the step number, which counts differently in the two runs.)
  const layers = [
    { conv2d: { filters: 4, kernelSize: 3, strides: 2, activation: 'relu' } },
    { flatten: {} },
    { dense: { units: 10 } },
  ];
  const single = await trainAndReadWeights(tinyConfig({ layers, data: { batchSize: 8 } }));
  const sync = await trainAndReadWeights(tinyConfig({ layers, train: { devices: 2, strategy: 'sync' } }));
  assertClose(sync, single, { ...TOL, what: 'sync G=2 weights' });
  const bigger = await trainAndReadWeights(tinyConfig({ layers, data: { batchSize: 16 } }));
  assert.ok(
    bigger.some((v, i) => Math.abs(v - single[i]!) > 1e-3),
    'a different batch size must give different weights (the comparison is not vacuous)',
  );
});
