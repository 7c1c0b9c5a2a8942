/**
 * Batch normalisation's kernels (Backend.channelCentredSquares, batchNormNormalise,
 * batchNormGradSums, batchNormInputGrad): the js backend against a float64 computation written
 * out per element here, and every other available backend against js bit for bit (the contract:
 * float64 arithmetic, one rounding, rows in order) — except a device backend (webgpu), which has
 * no float64 and is held to float32 sums (float32Allowance) — with arrays in and out of the
 * backend's memory, its results read back with its toHost, and channel counts with and without an
 * odd last channel. The layer's own gradients are checked
 * by finite differences in test/nn/layers-gradcheck.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomArray } from '../util/close.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { availableBackends } from '../nn/sequenceHelpers.ts';
import { put, toHost } from './backendArrays.ts';

const SHAPES = [
  [1, 1],
  [5, 3],
  [64, 8],
  [33, 16],
  [7, 17],
  [6272, 8],
] as const;

/**
 * Every kernel once on backend B, its outputs read back to the host; `place` puts an array where B
 * keeps it (its own memory) or leaves it a plain array. A device backend (webgpu) writes only its
 * own arrays, so there `own = false` leaves only the inputs plain (uploaded at each read).
 */
async function runAll(B: Backend, rows: number, C: number, seed: number, own: boolean) {
  const place = (a: Float32Array, output = false) => (own || (output && B.device) ? put(B, a) : a.slice());
  const x = place(randomArray(rows * C, seed)),
    mean = place(randomArray(C, seed + 1)),
    invStd = place(randomArray(C, seed + 2).map(Math.abs));
  const gamma = place(randomArray(C, seed + 3)),
    beta = place(randomArray(C, seed + 4)),
    dy = place(randomArray(rows * C, seed + 5));
  const sq = place(new Float32Array(C), true),
    xhat = place(new Float32Array(rows * C), true),
    y = place(new Float32Array(rows * C), true);
  const sums = place(new Float32Array(2 * C), true),
    dx = place(new Float32Array(rows * C), true);
  B.channelCentredSquares(x, mean, sq, rows, C);
  B.batchNormNormalise(x, mean, invStd, gamma, beta, xhat, y, rows, C);
  B.batchNormGradSums(dy, xhat, sums, rows, C);
  B.batchNormInputGrad(dy, xhat, gamma, invStd, sums, rows, dx, rows, C);
  await toHost(B, sq, xhat, y, sums, dx);
  return { x, mean, invStd, gamma, beta, dy, sq, xhat, y, sums, dx };
}

test('js batch-norm kernels: each value the float64 formula rounded once', async () => {
  for (const [rows, C] of SHAPES) {
    const r = await runAll(jsBackend, rows, C, 7, false);
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

type Outputs = 'sq' | 'xhat' | 'y' | 'sums' | 'dx';
type Run = Awaited<ReturnType<typeof runAll>>;

/**
 * What a float32 backend may differ from js by, per element of each output: WGSL has no float64,
 * so webgpu sums in float32 (src/kernels/webgpu/batchNorm.ts) and each result is judged against
 * the magnitudes it is made of, as in test/webgpu/batchnorm.test.ts: sums within 2e-6·Σ|terms|,
 * x̂ 1e-6 relative, y 1e-6·(|x̂·γ| + |β|), dx 2e-6·|γ·invStd/M|·(M·|dy| + Σ|dy| + |x̂|·Σ|dy·x̂|)
 * (its own sums in it).
 */
function float32Allowance(w: Run, rows: number, C: number): Record<Outputs, (i: number) => number> {
  const absSq = new Float64Array(C),
    absDy = new Float64Array(C),
    absDyXhat = new Float64Array(C);
  for (let i = 0; i < rows * C; i++) {
    const c = i % C;
    absSq[c]! += (w.x[i]! - w.mean[c]!) ** 2;
    absDy[c]! += Math.abs(w.dy[i]!);
    absDyXhat[c]! += Math.abs(w.dy[i]! * w.xhat[i]!);
  }
  const k = (c: number) => Math.abs((w.gamma[c]! * w.invStd[c]!) / rows);
  return {
    sq: (c) => 2e-6 * absSq[c]!,
    xhat: (i) => 1e-6 * Math.abs(w.xhat[i]!),
    y: (i) => 1e-6 * (Math.abs(w.xhat[i]! * w.gamma[i % C]!) + Math.abs(w.beta[i % C]!)),
    sums: (j) => 2e-6 * (j < C ? absDy[j]! : absDyXhat[j - C]!),
    dx: (i) => 2e-6 * k(i % C) * (rows * Math.abs(w.dy[i]!) + absDy[i % C]! + Math.abs(w.xhat[i]!) * absDyXhat[i % C]!),
  };
}

for (const B of (await availableBackends()).filter((b) => b.name !== 'js')) {
  // the CPU backends keep the contract's float64 bit for bit; a device backend computes in float32
  const bitwise = !B.device;
  test(`${B.name} batch-norm kernels equal js ${bitwise ? 'bit for bit' : 'within float32 sums'}, arrays in and out of its memory`, async () => {
    let seed = 11;
    for (const [rows, C] of SHAPES) {
      const want = await runAll(jsBackend, rows, C, seed, false);
      const allowed = float32Allowance(want, rows, C);
      for (const own of [true, false]) {
        const got = await runAll(B, rows, C, seed, own);
        for (const k of ['sq', 'xhat', 'y', 'sums', 'dx'] as const) {
          const what = `${B.name} ${k}, ${rows}×${C}, ${own ? 'its memory' : 'plain arrays'}`;
          if (bitwise) {
            assert.deepEqual(Array.from(got[k]), Array.from(want[k]), what);
            continue;
          }
          for (let i = 0; i < want[k].length; i++) {
            const err = Math.abs(got[k][i]! - want[k][i]!);
            if (!(err <= allowed[k](i)))
              assert.fail(`${what}[${i}]: ${got[k][i]}, js ${want[k][i]} (allowed ${allowed[k](i)})`);
          }
        }
      }
      seed += 10;
    }
  });
}

for (const B of (await availableBackends()).filter((b) => b.name !== 'js')) {
  test(`${B.name} batch-norm kernels refuse an array too short for rows × C (naming it), before reading past it`, () => {
    // arrays in B's memory: a device backend refuses a plain array as an output before checking sizes;
    // webgpu words the sizes its own way ("floats", the call's shape), naming the array all the same
    const f = (n: number) => B.alloc(n);
    assert.throws(
      () => B.channelCentredSquares(f(16), f(3), f(4), 4, 4),
      /channelCentredSquares: mean has 3 (values|floats), .*needs 4/,
    );
    assert.throws(
      () => B.batchNormNormalise(f(16), f(4), f(4), f(3), f(4), f(16), f(16), 4, 4),
      /batchNormNormalise: gamma has 3 (values|floats), .*needs 4/,
    );
    assert.throws(
      () => B.batchNormGradSums(f(16), f(16), f(4), 4, 4),
      /batchNormGradSums: out has 4 (values|floats), .*needs 8/,
    );
    assert.throws(
      () => B.batchNormInputGrad(f(16), f(16), f(4), f(4), f(8), 4, f(15), 4, 4),
      /batchNormInputGrad: dx has 15 (values|floats), .*needs 16/,
    );
    assert.throws(
      () => B.dropoutForward(1, 2, 0, 8, 0.5, 2, f(8), f(7), f(8)),
      /dropoutForward: (mask has 7 values, needs 8|n = 8 but .*mask 7,)/,
    );
  });
}
