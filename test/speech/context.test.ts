import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contextSize, stackContext } from '../../src/speech/context.ts';
import { normalizeUtterance } from '../../src/speech/normalize.ts';

test('context windows stack ±C frames time-major, zero-padded at the edges (worked by hand)', () => {
  // 3 frames of 2 values: [1,2] [3,4] [5,6]; C = 1 → rows of 6: previous, current, next
  const src = new Float32Array([1, 2, 3, 4, 5, 6]);
  assert.equal(contextSize(2, 1), 6);
  assert.deepEqual(Array.from(stackContext(src, 3, 2, 1)), [0, 0, 1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 0, 0]);
  // C = 2 on 2 frames of 1 value: both neighbours beyond the edges are zeros
  assert.deepEqual(Array.from(stackContext(new Float32Array([7, 8]), 2, 1, 2)), [0, 0, 7, 8, 0, 0, 7, 8, 0, 0]);
  // C = 0 is the identity; an offset into a larger (padded) output leaves the rest alone
  const out = new Float32Array(10).fill(-1);
  stackContext(src, 3, 2, 0, out, 2);
  assert.deepEqual(Array.from(out), [-1, -1, 1, 2, 3, 4, 5, 6, -1, -1]);
});

test('per-utterance normalisation gives each coefficient zero mean and unit variance', () => {
  // coefficient 0: 1, 2, 3, 6 (mean 3, variance 3.5); coefficient 1 constant (→ 0)
  const x = new Float32Array([1, 5, 2, 5, 3, 5, 6, 5]);
  normalizeUtterance(x, 4, 2);
  const s = Math.sqrt(3.5);
  const want = [-2 / s, 0, -1 / s, 0, 0, 0, 3 / s, 0];
  for (let i = 0; i < 8; i++) assert.ok(Math.abs(x[i]! - want[i]!) < 1e-6, `value ${i}: ${x[i]} vs ${want[i]}`);
});
