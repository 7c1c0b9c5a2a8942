import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BucketBatchSampler } from '../../src/data/bucketSampler.ts';
import { CounterRng } from '../../src/tensor/rng.ts';

const rng = new CounterRng(99);
const lengths = Int32Array.from({ length: 1003 }, () => 20 + rng.int(400));

/** Padding of an epoch: Σ over batches of (batch max − each length), over Σ lengths. */
function paddingFraction(order: Int32Array, batch: number): number {
  let pad = 0,
    total = 0;
  for (let s = 0; s < order.length; s += batch) {
    const b = Array.from(order.subarray(s, s + batch), (i) => lengths[i]!);
    const max = Math.max(...b);
    for (const l of b) {
      pad += max - l;
      total += l;
    }
  }
  return pad / total;
}

test('bucketed batches are a permutation, deterministic per (seed, epoch), and pad far less than random ones', () => {
  const s = new BucketBatchSampler({
    lengths,
    batchSize: 32,
    worldSize: 1,
    rank: 0,
    seed: 7,
    shuffle: true,
    dropLast: false,
  });
  const e0 = s.permutation(0),
    e1 = s.permutation(1);
  assert.deepEqual(
    Array.from(e0).sort((a, b) => a - b),
    Array.from({ length: lengths.length }, (_, i) => i),
  );
  assert.deepEqual(
    e0,
    new BucketBatchSampler({
      lengths,
      batchSize: 32,
      worldSize: 1,
      rank: 0,
      seed: 7,
      shuffle: true,
      dropLast: false,
    }).permutation(0),
  );
  assert.notDeepEqual(e0, e1);
  assert.notDeepEqual(
    e0,
    new BucketBatchSampler({
      lengths,
      batchSize: 32,
      worldSize: 1,
      rank: 0,
      seed: 8,
      shuffle: true,
      dropLast: false,
    }).permutation(0),
  );
  const random = Int32Array.from({ length: lengths.length }, (_, i) => i);
  new CounterRng(7, 0).shuffle(random);
  assert.ok(
    paddingFraction(e0, 32) < 0.1 * paddingFraction(random, 32),
    `padding ${paddingFraction(e0, 32)} vs random ${paddingFraction(random, 32)}`,
  );
  // the short last batch (1003 = 31·32 + 11) comes last
  const steps = [...s.epoch(0)];
  assert.equal(steps.length, 32);
  assert.equal(steps[31]!.globalBatchSize, 11);
  // without shuffling: sorted, shortest first, equal lengths in file order
  const sorted = new BucketBatchSampler({
    lengths,
    batchSize: 32,
    worldSize: 1,
    rank: 0,
    seed: 7,
    shuffle: false,
    dropLast: true,
  }).permutation(3);
  for (let i = 1; i < sorted.length; i++) {
    assert.ok(
      lengths[sorted[i - 1]!]! < lengths[sorted[i]!]! ||
        (lengths[sorted[i - 1]!] === lengths[sorted[i]!] && sorted[i - 1]! < sorted[i]!),
    );
  }
});

test("G ranks' slices of each global batch, in rank order, are the one-device batch of G times the size", () => {
  for (const G of [2, 3, 4]) {
    const b = 8;
    const one = [
      ...new BucketBatchSampler({
        lengths,
        batchSize: G * b,
        worldSize: 1,
        rank: 0,
        seed: 5,
        shuffle: true,
        dropLast: false,
      }).epoch(2),
    ];
    const ranks = Array.from({ length: G }, (_, r) => [
      ...new BucketBatchSampler({
        lengths,
        batchSize: G * b,
        worldSize: G,
        rank: r,
        seed: 5,
        shuffle: true,
        dropLast: false,
      }).epoch(2),
    ]);
    for (const r of ranks) assert.equal(r.length, one.length, 'every rank takes the same number of steps');
    one.forEach((batch, step) => {
      const joined = ranks.flatMap((r) => Array.from(r[step]!.indices));
      assert.deepEqual(joined, Array.from(batch.indices), `G=${G} step ${step}`);
      let offset = batch.globalOffset;
      for (const r of ranks) {
        assert.equal(r[step]!.globalOffset, offset);
        assert.equal(r[step]!.globalBatchSize, batch.globalBatchSize);
        offset += r[step]!.indices.length;
      }
    });
  }
  assert.throws(
    () =>
      new BucketBatchSampler({ lengths, batchSize: 3, worldSize: 4, rank: 0, seed: 1, shuffle: true, dropLast: false }),
    /global batch size 3 is smaller than the 4 devices/,
  );
});
