import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GlobalBatchSampler, type GlobalBatchSamplerOptions } from '../../src/data/sampler.ts';
import { evenSlice } from '../../src/tensor/shape.ts';

const base = { seed: 42, shuffle: true, dropLast: false };

function ranks(opts: Omit<GlobalBatchSamplerOptions, 'rank'>): GlobalBatchSampler[] {
  return Array.from({ length: opts.worldSize }, (_, rank) => new GlobalBatchSampler({ ...opts, rank }));
}

test('per epoch the ranks together see a permutation, disjointly', () => {
  for (const [count, batchSize, worldSize] of [
    [103, 16, 4],
    [100, 10, 3],
    [7, 7, 7],
    [50, 3, 2],
  ] as const) {
    const samplers = ranks({ count, batchSize, worldSize, ...base });
    for (const epoch of [0, 1]) {
      const seen = new Int32Array(count);
      for (const s of samplers) for (const b of s.epoch(epoch)) for (const i of b.indices) seen[i]!++;
      assert.ok(
        seen.every((n) => n === 1),
        `count ${count} batch ${batchSize} world ${worldSize} epoch ${epoch}`,
      );
    }
  }
});

test('G ranks with global batch B see exactly what 1 rank with batch B sees', () => {
  const count = 203,
    batchSize = 24;
  const single = [...new GlobalBatchSampler({ count, batchSize, worldSize: 1, rank: 0, ...base }).epoch(3)];
  for (const worldSize of [2, 3, 5, 24]) {
    const per = ranks({ count, batchSize, worldSize, ...base }).map((s) => [...s.epoch(3)]);
    assert.ok(
      per.every((steps) => steps.length === single.length),
      'all ranks take the same number of steps',
    );
    single.forEach((one, step) => {
      const joined = per.flatMap((steps) => [...steps[step]!.indices]);
      assert.deepEqual(joined, [...one.indices], `world ${worldSize} step ${step}`);
      per.forEach((steps, rank) => {
        const b = steps[step]!;
        assert.equal(b.step, step);
        assert.equal(b.globalBatchSize, one.globalBatchSize);
        assert.equal(b.globalOffset, step * batchSize + evenSlice(one.globalBatchSize, worldSize, rank).start);
      });
      const sizes = per.map((steps) => steps[step]!.indices.length);
      assert.ok(Math.max(...sizes) - Math.min(...sizes) <= 1);
      assert.deepEqual(
        [...sizes].sort((a, b) => b - a),
        sizes,
        'lower ranks get the extra',
      );
    });
  }
});

test('globalOffset is the position in the epoch permutation', () => {
  const s = new GlobalBatchSampler({ count: 30, batchSize: 8, worldSize: 3, rank: 2, ...base });
  const perm = s.permutation(5);
  for (const b of s.epoch(5))
    assert.deepEqual([...b.indices], [...perm.subarray(b.globalOffset, b.globalOffset + b.indices.length)]);
});

test('uneven last batch: kept or dropped', () => {
  const opts = { count: 10, batchSize: 4, worldSize: 3, ...base };
  const kept = ranks(opts).map((s) => [...s.epoch(0)]);
  assert.equal(kept[0]!.length, 3);
  assert.deepEqual(
    kept.map((steps) => steps[2]!.indices.length),
    [1, 1, 0],
    'last global batch of 2 over 3 ranks',
  );
  assert.ok(kept.every((steps) => steps[2]!.globalBatchSize === 2));
  assert.deepEqual(
    kept.map((steps) => steps[0]!.indices.length),
    [2, 1, 1],
  );
  const dropped = ranks({ ...opts, dropLast: true });
  assert.equal(dropped[0]!.stepsPerEpoch(), 2);
  const seen = dropped.flatMap((s) => [...s.epoch(0)].flatMap((b) => [...b.indices]));
  assert.equal(seen.length, 8);
  assert.equal(new Set(seen).size, 8);
});

test('deterministic by seed and epoch, different across epochs and seeds', () => {
  const make = (seed: number) =>
    new GlobalBatchSampler({ count: 500, batchSize: 32, worldSize: 2, rank: 1, seed, shuffle: true, dropLast: false });
  const flat = (s: GlobalBatchSampler, e: number) => [...s.epoch(e)].flatMap((b) => [...b.indices]);
  assert.deepEqual(flat(make(7), 2), flat(make(7), 2));
  assert.notDeepEqual(flat(make(7), 2), flat(make(7), 3));
  assert.notDeepEqual(flat(make(7), 2), flat(make(8), 2));
});

test('shuffle off keeps file order', () => {
  const s = new GlobalBatchSampler({
    count: 10,
    batchSize: 4,
    worldSize: 2,
    rank: 1,
    seed: 1,
    shuffle: false,
    dropLast: false,
  });
  assert.deepEqual(
    [...s.epoch(9)].map((b) => [...b.indices]),
    [[2, 3], [6, 7], [9]],
  );
});

test('bad options give clear messages', () => {
  const ok = { count: 10, batchSize: 4, worldSize: 2, rank: 0, ...base };
  assert.throws(
    () => new GlobalBatchSampler({ ...ok, batchSize: 1 }),
    /global batch size 1 is smaller than the 2 devices: each device needs at least one sample per step; use a batch size of at least 2/,
  );
  assert.throws(() => new GlobalBatchSampler({ ...ok, rank: 2 }), /rank 2 is not in 0\.\.1 for a world of 2/);
  assert.throws(
    () => new GlobalBatchSampler({ ...ok, count: 3, dropLast: true }),
    /the dataset has 3 samples, fewer than one global batch of 4/,
  );
  assert.throws(
    () => new GlobalBatchSampler({ ...ok, batchSize: 2.5 }),
    /batchSize must be a whole number ≥ 1, got 2.5/,
  );
});
