import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor } from '../../src/tensor/tensor.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { getBackend } from '../../src/kernels/index.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import type { LayerSpec } from '../../src/nn/spec.ts';
import { SoftmaxCrossEntropy } from '../../src/nn/softmaxCrossEntropy.ts';
import { accumulateMicroBatches, microBatchRanges } from '../../src/parallel/microbatch.ts';
import { seededModel, conv, pool } from './splitHelpers.ts';
import { assertClose, randomArray } from '../util/close.ts';

// Tolerance (float32): micro-batches add the same per-sample gradient terms in a different order
// (k partial sums instead of one): ~1e-6 relative; we allow 1e-5.
const TOL = { rtol: 1e-5, atol: 1e-6 };

const layers = (masks: 'per-sample' | 'per-replica'): LayerSpec[] => [
  conv(4, 3, { activation: 'relu' }),
  pool('maxPool2d', 2),
  conv(6, 3, { strides: [2, 2], padding: 'same', activation: 'relu' }),
  { type: 'flatten' },
  { type: 'dense', units: 12, activation: 'relu', useBias: true, parallel: 'data' },
  { type: 'dropout', rate: 0.4, masks },
  { type: 'dense', units: 5, activation: 'linear', useBias: true, parallel: 'data' },
];

test('micro-batch ranges: k contiguous slices, as even as possible', () => {
  assert.deepEqual(
    microBatchRanges(23, 4).map((r) => r.end - r.start),
    [6, 6, 6, 5],
  );
  assert.deepEqual(
    microBatchRanges(3, 8).map((r) => r.end - r.start),
    [1, 1, 1],
  );
  assert.equal(microBatchRanges(3, 8, true).length, 8);
  assert.throws(() => microBatchRanges(10, 0), /train\.microBatches: expected a positive integer, got 0/);
});

test('micro-batching k = 2, 3, 4, 8 (uneven slices) equals the unsplit step: loss, gradients; activation memory falls', async () => {
  const N = 23,
    input = [12, 12, 2];
  for (const backend of [jsBackend, await getBackend('wasm')] as Backend[]) {
    for (const masks of ['per-sample', 'per-replica'] as const) {
      const x = new Tensor([N, ...input], randomArray(N * 288, 4));
      const labels = Int32Array.from({ length: N }, (_, i) => (i * 7) % 5);
      const ctx = { training: true, seed: 9, step: 4, sampleOffset: 40, rank: 1 };
      const run = async (k: number) => {
        const model = seededModel(backend, layers(masks), input);
        const xb = new Tensor(x.shape, backend.alloc(x.size));
        xb.data.set(x.data);
        model.zeroGrads();
        const r = await accumulateMicroBatches(model, new SoftmaxCrossEntropy(backend), xb, labels, ctx, 1 / N, k);
        return { ...r, grads: model.grads.slice(), peak: model.takePeakActivationBytes() };
      };
      const whole = await run(1);
      for (const k of [2, 3, 4, 8]) {
        const what = `${backend.name} ${masks} masks k=${k}`;
        const split = await run(k);
        assert.equal(split.samples, N);
        assert.equal(split.correct, whole.correct, `${what}: correct count`);
        assertClose([split.lossSum], [whole.lossSum], { ...TOL, what: `${what} loss` });
        assertClose(split.grads, whole.grads, { ...TOL, what: `${what} gradients` });
        // the largest slice is ⌈23/k⌉ samples: activation bytes scale with it
        const expected = (whole.peak * Math.ceil(N / k)) / N;
        assert.ok(
          Math.abs(split.peak - expected) <= 1e-9 * whole.peak + 64,
          `${what}: peak activation bytes ${split.peak}, expected ${expected}`,
        );
      }
    }
  }
});
