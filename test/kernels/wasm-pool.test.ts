import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { referenceBackend as ref, POOL_CASES, poolGeometry, poolSizes, describePool } from './reference.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { wasmBackend, Placer, PLACEMENTS } from './wasmHelpers.ts';
import type { Pool2DGeometry } from '../../src/kernels/poolKernels.ts';

const b = await wasmBackend();

const CASES: Pool2DGeometry[] = [
  ...POOL_CASES,
  poolGeometry(3, 26, 26, 32, 2, 2, 2, 2, 'valid'), // the network's first pool (small batch)
  poolGeometry(2, 11, 11, 64, 2, 2, 2, 2, 'valid'), // and its second (odd size: last row/column dropped)
  poolGeometry(1, 5, 5, 7, 4, 4, 1, 1, [3, 3, 3, 3]), // windows wholly in the padding
];

test('wasm max pool forward equals the reference exactly, argmax included', () => {
  CASES.forEach((g, i) => {
    const s = poolSizes(g);
    const x = randomArray(s.x, 10 + i);
    const wy = new Float32Array(s.y),
      wam = new Int32Array(s.y);
    ref.maxPoolForward(x, wy, wam, g);
    for (const where of PLACEMENTS) {
      const p = new Placer(b, where);
      const y = p.f32(new Float32Array(s.y).fill(NaN)),
        am = p.i32(new Int32Array(s.y).fill(-7));
      b.maxPoolForward(p.f32(x), y, am, g);
      assert.deepEqual([...y], [...wy], `${describePool(g)} ${where} y`);
      assert.deepEqual([...am], [...wam], `${describePool(g)} ${where} argmax`);
    }
  });
});

test('wasm max pool: ties take the first cell, NaN wins, padding never wins', () => {
  const g = poolGeometry(1, 4, 4, 8, 3, 3, 2, 2, [1, 1, 1, 1]);
  const s = poolSizes(g);
  const x = randomArray(s.x, 3).map((v) => -1 - Math.abs(v));
  x[(1 * 4 + 1) * 8 + 5] = NaN;
  for (const input of [x, new Float32Array(s.x).fill(0.5)]) {
    const y = new Float32Array(s.y),
      am = new Int32Array(s.y),
      wy = new Float32Array(s.y),
      wam = new Int32Array(s.y);
    b.maxPoolForward(input, y, am, g);
    jsBackend.maxPoolForward(input, wy, wam, g); // the naive reference does not model NaN
    assert.deepEqual([...am], [...wam]);
    assert.deepEqual([...y].map(String), [...wy].map(String));
  }
});

test('wasm max pool backward and avg pool forward/backward match the reference', () => {
  CASES.forEach((g, i) => {
    const s = poolSizes(g);
    const x = randomArray(s.x, 20 + i),
      dy = randomArray(s.y, 30 + i);
    const y = new Float32Array(s.y),
      am = new Int32Array(s.y);
    ref.maxPoolForward(x, y, am, g);
    const wdx = new Float32Array(s.x),
      wya = new Float32Array(s.y),
      wdxa = new Float32Array(s.x);
    ref.maxPoolBackward(dy, am, wdx, g);
    ref.avgPoolForward(x, wya, g);
    ref.avgPoolBackward(dy, wdxa, g);
    for (const where of PLACEMENTS) {
      const p = new Placer(b, where);
      const dx = p.f32(new Float32Array(s.x).fill(NaN));
      b.maxPoolBackward(p.f32(dy), p.i32(am), dx, g);
      assertClose(dx, wdx, { what: `${describePool(g)} ${where} max dx` });
      const ya = p.f32(new Float32Array(s.y).fill(NaN));
      b.avgPoolForward(p.f32(x), ya, g);
      assertClose(ya, wya, { what: `${describePool(g)} ${where} avg y` });
      const dxa = p.f32(new Float32Array(s.x).fill(NaN));
      b.avgPoolBackward(p.f32(dy), dxa, g);
      assertClose(dxa, wdxa, { what: `${describePool(g)} ${where} avg dx` });
    }
  });
});
