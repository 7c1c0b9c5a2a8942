import assert from 'node:assert/strict';
import { test } from 'node:test';
import { evenSlice } from '../../src/tensor/shape.ts';

test('evenSlice splits as evenly as possible, lower parts get the extra', () => {
  assert.deepEqual(
    [0, 1, 2].map((r) => evenSlice(8, 3, r)),
    [
      { start: 0, end: 3 },
      { start: 3, end: 6 },
      { start: 6, end: 8 },
    ],
  );
  assert.deepEqual(
    [0, 1, 2, 3].map((r) => evenSlice(2, 4, r).end - evenSlice(2, 4, r).start),
    [1, 1, 0, 0],
  );
});
