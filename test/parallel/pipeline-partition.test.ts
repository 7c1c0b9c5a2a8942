import { test } from 'node:test';
import assert from 'node:assert/strict';
import { partitionLayers, parameterCosts, type StageRange } from '../../src/parallel/pipeline/partition.ts';
import { buildModel } from '../../src/nn/model.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';

/** The largest stage cost of every way to cut `costs` into `stages` non-empty ranges (brute force). */
function bruteForceBest(costs: number[], stages: number): number {
  const n = costs.length;
  let best = Infinity;
  const walk = (start: number, left: number, worst: number) => {
    if (left === 1) {
      best = Math.min(
        best,
        Math.max(
          worst,
          costs.slice(start).reduce((a, b) => a + b, 0),
        ),
      );
      return;
    }
    for (let end = start + 1; end <= n - left + 1; end++)
      walk(
        end,
        left - 1,
        Math.max(
          worst,
          costs.slice(start, end).reduce((a, b) => a + b, 0),
        ),
      );
  };
  walk(0, stages, 0);
  return best;
}

const stageCost = (costs: number[], r: StageRange) => costs.slice(r.start, r.end).reduce((a, b) => a + b, 0);

test('the partition is contiguous, covers every layer once, and its largest stage is the brute-force optimum', () => {
  let seed = 7;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let trial = 0; trial < 200; trial++) {
    const n = 1 + Math.floor(rand() * 9);
    const costs = Array.from({ length: n }, () => (rand() < 0.3 ? 0 : Math.floor(rand() * 100)));
    for (let p = 1; p <= n; p++) {
      const ranges = partitionLayers(costs, p);
      assert.equal(ranges.length, p);
      assert.equal(ranges[0]!.start, 0);
      assert.equal(ranges[p - 1]!.end, n);
      for (const [s, r] of ranges.entries()) {
        assert.ok(r.end > r.start, `stage ${s} empty: ${JSON.stringify(ranges)}`);
        if (s > 0) assert.equal(r.start, ranges[s - 1]!.end);
      }
      assert.equal(
        Math.max(...ranges.map((r) => stageCost(costs, r))),
        bruteForceBest(costs, p),
        JSON.stringify(costs),
      );
    }
  }
});

test('an MLP splits by its parameter counts; a layer without weights stays with the one before it', () => {
  const model = buildModel(jsBackend, {
    input: [8],
    layers: [
      { type: 'dense', units: 64 }, // 8 × 64, no bias by default
      { type: 'relu' },
      { type: 'dense', units: 8 },
      { type: 'relu' },
      { type: 'dense', units: 4 },
    ],
  } as never);
  const costs = parameterCosts(model.layers);
  assert.deepEqual(costs, [512, 0, 512, 0, 32]);
  assert.deepEqual(partitionLayers(costs, 2), [
    { start: 0, end: 2 },
    { start: 2, end: 5 },
  ]);
});

test('boundaries override the balance; bad ones and too many stages are refused naming the field', () => {
  assert.deepEqual(partitionLayers([1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 3, [3, 7]), [
    { start: 0, end: 3 },
    { start: 3, end: 7 },
    { start: 7, end: 10 },
  ]);
  assert.throws(
    () => partitionLayers([1, 2, 3], 4),
    /parallel\.pipeline\.stages: 4 stages for a model of 3 layers.*at most 3/,
  );
  assert.throws(() => partitionLayers([1, 2, 3], 3, [1]), /boundaries: 3 stages need 2 boundaries/);
  assert.throws(() => partitionLayers([1, 2, 3], 3, [2, 1]), /boundaries: \[2, 1\] must be increasing/);
  assert.throws(() => partitionLayers([1, 2, 3], 2, [3]), /between 1 and 2 \(the model has 3 layers\)/);
  assert.throws(() => partitionLayers([1, 2, 3], 0), /stages: expected a positive integer, got 0/);
});
