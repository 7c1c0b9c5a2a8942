import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShardSampler, shardByRank } from '../../src/data/shard.ts';

test('shardByRank covers every sample exactly once, sizes differ by at most 1', () => {
  for (const [count, world] of [[100, 3], [7, 4], [3, 5], [0, 2], [1000, 8]] as const) {
    const shards = Array.from({ length: world }, (_, r) => shardByRank(count, world, r, 11));
    const all = shards.flatMap((s) => [...s]).sort((a, b) => a - b);
    assert.deepEqual(all, Array.from({ length: count }, (_, i) => i), `count ${count} world ${world}`);
    const sizes = shards.map((s) => s.length);
    assert.ok(Math.max(...sizes) - Math.min(...sizes) <= 1);
  }
});

test('shardByRank is seeded and not just contiguous blocks', () => {
  assert.deepEqual(shardByRank(50, 2, 0, 3), shardByRank(50, 2, 0, 3));
  assert.notDeepEqual(shardByRank(50, 2, 0, 3), shardByRank(50, 2, 0, 4));
  assert.notDeepEqual([...shardByRank(50, 2, 0, 3)], Array.from({ length: 25 }, (_, i) => i));
});

test('ShardSampler walks only its own shard; workers may have different step counts', () => {
  const opts = { count: 11, batchSize: 2, worldSize: 3, seed: 5, shuffle: true, dropLast: false };
  const samplers = [0, 1, 2].map((rank) => new ShardSampler({ ...opts, rank }));
  assert.deepEqual(samplers.map((s) => s.shard.length), [4, 4, 3]);
  assert.deepEqual(samplers.map((s) => s.stepsPerEpoch()), [2, 2, 2]);
  const seen = new Set<number>();
  for (const s of samplers) {
    const mine = [...s.epoch(1)].flatMap((b) => [...b.indices]);
    assert.deepEqual([...mine].sort((a, b) => a - b), [...s.shard]);
    for (const i of mine) { assert.ok(!seen.has(i)); seen.add(i); }
  }
  assert.equal(seen.size, 11);
  const uneven = [0, 2].map((rank) => new ShardSampler({ ...opts, batchSize: 4, dropLast: true, rank }));
  assert.deepEqual(uneven.map((s) => s.stepsPerEpoch()), [1, 0]);
});
