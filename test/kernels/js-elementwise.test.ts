import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref } from './reference.ts';
import {
  biasAdd,
  biasGrad,
  activationForward,
  activationBackward,
  axpy,
  scale,
} from '../../src/kernels/js/elementwise.ts';
import type { ActivationKind } from '../../src/kernels/activation.ts';

const KINDS: ActivationKind[] = ['relu', 'clippedRelu', 'tanh', 'sigmoid', 'linear'];

test('biasAdd matches the reference, also in place', () => {
  for (const [rows, cols] of [
    [1, 1],
    [7, 33],
    [65, 3],
  ]) {
    const x = randomArray(rows * cols, rows),
      b = randomArray(cols, cols);
    const y = new Float32Array(rows * cols).fill(NaN),
      want = new Float32Array(rows * cols);
    biasAdd(x, b, y, rows, cols);
    ref.biasAdd(x, b, want, rows, cols);
    assert.deepEqual([...y], [...want]);
    biasAdd(x, b, x, rows, cols);
    assert.deepEqual([...x], [...want]);
  }
});

test('biasGrad accumulates column sums', () => {
  for (const [rows, cols] of [
    [1, 1],
    [7, 33],
    [1000, 3],
  ]) {
    const dy = randomArray(rows * cols, rows + cols),
      db0 = randomArray(cols, 5);
    const db = db0.slice(),
      want = db0.slice();
    biasGrad(dy, db, rows, cols);
    ref.biasGrad(dy, want, rows, cols);
    assertClose(db, want, { atol: 1e-6 });
  }
});

test('activations forward match the definitions; cap defaults to 20', () => {
  const x = Float32Array.from([-30, -2, -0.5, 0, 0.25, 1, 3, 19.5, 20, 25]);
  // gelu and leakyRelu: test/kernels/activations-gelu-leaky.test.ts
  const expected: Partial<Record<ActivationKind, (v: number) => number>> = {
    relu: (v) => Math.max(v, 0),
    clippedRelu: (v) => Math.min(Math.max(v, 0), 20),
    tanh: Math.tanh,
    sigmoid: (v) => 1 / (1 + Math.exp(-v)),
    linear: (v) => v,
  };
  for (const kind of KINDS) {
    const y = new Float32Array(x.length).fill(NaN);
    activationForward(kind, x, y);
    assertClose(y, [...x].map(expected[kind]!), { what: kind });
  }
  const y = new Float32Array(x.length);
  activationForward('clippedRelu', x, y, 2);
  assertClose(y, [0, 0, 0, 0, 0.25, 1, 2, 2, 2, 2]);
  // sigmoid saturates without overflow.
  activationForward('sigmoid', Float32Array.from([-1000, 1000]), y);
  assert.deepEqual([y[0], y[1]], [0, 1]);
});

test('activations in place, and their backward from the output y matches central differences', () => {
  const x = randomArray(200, 9).map((v) => v * 4);
  const dy = randomArray(200, 10);
  for (const kind of KINDS) {
    for (const cap of [undefined, 1.5]) {
      const y = new Float32Array(x.length);
      activationForward(kind, x, y, cap);
      const inPlace = x.slice();
      activationForward(kind, inPlace, inPlace, cap);
      assert.deepEqual([...inPlace], [...y], `${kind} in place`);

      const dx = new Float32Array(x.length).fill(NaN);
      activationBackward(kind, y, dy, dx, cap);
      const want = new Float32Array(x.length);
      ref.activationBackward(kind, y, dy, want, cap);
      assertClose(dx, want, { what: `${kind} vs reference` });
      const alias = dy.slice();
      activationBackward(kind, y, alias, alias, cap);
      assertClose(alias, dx, { what: `${kind} dx = dy` });

      // Central differences in float64 away from the kinks at 0 and cap.
      const c = cap ?? 20,
        h = 1e-4;
      const f = (v: number) => {
        switch (kind) {
          case 'relu':
            return Math.max(v, 0);
          case 'clippedRelu':
            return Math.min(Math.max(v, 0), c);
          case 'tanh':
            return Math.tanh(v);
          case 'sigmoid':
            return 1 / (1 + Math.exp(-v));
          default:
            return v;
        }
      };
      for (let i = 0; i < x.length; i++) {
        if (Math.abs(x[i]) < 1e-3 || Math.abs(x[i] - c) < 1e-3) continue;
        const fd = (dy[i] * (f(x[i] + h) - f(x[i] - h))) / (2 * h);
        assertClose([dx[i]], [fd], { rtol: 1e-3, atol: 1e-4, what: `${kind} cap=${cap} dx[${i}] at x=${x[i]}` });
      }
    }
  }
});

test('axpy and scale', () => {
  const x = Float32Array.from([1, 2, 3]),
    y = Float32Array.from([10, 20, 30]);
  axpy(0.5, x, y);
  assert.deepEqual([...y], [10.5, 21, 31.5]);
  scale(-2, y);
  assert.deepEqual([...y], [-21, -42, -63]);
  assert.throws(() => axpy(1, x, new Float32Array(2)), /axpy/);
});
