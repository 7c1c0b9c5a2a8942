/**
 * The webgpu softmax cross-entropy against the js backend: dlogits 1e-6·|gradScale|, the loss sum
 * 1e-6 of Σ per-row (|log Σe| + |z|), the rows right exactly (countCorrect, ties to the first class);
 * both sums are added to what the array held (micro-batches add up on the device).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { countCorrect } from '../../src/nn/softmaxCrossEntropy.ts';
import { gpuView } from '../../src/kernels/webgpu/gpuArray.ts';
import { softmaxCrossEntropy } from '../../src/kernels/webgpu/softmaxCrossEntropy.ts';
import { assertClose, random } from './compareArrays.ts';
import { gpuOrSkip, releaseGpu } from './gpuTest.ts';

after(releaseGpu);

test('softmaxCrossEntropy: gradients and the loss sum equal the js backend; dlogits over logits', async (t) => {
  const gpu = await gpuOrSkip(t);
  if (!gpu) return;
  for (const [rows, classes] of [
    [1, 1],
    [3, 10],
    [257, 7],
    [5, 1000],
  ] as const) {
    const n = rows * classes;
    const logits = random(n, n, -8, 8);
    // one row far from 0, where an unshifted exp would overflow
    for (let c = 0; c < classes; c++) logits[(rows - 1) * classes + c]! += 500;
    // a tie for the maximum in row 0: the first class holding it counts
    if (classes > 3) logits[2] = logits[3] = 50;
    const labels = Int32Array.from({ length: rows }, (_, r) => (r * 7919) % classes);
    const gradScale = 1 / rows;
    const want = new Float32Array(n);
    const wantRight = countCorrect(logits, labels, rows, classes);
    const wantLoss = jsBackend.softmaxCrossEntropy(logits, labels, rows, classes, want, gradScale);
    let lossScale = 0;
    for (let r = 0; r < rows; r++) {
      const row = logits.subarray(r * classes, (r + 1) * classes);
      const max = Math.max(...row);
      lossScale +=
        Math.abs(Math.log(row.reduce((s, v) => s + Math.exp(v - max), 0))) + Math.abs(row[labels[r]!]! - max);
    }
    for (const inPlace of [false, true]) {
      const gLogits = gpuView(gpu.upload(new Float32Array([1, 2, 3, ...logits])), 3, n);
      const gd = inPlace ? gLogits : gpuView(gpu.array(n + 1), 1, n);
      const sums = gpuView(gpu.upload(new Float32Array([7, 10, 3])), 1, 2);
      softmaxCrossEntropy(gpu, gLogits, labels, rows, classes, gd, gradScale, sums);
      const [gotD, gotSums] = await gpu.read(gd, sums);
      const what = `${rows}×${classes}${inPlace ? ' in place' : ''}`;
      assertClose(gotD!, want, () => 1e-6 * gradScale, `${what}: dlogits`);
      assert.ok(
        Math.abs(gotSums![0]! - 10 - wantLoss) <= 1e-6 * lossScale + 1e-5,
        `${what}: loss ${gotSums![0]! - 10} vs ${wantLoss}`,
      );
      assert.equal(gotSums![1]! - 3, wantRight, `${what}: rows right`);
    }
  }
  const a = gpu.array(6);
  assert.throws(() => softmaxCrossEntropy(gpu, a, Int32Array.of(0), 1, 3, a, 1, gpu.array(1)), /sums must hold two/);
  assert.throws(
    () => softmaxCrossEntropy(gpu, a, Int32Array.of(0, 3), 2, 3, a, 1, gpu.array(1)),
    /row 1 has label 3, expected a class in 0..2/,
  );
});
