/**
 * The webgpu reductions against the CPU's: the squared norm (sumOfSquares of clipGradNorm.ts, summed
 * over several arrays) within 1e-5 of the float64 sum — float32 partial sums, all terms positive —
 * and the non-finite check against allFinite, on arrays from one element to wider than the first
 * pass's 1024 workgroups of 256 reach in one sweep (so threads take several elements), at offsets,
 * with NaN and ±Inf planted at the last element.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { sumOfSquares as cpuSumOfSquares } from '../../src/optim/clipGradNorm.ts';
import { allFinite } from '../../src/parallel/nonFinite.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { anyNonFinite, sumOfSquares } from '../../src/kernels/webgpu/reductions.ts';
import { random } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

const SIZES = [1, 255, 256, 257, 70_000, 1024 * 256 + 300];

test('sumOfSquares: one array and several together equal the float64 sum', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const out = gpuView(gpu.array(3), 2, 1);
  for (const n of SIZES) {
    const x = random(n, n, -3, 3);
    const gx = gpuView(gpu.upload(new Float32Array([5, ...x])), 1, n);
    sumOfSquares(gpu, [gx], out);
    const [got] = await gpu.read(out);
    const want = cpuSumOfSquares(x);
    assert.ok(Math.abs(got![0]! - want) <= 1e-5 * want, `n=${n}: ${got![0]} vs ${want}`);
  }
  const arrays = SIZES.map((n) => random(n, 3 * n, -2, 2));
  // views of one buffer, and an empty array among them
  const flat = gpu.upload(new Float32Array(arrays.flatMap((a) => [...a])));
  let at = 0;
  const views = arrays.map((a) => gpuView(flat, (at += a.length) - a.length, a.length));
  sumOfSquares(gpu, [...views, gpuView(flat, 0, 0)], out);
  const [got] = await gpu.read(out);
  const want = arrays.reduce((s, a) => s + cpuSumOfSquares(a), 0);
  assert.ok(Math.abs(got![0]! - want) <= 1e-5 * want, `all together: ${got![0]} vs ${want}`);
  sumOfSquares(gpu, [], out);
  assert.equal((await gpu.read(out))[0]![0], 0, 'no arrays: 0');
});

test('anyNonFinite: NaN, +Inf and −Inf at the last element (of one array among several) are found', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const flag = gpuView(gpu.upload(new Float32Array([9, 9])), 1, 1);
  for (const n of SIZES) {
    const x = random(n, n, -1e30, 1e30);
    const gx = gpuView(gpu.upload(new Float32Array([Number.NaN, ...x, Number.NaN])), 1, n);
    const clean = gpu.upload(random(100, 1));
    anyNonFinite(gpu, [clean, gx], flag);
    assert.equal((await gpu.read(flag))[0]![0], allFinite(x) ? 0 : 1, `n=${n} finite (NaN beside the view)`);
    for (const bad of [Number.NaN, Infinity, -Infinity]) {
      x[n - 1] = bad;
      gpu.upload(x, gx);
      anyNonFinite(gpu, [clean, gx], flag);
      assert.equal((await gpu.read(flag))[0]![0], 1, `n=${n} ${bad} at the last element`);
      assert.equal(allFinite(x), false);
    }
  }
  // the largest finite float32 is finite
  anyNonFinite(gpu, [gpu.upload(new Float32Array([3.4028234663852886e38, -3.4028234663852886e38]))], flag);
  assert.equal((await gpu.read(flag))[0]![0], 0, 'float32 max');
});

test('sumOfSquares and anyNonFinite: a one-element output is required', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const a = gpu.array(4);
  assert.throws(() => sumOfSquares(gpu, [a], gpuView(a, 0, 0)), /sumOfSquares: out must hold one value/);
  assert.throws(() => anyNonFinite(gpu, [a], gpuView(a, 0, 0)), /anyNonFinite: flag must hold one value/);
});
