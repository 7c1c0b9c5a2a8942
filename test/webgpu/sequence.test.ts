/**
 * The webgpu sequence kernels (fill, zeroPadding) against the js backend, bit for bit (they write
 * a constant or leave a value alone), on views at non-zero offsets of a larger buffer whose
 * neighbouring values must survive, on sizes across the 64-thread workgroups.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { fill, zeroPadding } from '../../src/kernels/webgpu/sequence.ts';
import { assertBitwise, random } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

test('fill writes the value over a view and nothing around it', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const [n, value] of [
    [1, 0],
    [63, -2.5],
    [64, 0],
    [65, 1e-3],
    [1000, 0],
  ] as const) {
    const whole = random(n + 9, n);
    const flat = gpu.upload(whole);
    fill(gpu, gpuView(flat, 4, n), value);
    const want = whole.slice();
    jsBackend.fill(want.subarray(4, 4 + n), value);
    const [got] = await gpu.read(flat);
    assertBitwise(got!, want, `fill ${n} with ${value}`);
  }
});

test('zeroPadding zeroes each sample’s frames from its length on, nothing else', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const cases: [number, number, number, number[]][] = [
    [1, 1, 1, [0]],
    [3, 5, 7, [5, 0, 2]],
    [4, 9, 13, [9, 9, 1, 4]],
    [2, 33, 5, [17, 33]],
  ];
  for (const [N, T, F, lens] of cases) {
    const lengths = Int32Array.from(lens);
    const whole = random(N * T * F + 8, N * T + F);
    const flat = gpu.upload(whole);
    zeroPadding(gpu, gpuView(flat, 3, N * T * F), N, T, F, lengths);
    const want = whole.slice();
    jsBackend.zeroPadding(want.subarray(3, 3 + N * T * F), N, T, F, lengths);
    const [got] = await gpu.read(flat);
    assertBitwise(got!, want, `zeroPadding [${N}, ${T}, ${F}] lengths ${lens}`);
  }
});

test('zeroPadding refuses a length outside [0, T], as js does', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const x = gpu.array(12);
  for (const lens of [
    [4, 5],
    [-1, 2],
  ]) {
    const lengths = Int32Array.from(lens);
    assert.throws(() => zeroPadding(gpu, x, 2, 3, 2, lengths), /length/);
    assert.throws(() => jsBackend.zeroPadding(new Float32Array(12), 2, 3, 2, lengths), /length/);
  }
});
