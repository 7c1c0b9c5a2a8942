/**
 * copyRows with `add` into repeated destination rows (an embedding's backward) on the GPU against
 * the js backend, bit for bit (the same sources in the same order onto each row): repeats, a −1
 * source, rows wider than a workgroup, from and to as views of one buffer; and the refusals.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { copyRowsRepeating } from '../../src/kernels/webgpu/repeatedRows.ts';
import { assertBitwise, random } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

test('copyRows adds repeated destination rows as the js backend does, bit for bit', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const width of [1, 5, 70]) {
    const fromRows = 9,
      toRows = 6;
    const from = random(fromRows * width, width, -3, 3),
      to = random(toRows * width, width + 1, -3, 3);
    const sources = [3, -1, 0, 8, 5, 7, 2, 1, 4, 6];
    const dests = [2, 0, 2, 5, 2, 0, 3, 2, 5, 1];
    const fromStarts = Int32Array.from(sources.map((r) => (r < 0 ? -1 : r * width)));
    const toStarts = Int32Array.from(dests.map((r) => r * width));
    const want = to.slice();
    jsBackend.copyRows(from, fromStarts, want, toStarts, sources.length, width, true);
    // from and to as views of one buffer
    const flat = gpu.upload(new Float32Array([...random(5, 3), ...from, ...to]));
    const gTo = gpuView(flat, 5 + from.length, to.length);
    copyRowsRepeating(gpu, gpuView(flat, 5, from.length), fromStarts, gTo, toStarts, sources.length, width, true);
    const [got] = await gpu.read(gTo);
    assertBitwise(got!, want, `width ${width}`);
  }
});

test('copyRows with repeated destinations refuses overlapping rows and rows out of bounds', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  const a = gpu.array(100);
  assert.throws(
    () => copyRowsRepeating(gpu, a, Int32Array.of(0, 10, 20), a, Int32Array.of(50, 50, 55), 3, 10, true),
    /destination rows at 50 and 55 overlap/,
  );
  assert.throws(
    () => copyRowsRepeating(gpu, a, Int32Array.of(0, 95), a, Int32Array.of(0, 0), 2, 10, true),
    /row 1 reads from\[95 … 105\)/,
  );
  assert.throws(
    () => copyRowsRepeating(gpu, a, Int32Array.of(0, 0), a, Int32Array.of(95, 95), 2, 10, true),
    /row 0 writes to\[95 … 105\)/,
  );
  // without add, a repeated destination is refused as elementwise.ts does
  assert.throws(
    () => copyRowsRepeating(gpu, a, Int32Array.of(0, 10), a, Int32Array.of(50, 50), 2, 10, false),
    /destination rows at 50 and 50 overlap/,
  );
});
