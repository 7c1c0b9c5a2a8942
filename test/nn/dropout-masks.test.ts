import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor } from '../../src/tensor/tensor.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { Dropout } from '../../src/nn/dropout.ts';
import type { ForwardContext } from '../../src/nn/layer.ts';

const ones = (n: number) => new Tensor([n, 50], new Float32Array(n * 50).fill(1));
/** The mask row of sample `i` of a forward of n samples. */
const rows = (layer: Dropout, n: number, ctx: ForwardContext) => {
  const y = layer.forward(ones(n), ctx).data;
  return Array.from({ length: n }, (_, i) => Array.from(y.subarray(i * 50, (i + 1) * 50)));
};
const base: ForwardContext = { training: true, seed: 3, step: 7, sampleOffset: 0 };

test('per-sample masks depend on the global sample index only (not on rank or how the batch is split)', () => {
  const d = new Dropout(jsBackend, 'dropout', [50], 0.5, 4, 'per-sample');
  const whole = rows(d, 6, base);
  const tail = rows(d, 2, { ...base, sampleOffset: 4, rank: 3, localOffset: 0 });
  assert.deepEqual(tail, whole.slice(4));
});

test('per-replica masks (the default) are keyed by rank and local index, not the global index', () => {
  const d = new Dropout(jsBackend, 'dropout', [50], 0.5, 4);
  assert.equal(d.masks, 'per-replica');
  const r0 = rows(d, 4, { ...base, rank: 0 });
  assert.deepEqual(rows(d, 4, { ...base, rank: 0, sampleOffset: 100 }), r0, 'the global offset must not matter');
  assert.notDeepEqual(rows(d, 4, { ...base, rank: 1 }), r0, 'another rank draws other masks');
  // a micro-batch starting at local index 2 draws what the whole batch drew for its samples 2, 3
  assert.deepEqual(rows(d, 2, { ...base, rank: 0, localOffset: 2 }), r0.slice(2));
  // the two schemes are different streams
  const ps = new Dropout(jsBackend, 'dropout', [50], 0.5, 4, 'per-sample');
  assert.notDeepEqual(rows(ps, 4, base), r0);
});
