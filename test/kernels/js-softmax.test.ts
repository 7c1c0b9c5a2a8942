import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertClose, randomArray } from '../util/close.ts';
import { softmaxCrossEntropy } from '../../src/kernels/js/softmaxCrossEntropy.ts';

/** Float64 softmax cross-entropy by the textbook formula (no max subtraction: inputs kept small). */
function byHand(logits: Float32Array, labels: Int32Array, rows: number, classes: number, scale: number) {
  let loss = 0;
  const grad = new Float64Array(rows * classes);
  for (let r = 0; r < rows; r++) {
    let z = 0;
    for (let j = 0; j < classes; j++) z += Math.exp(logits[r * classes + j]);
    loss += -Math.log(Math.exp(logits[r * classes + labels[r]]) / z);
    for (let j = 0; j < classes; j++)
      grad[r * classes + j] = (Math.exp(logits[r * classes + j]) / z - (j === labels[r] ? 1 : 0)) * scale;
  }
  return { loss, grad };
}

test('softmax cross-entropy: sum of losses and scaled gradient match float64 by hand', () => {
  for (const [rows, classes] of [
    [1, 1],
    [1, 2],
    [5, 10],
    [33, 7],
  ]) {
    const logits = randomArray(rows * classes, rows * 31 + classes).map((v) => v * 3);
    const labels = Int32Array.from({ length: rows }, (_, r) => (r * 7 + 3) % classes);
    const scale = 1 / rows;
    const d = new Float32Array(rows * classes).fill(NaN);
    const loss = softmaxCrossEntropy(logits, labels, rows, classes, d, scale);
    const want = byHand(logits, labels, rows, classes, scale);
    assertClose([loss], [want.loss], { rtol: 1e-12, atol: 1e-12, what: `${rows}x${classes} loss` });
    assertClose(d, want.grad, { rtol: 1e-6, atol: 1e-8, what: `${rows}x${classes} dlogits` });
  }
  // A two-class row by hand: logits [0, ln 3], label 0 → p = [1/4, 3/4], loss ln 4.
  const d = new Float32Array(2);
  const loss = softmaxCrossEntropy(Float32Array.from([0, Math.log(3)]), Int32Array.from([0]), 1, 2, d, 2);
  assertClose([loss], [Math.log(4)], { rtol: 1e-7 });
  assertClose(d, [(0.25 - 1) * 2, 0.75 * 2], { rtol: 1e-6 });
});

test('softmax cross-entropy is stable for huge logits and may write over the logits', () => {
  const logits = Float32Array.from([1000, 0, -1000, 1e30, 1e30, -1e30]);
  const labels = Int32Array.from([1, 2]);
  const loss = softmaxCrossEntropy(logits, labels, 2, 3, logits, 1);
  // Row 0: loss ≈ 1000; row 1: two equal maxima and the label on the tiny one → loss ≈ 2e30.
  assertClose([loss], [1000 + 2e30], { rtol: 1e-6 });
  assert.ok(logits.every(Number.isFinite));
  assertClose(logits, [1, -1, 0, 0.5, 0.5, -1], { atol: 1e-6 });
});

test('softmax cross-entropy names the row and label that are out of range', () => {
  const logits = randomArray(3 * 4, 1);
  const keep = logits.slice();
  assert.throws(() => softmaxCrossEntropy(logits, Int32Array.from([0, 4, 1]), 3, 4, logits, 1), /row 1 has label 4/);
  assert.throws(() => softmaxCrossEntropy(logits, Int32Array.from([0, 1, -1]), 3, 4, logits, 1), /row 2 has label -1/);
  assert.deepEqual([...logits], [...keep], 'nothing written before the error');
});
