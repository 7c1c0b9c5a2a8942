import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import {
  referenceBackend as ref,
  CONV_CASES,
  convGeometry,
  convSizes,
  describeConv,
  dot64,
  absDot64,
} from './reference.ts';
import { conv2dForward, conv2dBackwardData, conv2dBackwardFilter } from '../../src/kernels/js/conv2d.ts';
import type { Conv2DGeometry } from '../../src/kernels/convKernels.ts';

// Each case runs with the default im2col budget (one chunk) and with a budget of 3 rows so the
// chunking over output pixels, including a short last chunk, is exercised.
function budgets(g: Conv2DGeometry): number[] {
  return [Infinity, 3 * g.KH * g.KW * g.C];
}

/** Tolerance for sums of `terms` products of values in [-1, 1). */
const tol = (terms: number) => ({ rtol: 1e-5, atol: 2e-6 * (1 + Math.sqrt(terms)) });

test('conv2d forward matches the reference (with and without bias, chunked)', () => {
  CONV_CASES.forEach((g, i) => {
    const s = convSizes(g);
    const x = randomArray(s.x, 10 + i),
      w = randomArray(s.w, 20 + i),
      b = randomArray(g.F, 30 + i);
    for (const bias of [null, b]) {
      const want = new Float32Array(s.y);
      ref.conv2dForward(x, w, bias, want, g);
      for (const budget of budgets(g)) {
        const y = new Float32Array(s.y).fill(NaN);
        conv2dForward(x, w, bias, y, g, budget === Infinity ? undefined : budget);
        assertClose(y, want, {
          ...tol(g.KH * g.KW * g.C),
          what: `${describeConv(g)} bias=${!!bias} budget=${budget} y`,
        });
      }
    }
  });
});

test('conv2d backward data matches the reference and overwrites dx', () => {
  CONV_CASES.forEach((g, i) => {
    const s = convSizes(g);
    const w = randomArray(s.w, 40 + i),
      dy = randomArray(s.y, 50 + i);
    const want = new Float32Array(s.x);
    ref.conv2dBackwardData(dy, w, want, g);
    for (const budget of budgets(g)) {
      const dx = new Float32Array(s.x).fill(NaN);
      conv2dBackwardData(dy, w, dx, g, budget === Infinity ? undefined : budget);
      assertClose(dx, want, { ...tol(g.KH * g.KW * g.F), what: `${describeConv(g)} budget=${budget} dx` });
    }
  });
});

test('conv2d backward filter matches the reference and accumulates dw, db', () => {
  CONV_CASES.forEach((g, i) => {
    const s = convSizes(g);
    const x = randomArray(s.x, 60 + i),
      dy = randomArray(s.y, 70 + i);
    const dw0 = randomArray(s.w, 80 + i),
      db0 = randomArray(g.F, 90 + i);
    const wantW = dw0.slice(),
      wantB = db0.slice();
    ref.conv2dBackwardFilter(x, dy, wantW, wantB, g);
    const terms = g.N * g.OH * g.OW;
    for (const budget of budgets(g)) {
      const dw = dw0.slice(),
        db = db0.slice();
      conv2dBackwardFilter(x, dy, dw, db, g, budget === Infinity ? undefined : budget);
      assertClose(dw, wantW, { ...tol(terms), what: `${describeConv(g)} budget=${budget} dw` });
      assertClose(db, wantB, { ...tol(terms), what: `${describeConv(g)} budget=${budget} db` });
      const dwOnly = dw0.slice();
      conv2dBackwardFilter(x, dy, dwOnly, null, g, budget === Infinity ? undefined : budget);
      assertClose(dwOnly, wantW, { ...tol(terms), what: `${describeConv(g)} budget=${budget} dw without db` });
    }
  });
});

test('conv2d js backward passes satisfy the adjoint identity of the js forward', () => {
  CONV_CASES.forEach((g, i) => {
    const s = convSizes(g);
    const x = randomArray(s.x, 110 + i),
      w = randomArray(s.w, 120 + i),
      dy = randomArray(s.y, 130 + i);
    const y = new Float32Array(s.y);
    conv2dForward(x, w, null, y, g);
    const dx = new Float32Array(s.x),
      dw = new Float32Array(s.w);
    conv2dBackwardData(dy, w, dx, g);
    conv2dBackwardFilter(x, dy, dw, null, g);
    const lhs = dot64(dy, y),
      eps = 1e-5 * absDot64(dy, y) + 1e-6;
    assert.ok(Math.abs(dot64(dx, x) - lhs) <= eps, `${describeConv(g)}: ⟨dx,x⟩ ${dot64(dx, x)} vs ⟨dy,y⟩ ${lhs}`);
    assert.ok(Math.abs(dot64(dw, w) - lhs) <= eps, `${describeConv(g)}: ⟨dw,w⟩ ${dot64(dw, w)} vs ⟨dy,y⟩ ${lhs}`);
  });
});

test('conv2d writes only its own region of views into larger buffers', () => {
  const g = convGeometry(2, 5, 6, 3, 3, 3, 4, 2, 1, 'same');
  const s = convSizes(g);
  const x = randomArray(s.x, 1),
    w = randomArray(s.w, 2),
    dy = randomArray(s.y, 3);
  const ybuf = new Float32Array(s.y + 10).fill(5),
    dxbuf = new Float32Array(s.x + 10).fill(5);
  conv2dForward(x, w, null, ybuf.subarray(4, 4 + s.y), g);
  conv2dBackwardData(dy, w, dxbuf.subarray(4, 4 + s.x), g);
  for (const buf of [ybuf, dxbuf]) {
    assert.ok(buf.subarray(0, 4).every((v) => v === 5) && buf.subarray(buf.length - 6).every((v) => v === 5));
  }
});
