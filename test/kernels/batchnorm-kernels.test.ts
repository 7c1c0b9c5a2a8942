/**
 * Batch normalisation's kernels (Backend.channelCentredSquares, batchNormNormalise,
 * batchNormGradSums, batchNormInputGrad): the js backend against a float64 computation written
 * out per element here, and every other available backend against js bit for bit (the contract:
 * float64 arithmetic, one rounding, rows in order), with arrays in and out of the backend's memory
 * and channel counts with and without an odd last channel. The layer's own gradients are checked
 * by finite differences in test/nn/layers-gradcheck.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomArray } from '../util/close.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { availableBackends } from '../nn/sequenceHelpers.ts';

const SHAPES = [
  [1, 1],
  [5, 3],
  [64, 8],
  [33, 16],
  [7, 17],
  [6272, 8],
] as const;

/** Every kernel once on backend B; `place` puts an input where B keeps it (its own memory) or leaves it. */
function runAll(B: Backend, rows: number, C: number, seed: number, own: boolean) {
  const place = (a: Float32Array) => {
    if (!own) return a.slice();
    const p = B.alloc(a.length);
    p.set(a);
    return p;
  };
  const x = place(randomArray(rows * C, seed)),
    mean = place(randomArray(C, seed + 1)),
    invStd = place(randomArray(C, seed + 2).map(Math.abs));
  const gamma = place(randomArray(C, seed + 3)),
    beta = place(randomArray(C, seed + 4)),
    dy = place(randomArray(rows * C, seed + 5));
  const sq = place(new Float32Array(C)),
    xhat = place(new Float32Array(rows * C)),
    y = place(new Float32Array(rows * C));
  const sums = place(new Float32Array(2 * C)),
    dx = place(new Float32Array(rows * C));
  B.channelCentredSquares(x, mean, sq, rows, C);
  B.batchNormNormalise(x, mean, invStd, gamma, beta, xhat, y, rows, C);
  B.batchNormGradSums(dy, xhat, sums, rows, C);
  B.batchNormInputGrad(dy, xhat, gamma, invStd, sums, rows, dx, rows, C);
  return { x, mean, invStd, gamma, beta, dy, sq, xhat, y, sums, dx };
}

test('js batch-norm kernels: each value the float64 formula rounded once', () => {
  for (const [rows, C] of SHAPES) {
    const r = runAll(jsBackend, rows, C, 7, false);
    for (let c = 0; c < C; c++) {
      let sq = 0,
        sdy = 0,
        sdx = 0;
      for (let i = c; i < rows * C; i += C) {
        sq += (r.x[i]! - r.mean[c]!) ** 2;
        const h = (r.x[i]! - r.mean[c]!) * r.invStd[c]!;
        assert.equal(r.xhat[i], Math.fround(h));
        assert.equal(r.y[i], Math.fround(h * r.gamma[c]! + r.beta[c]!));
        sdy += r.dy[i]!;
        sdx += r.dy[i]! * r.xhat[i]!;
      }
      assert.equal(r.sq[c], Math.fround(sq), `Σ(x − mean)² of channel ${c}, ${rows}×${C}`);
      assert.equal(r.sums[c], Math.fround(sdy));
      assert.equal(r.sums[C + c], Math.fround(sdx));
      const k = (r.gamma[c]! * r.invStd[c]!) / rows;
      for (let i = c; i < rows * C; i += C) {
        assert.equal(r.dx[i], Math.fround(k * (rows * r.dy[i]! - r.sums[c]! - r.xhat[i]! * r.sums[C + c]!)));
      }
    }
  }
});

for (const B of (await availableBackends()).filter((b) => b.name !== 'js')) {
  test(`${B.name} batch-norm kernels equal js bit for bit, arrays in and out of its memory`, () => {
    let seed = 11;
    for (const [rows, C] of SHAPES) {
      const want = runAll(jsBackend, rows, C, seed, false);
      for (const own of [true, false]) {
        const got = runAll(B, rows, C, seed, own);
        for (const k of ['sq', 'xhat', 'y', 'sums', 'dx'] as const) {
          assert.deepEqual(
            Array.from(got[k]),
            Array.from(want[k]),
            `${B.name} ${k}, ${rows}×${C}, ${own ? 'its memory' : 'plain arrays'}`,
          );
        }
      }
      seed += 10;
    }
  });
}

for (const B of (await availableBackends()).filter((b) => b.name !== 'js')) {
  test(`${B.name} batch-norm kernels refuse an array too short for rows × C (naming it), before reading past it`, () => {
    const f = (n: number) => new Float32Array(n);
    assert.throws(
      () => B.channelCentredSquares(f(16), f(3), f(4), 4, 4),
      /channelCentredSquares: mean has 3 values, needs 4/,
    );
    assert.throws(
      () => B.batchNormNormalise(f(16), f(4), f(4), f(3), f(4), f(16), f(16), 4, 4),
      /batchNormNormalise: gamma has 3 values, needs 4/,
    );
    assert.throws(() => B.batchNormGradSums(f(16), f(16), f(4), 4, 4), /batchNormGradSums: out has 4 values, needs 8/);
    assert.throws(
      () => B.batchNormInputGrad(f(16), f(16), f(4), f(4), f(8), 4, f(15), 4, 4),
      /batchNormInputGrad: dx has 15 values, needs 16/,
    );
    assert.throws(
      () => B.dropoutForward(1, 2, 0, 8, 0.5, 2, f(8), f(7), f(8)),
      /dropoutForward: mask has 7 values, needs 8/,
    );
  });
}
