import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref, POOL_CASES, poolGeometry, poolSizes, describePool, dot64 } from './reference.ts';
import { maxPoolForward, maxPoolBackward, avgPoolForward, avgPoolBackward } from '../../src/kernels/js/pool.ts';

test('max pool forward matches the reference, argmax included', () => {
  POOL_CASES.forEach((g, i) => {
    const s = poolSizes(g);
    const x = randomArray(s.x, 10 + i);
    const y = new Float32Array(s.y).fill(NaN),
      am = new Int32Array(s.y).fill(-7);
    const wy = new Float32Array(s.y),
      wam = new Int32Array(s.y);
    maxPoolForward(x, y, am, g);
    ref.maxPoolForward(x, wy, wam, g);
    assert.deepEqual([...y], [...wy], `${describePool(g)} y`);
    assert.deepEqual([...am], [...wam], `${describePool(g)} argmax`);
  });
});

test('max pool: padding never wins, ties take the first cell in (kh, kw) order', () => {
  // All negative, padded on every side: a zero from padding would win if it were read.
  const g = poolGeometry(1, 4, 4, 2, 3, 3, 2, 2, [1, 1, 1, 1]);
  const s = poolSizes(g);
  const x = randomArray(s.x, 3).map((v) => -1 - Math.abs(v));
  const y = new Float32Array(s.y),
    am = new Int32Array(s.y);
  maxPoolForward(x, y, am, g);
  assert.ok(
    y.every((v) => v < 0),
    'every max is a real (negative) input',
  );
  for (let o = 0; o < s.y; o++) assert.equal(y[o], x[am[o]]);

  // Constant input: every window ties; the argmax is the window's first in-image cell.
  const c = new Float32Array(s.x).fill(0.5);
  maxPoolForward(c, y, am, g);
  const C = g.C;
  for (let oh = 0; oh < g.OH; oh++)
    for (let ow = 0; ow < g.OW; ow++)
      for (let ch = 0; ch < C; ch++) {
        const ih = Math.max(0, oh * g.strideH - g.padTop),
          iw = Math.max(0, ow * g.strideW - g.padLeft);
        assert.equal(am[(oh * g.OW + ow) * C + ch], (ih * g.W + iw) * C + ch);
      }
});

test('max pool backward matches the reference and overwrites dx (overlapping windows add up)', () => {
  POOL_CASES.forEach((g, i) => {
    const s = poolSizes(g);
    const x = randomArray(s.x, 20 + i),
      dy = randomArray(s.y, 30 + i);
    const y = new Float32Array(s.y),
      am = new Int32Array(s.y);
    maxPoolForward(x, y, am, g);
    const dx = new Float32Array(s.x).fill(NaN),
      want = new Float32Array(s.x);
    maxPoolBackward(dy, am, dx, g);
    ref.maxPoolBackward(dy, am, want, g);
    assertClose(dx, want, { what: `${describePool(g)} dx` });
  });
  // 3×3 stride 1 windows over a peak: the peak collects every window's gradient.
  const g = poolGeometry(1, 4, 4, 1, 3, 3, 1, 1, 'valid');
  const x = new Float32Array(16);
  x[5] = 1;
  const y = new Float32Array(4),
    am = new Int32Array(4),
    dx = new Float32Array(16).fill(NaN);
  maxPoolForward(x, y, am, g);
  maxPoolBackward(Float32Array.from([1, 2, 3, 4]), am, dx, g);
  assert.equal(dx[5], 10);
  assert.equal(
    dx.reduce((a, b) => a + b, 0),
    10,
  );
});

test('max pool propagates NaN like PyTorch', () => {
  const g = poolGeometry(1, 2, 2, 1, 2, 2, 1, 1, 'valid');
  const y = new Float32Array(1),
    am = new Int32Array(1);
  maxPoolForward(Float32Array.from([1, NaN, 3, 2]), y, am, g);
  assert.ok(Number.isNaN(y[0]));
  assert.equal(am[0], 1);
});

test('avg pool forward and backward match the reference (count excludes padding)', () => {
  POOL_CASES.forEach((g, i) => {
    const s = poolSizes(g);
    const x = randomArray(s.x, 40 + i),
      dy = randomArray(s.y, 50 + i);
    const y = new Float32Array(s.y).fill(NaN),
      wy = new Float32Array(s.y);
    avgPoolForward(x, y, g);
    ref.avgPoolForward(x, wy, g);
    assertClose(y, wy, { what: `${describePool(g)} y` });
    const dx = new Float32Array(s.x).fill(NaN),
      wdx = new Float32Array(s.x);
    avgPoolBackward(dy, dx, g);
    ref.avgPoolBackward(dy, wdx, g);
    assertClose(dx, wdx, { what: `${describePool(g)} dx` });
    // Adjoint identity on the js kernels themselves.
    assertClose([dot64(dx, x)], [dot64(dy, y)], { rtol: 1e-5, atol: 1e-5, what: `${describePool(g)} ⟨dx,x⟩` });
  });
  // Ones with padding: every mean is exactly 1 when padding is excluded.
  const g = poolGeometry(1, 3, 3, 1, 3, 3, 1, 1, [1, 1, 1, 1]);
  const y = new Float32Array(9);
  avgPoolForward(new Float32Array(9).fill(1), y, g);
  assert.deepEqual([...y], new Array(9).fill(1));
});
