/** Per-class precision, recall, F1 and the confusion matrix (`paratrain eval`), against figures worked by hand. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { argmaxRows, classReport } from '../../src/runtime/eval/classMetrics.ts';

test('a 3-class example: confusion rows are true classes; a class never predicted has precision 0', () => {
  // true:      0 0 0 1 1 2 2 2 2
  // predicted: 0 0 1 1 0 1 1 1 2
  const r = classReport([0, 0, 1, 1, 0, 1, 1, 1, 2], [0, 0, 0, 1, 1, 2, 2, 2, 2], ['a', 'b', 'c']);
  assert.deepStrictEqual(r.confusion, [
    [2, 1, 0],
    [1, 1, 0],
    [0, 3, 1],
  ]);
  assert.equal(r.accuracy, 4 / 9);
  const [a, b, c] = r.perClass;
  // a: tp 2, predicted 3, support 3 → p = r = 2/3; b: tp 1, predicted 5, support 2; c: tp 1, predicted 1, support 4
  assert.deepStrictEqual([a!.precision, a!.recall, a!.f1, a!.support], [2 / 3, 2 / 3, 2 / 3, 3]);
  assert.deepStrictEqual([b!.precision, b!.recall, b!.support], [1 / 5, 1 / 2, 2]);
  assert.ok(Math.abs(b!.f1 - 2 / 7) < 1e-15);
  assert.deepStrictEqual([c!.precision, c!.recall, c!.f1], [1, 1 / 4, 0.4]);
  assert.ok(Math.abs(r.macro.precision - (2 / 3 + 1 / 5 + 1) / 3) < 1e-15);
  const none = classReport([0, 0], [0, 1], ['x', 'y']);
  assert.deepStrictEqual([none.perClass[1]!.precision, none.perClass[1]!.recall, none.perClass[1]!.f1], [0, 0, 0]);
});

test('argmaxRows takes the first of equal scores', () => {
  assert.deepStrictEqual([...argmaxRows(Float32Array.from([0.1, 0.7, 0.2, 5, 5, 1]), 2)], [1, 0]);
});
