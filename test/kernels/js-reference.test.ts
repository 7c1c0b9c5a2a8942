// The naive reference kernels must be trusted before anything is tested against them: hand-computed
// cases for the forwards, and finite differences / adjoint identities for the backwards.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import {
  referenceBackend as ref,
  CONV_CASES,
  POOL_CASES,
  convGeometry,
  poolGeometry,
  convSizes,
  poolSizes,
  describeConv,
  describePool,
  dot64,
  absDot64,
} from './reference.ts';

const f32 = (values: number[]) => Float32Array.from(values);

test('reference gemm: hand-computed product in all four storage layouts, alpha and beta', () => {
  // A = [[1,2,3],[4,5,6]], B = [[7,8],[9,10],[11,12]], AB = [[58,64],[139,154]]
  const A = f32([1, 2, 3, 4, 5, 6]),
    At = f32([1, 4, 2, 5, 3, 6]);
  const B = f32([7, 8, 9, 10, 11, 12]),
    Bt = f32([7, 9, 11, 8, 10, 12]);
  for (const [ta, tb] of [
    [false, false],
    [true, false],
    [false, true],
    [true, true],
  ] as const) {
    const C = f32([1, 2, 3, 4]);
    ref.gemm(ta, tb, 2, 2, 3, 2, ta ? At : A, tb ? Bt : B, 0.5, C);
    assert.deepEqual([...C], [116.5, 129, 279.5, 310], `transA=${ta} transB=${tb}`);
  }
  const C = f32([NaN, NaN, NaN, NaN]);
  ref.gemm(false, false, 2, 2, 3, 1, A, B, 0, C);
  assert.deepEqual([...C], [58, 64, 139, 154]);
});

test('reference conv2d forward: hand-computed cases', () => {
  // x = 1..9 (3×3×1), w = [[1,0],[0,−1]]: y[i,j] = x[i,j] − x[i+1,j+1]
  const x = f32([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  const w = f32([1, 0, 0, -1]);
  const valid = convGeometry(1, 3, 3, 1, 2, 2, 1, 1, 1, 'valid');
  const y = new Float32Array(4);
  ref.conv2dForward(x, w, null, y, valid);
  assert.deepEqual([...y], [-4, -4, -4, -4]);
  // 'same' for a 2×2 kernel pads one row/column after: the last row/column sees zeros.
  const same = convGeometry(1, 3, 3, 1, 2, 2, 1, 1, 1, 'same');
  assert.equal(same.padTop, 0);
  const y2 = new Float32Array(9);
  ref.conv2dForward(x, w, f32([10]), y2, same);
  assert.deepEqual([...y2], [6, 6, 13, 6, 6, 16, 17, 18, 19]);
  // Stride 2 with padding 1 before: windows start at −1 and 1.
  const strided = convGeometry(1, 3, 3, 1, 2, 2, 1, 2, 2, [1, 0, 1, 0]);
  assert.equal(strided.OH, 2);
  const y3 = new Float32Array(4);
  ref.conv2dForward(x, w, null, y3, strided);
  // (0,0): x[-1,-1]·1 − x[0,0] = −1; (0,1): x[-1,1]·1 − x[0,2] = −3; (1,0): x[1,-1] − x[2,0] = −7; (1,1): x[1,1] − x[2,2] = 5 − 9
  assert.deepEqual([...y3], [-1, -3, -7, -4]);
  // Channels and filters: 1×1, C=2, F=3, w[c,f]; one pixel x = [2, 3].
  const wcf = f32([1, 2, 3, 4, 5, 6]);
  const y4 = new Float32Array(3);
  ref.conv2dForward(f32([2, 3]), wcf, null, y4, convGeometry(1, 1, 1, 2, 1, 1, 3, 1, 1, 'valid'));
  assert.deepEqual([...y4], [2 + 12, 4 + 15, 6 + 18]);
});

test('reference pools: hand-computed max/avg, argmax, padding never wins, ties take the first', () => {
  const x = f32([1, 5, 2, 0, 3, 4, 8, 1, 0, 9, 7, 7, 6, 2, 7, 7]); // 4×4×1
  const g = poolGeometry(1, 4, 4, 1, 2, 2, 2, 2, 'valid');
  const y = new Float32Array(4),
    am = new Int32Array(4);
  ref.maxPoolForward(x, y, am, g);
  assert.deepEqual([...y], [5, 8, 9, 7]);
  assert.deepEqual([...am], [1, 6, 9, 10]); // the 7s at 10, 11, 14, 15 tie: first wins
  ref.avgPoolForward(x, y, g);
  assert.deepEqual([...y], [13 / 4, 11 / 4, 17 / 4, 28 / 4].map(Math.fround));

  const neg = f32([-3, -2, -5, -4]); // 2×2×1, pad 1, window 2×2 stride 1 → 3×3
  const gp = poolGeometry(1, 2, 2, 1, 2, 2, 1, 1, [1, 1, 1, 1]);
  const yp = new Float32Array(9),
    ap = new Int32Array(9);
  ref.maxPoolForward(neg, yp, ap, gp);
  assert.deepEqual([...yp], [-3, -2, -2, -3, -2, -2, -5, -4, -4]);
  assert.deepEqual([...ap], [0, 1, 1, 0, 1, 1, 2, 3, 3]);
  // count_include_pad = false: a corner window holds one real cell, so its mean is that cell.
  ref.avgPoolForward(neg, yp, gp);
  assertClose(yp, [-3, -2.5, -2, -4, -3.5, -3, -5, -4.5, -4]);
});

/** ⟨dy, f(x + h·e_j)⟩ − ⟨dy, f(x − h·e_j)⟩ over 2h, with the perturbation done in float32 exactly. */
function centralDiff(
  f: (x: Float32Array) => Float32Array,
  x: Float32Array,
  dy: Float32Array,
  j: number,
  h: number,
): number {
  const saved = x[j];
  x[j] = saved + h;
  const up = x[j];
  const lp = dot64(dy, f(x));
  x[j] = saved - h;
  const down = x[j];
  const lm = dot64(dy, f(x));
  x[j] = saved;
  return (lp - lm) / (up - down);
}

test('reference conv2d backward data/filter: adjoint identity and central differences', () => {
  CONV_CASES.forEach((g, i) => {
    const what = describeConv(g);
    const s = convSizes(g);
    const x = randomArray(s.x, 11 + i),
      w = randomArray(s.w, 101 + i),
      dy = randomArray(s.y, 201 + i);
    const y = new Float32Array(s.y);
    ref.conv2dForward(x, w, null, y, g);
    const dx = new Float32Array(s.x).fill(NaN); // overwritten, so stale contents must not matter
    ref.conv2dBackwardData(dy, w, dx, g);
    const dw = new Float32Array(s.w),
      db = new Float32Array(g.F);
    ref.conv2dBackwardFilter(x, dy, dw, db, g);
    // conv is bilinear: ⟨dy, conv(x, w)⟩ = ⟨dx, x⟩ = ⟨dw, w⟩; the bias adds ⟨db, b⟩.
    const lhs = dot64(dy, y),
      tol = 1e-5 * absDot64(dy, y) + 1e-6;
    assert.ok(Math.abs(dot64(dx, x) - lhs) <= tol, `${what}: ⟨dx,x⟩ ${dot64(dx, x)} vs ⟨dy,y⟩ ${lhs}`);
    assert.ok(Math.abs(dot64(dw, w) - lhs) <= tol, `${what}: ⟨dw,w⟩ ${dot64(dw, w)} vs ⟨dy,y⟩ ${lhs}`);
    const b = randomArray(g.F, 301 + i),
      yb = new Float32Array(s.y);
    ref.conv2dForward(x, w, b, yb, g);
    const lb = dot64(dy, yb);
    assert.ok(Math.abs(lb - lhs - dot64(db, b)) <= 1e-5 * absDot64(dy, yb) + 1e-6, `${what}: bias gradient`);

    // A few elements by central differences of the forward (linear in x and w, so a large step is exact).
    const fx = (xx: Float32Array) => {
      const out = new Float32Array(s.y);
      ref.conv2dForward(xx, w, null, out, g);
      return out;
    };
    const fw = (ww: Float32Array) => {
      const out = new Float32Array(s.y);
      ref.conv2dForward(x, ww, null, out, g);
      return out;
    };
    for (let t = 0; t < 3; t++) {
      const jx = (t * 7919 + i) % s.x,
        jw = (t * 104729 + i) % s.w;
      assertClose([centralDiff(fx, x, dy, jx, 0.25)], [dx[jx]], { atol: 2e-4, rtol: 1e-3, what: `${what} dx` });
      assertClose([centralDiff(fw, w, dy, jw, 0.25)], [dw[jw]], { atol: 2e-4, rtol: 1e-3, what: `${what} dw` });
    }
  });
});

test('reference pools backward: central differences (max) and adjoint identity (avg)', () => {
  POOL_CASES.forEach((g, i) => {
    const what = describePool(g);
    const s = poolSizes(g);
    // Distinct values spaced 1/n apart, shuffled: a perturbation of a quarter spacing cannot change a max.
    const x = new Float32Array(s.x);
    const r = randomArray(s.x, 401 + i);
    const order = Array.from({ length: s.x }, (_, k) => k).sort((a, b) => r[a] - r[b]);
    order.forEach((k, rank) => {
      x[k] = rank / s.x - 0.5;
    });
    const dy = randomArray(s.y, 501 + i);
    const y = new Float32Array(s.y),
      am = new Int32Array(s.y);
    ref.maxPoolForward(x, y, am, g);
    const dx = new Float32Array(s.x).fill(NaN);
    ref.maxPoolBackward(dy, am, dx, g);
    const f = (xx: Float32Array) => {
      const out = new Float32Array(s.y);
      ref.maxPoolForward(xx, out, new Int32Array(s.y), g);
      return out;
    };
    const h = 0.25 / s.x;
    const count = Math.min(s.x, 40);
    for (let t = 0; t < count; t++) {
      const j = s.x <= 40 ? t : (t * 7919 + i) % s.x;
      assertClose([centralDiff(f, x, dy, j, h)], [dx[j]], { atol: 1e-5, rtol: 1e-5, what: `${what} max dx[${j}]` });
    }
    ref.avgPoolForward(x, y, g);
    ref.avgPoolBackward(dy, dx, g);
    const lhs = dot64(dy, y);
    assert.ok(Math.abs(dot64(dx, x) - lhs) <= 1e-5 * absDot64(dy, y) + 1e-6, `${what}: avg ⟨dx,x⟩ vs ⟨dy,y⟩`);
  });
});
