/**
 * The sum of squares that train.clipGradNorm clips by (optim/treeSquares.ts): the same bits from
 * any split of the buffer into parts (their nodes put together), as ZeRO stages 2 and 3 need;
 * equal to a float64 sum in any order up to rounding; exact where every partial sum is.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { treeSumOfSquares, treeValue, windowsOf } from '../../src/optim/treeSquares.ts';

test('any split of the buffer gives the bits of the whole, and the sequential sum to rounding', () => {
  fc.assert(
    fc.property(
      fc.float32Array({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6, minLength: 1, maxLength: 700 }),
      fc.array(fc.nat(), { maxLength: 6 }),
      (x, cutsRaw) => {
        const cuts = [...new Set([0, x.length, ...cutsRaw.map((c) => c % (x.length + 1))])].sort((a, b) => a - b);
        const nodes = [];
        for (let k = 0; k + 1 < cuts.length; k++) nodes.push(...windowsOf(x.subarray(cuts[k], cuts[k + 1]), cuts[k]!));
        const whole = treeSumOfSquares(x);
        // the parts' nodes in any order
        assert.equal(treeValue(nodes.reverse(), x.length), whole);
        let sequential = 0;
        for (const v of x) sequential += v * v;
        assert.ok(Math.abs(whole - sequential) <= 1e-13 * sequential, `${whole} against ${sequential}`);
      },
    ),
    { numRuns: 300 },
  );
});

test('exact where the partial sums are: small integers, a buffer longer than a leaf, zeros and an empty one', () => {
  const x = Float32Array.from({ length: 1000 }, (_, i) => (i % 13) - 6);
  let want = 0;
  for (const v of x) want += v * v;
  assert.equal(treeSumOfSquares(x), want);
  assert.equal(treeSumOfSquares(new Float32Array(37)), 0);
  assert.equal(treeSumOfSquares(new Float32Array(0)), 0);
  assert.equal(treeValue([], 0), 0);
});

test('nodes that leave an index out are refused', () => {
  const x = new Float32Array(40).fill(1);
  assert.throws(() => treeValue(windowsOf(x.subarray(0, 20), 0), 40), /index 20 is in no part/);
});
