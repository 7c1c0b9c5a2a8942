import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { createOptimizer, type FlatRange } from '../../src/optim/optimizer.ts';
import type { OptimizerSpec } from '../../src/optim/spec.ts';
import { gradientBuckets, ShardLayout } from '../../src/parallel/sharding/shardLayout.ts';
import { ShardedOptimizer } from '../../src/parallel/sharding/shardedOptimizer.ts';
import { hybridStrategy } from '../../src/parallel/strategies/hybrid.ts';
import type { Communicator } from '../../src/comm/communicator.ts';
import { localGroup } from './localGroup.ts';
import { sgdReplica, stepInfo } from './strategyHarness.ts';
import { randomArray } from '../util/close.ts';

const ADAM: OptimizerSpec = { type: 'adam', lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01 };
const MOMENTUM: OptimizerSpec = { type: 'sgd', lr: 0.1, momentum: 0.9, nesterov: true, weightDecay: 0 };

test('the owned ranges of every rank partition the buffer, piece by piece as reduceScatter splits it', () => {
  const pieces = [
    { start: 70, end: 103 },
    { start: 20, end: 70 },
    { start: 0, end: 20 },
  ];
  for (const n of [1, 2, 3, 5]) {
    const owner = new Int32Array(103).fill(-1);
    for (let r = 0; r < n; r++) {
      for (const { start, end } of new ShardLayout(103, pieces, n, r).owned)
        for (let i = start; i < end; i++) {
          assert.equal(owner[i], -1, `float ${i} owned twice`);
          owner[i] = r;
        }
    }
    assert.ok(
      owner.every((o) => o >= 0),
      `N=${n}: every float owned`,
    );
    // rank r owns the r-th of n even parts of each piece
    if (n === 2) assert.deepEqual([owner[70], owner[86], owner[87], owner[102]], [0, 0, 1, 1]);
  }
  assert.throws(() => new ShardLayout(100, pieces, 2, 0), /pieces cover 103 floats of 100/);
});

test('gradientBuckets are the slices hybrid reduces during and after backward', async () => {
  const offsets = [90, 84, 60, 59, 30, 12, 0];
  for (const bucketBytes of [4, 40, 100, 1000]) {
    const seen: [number, number][] = [];
    const grads = new Float32Array(100);
    const spy = {
      ...localGroup(1)[0]!,
      allreduce: async (buf: Float32Array) => {
        seen.push([buf.byteOffset / 4, buf.byteOffset / 4 + buf.length]);
      },
    } as Communicator;
    const s = hybridStrategy(spy, bucketBytes);
    const replica = sgdReplica(Array.from(grads));
    for (const o of offsets) s.onGradientsReady!(replica, o);
    await s.applyUpdate!(replica, stepInfo(0));
    const want = gradientBuckets(100, offsets, bucketBytes / 4).map((b) => [b.start, b.end]);
    assert.deepEqual(seen, want, `bucketBytes ${bucketBytes}`);
  }
});

/** Steps the whole optimizer and N sharded ones (each on its ranges of a copy) and compares. */
async function compare(spec: OptimizerSpec, n: number, frozen: FlatRange[]) {
  const size = 97;
  const pieces = gradientBuckets(size, [80, 41, 13], 16);
  const comms = localGroup(n);
  const whole = createOptimizer(jsBackend, spec, size, undefined, frozen);
  const sharded = comms.map(
    (c, r) => new ShardedOptimizer(jsBackend, spec, new ShardLayout(size, pieces, n, r), c, frozen),
  );
  const params = randomArray(size, 3);
  const copies = sharded.map(() => params.slice());
  for (let step = 0; step < 5; step++) {
    const grads = randomArray(size, 10 + step);
    whole.step(params, grads, 0.01);
    for (const [r, o] of sharded.entries()) o.step(copies[r]!, grads, 0.01);
  }
  // each rank's owned weights are the whole optimizer's; together they are all of them
  const assembled = new Float32Array(size);
  sharded.forEach((o, r) => {
    for (const { start, end } of o.layout.owned) assembled.set(copies[r]!.subarray(start, end), start);
  });
  assert.deepEqual(assembled, params, `${spec.type} N=${n}`);
  for (const f of frozen) for (let i = f.start; i < f.end; i++) assert.equal(params[i], randomArray(size, 3)[i]);
  // the assembled state is the whole optimizer's; loading it back gives each rank its slices
  await Promise.all(sharded.map((o) => o.assemble()));
  for (const o of sharded) assert.deepEqual(o.state(), whole.state());
  const again = comms.map(
    (c, r) => new ShardedOptimizer(jsBackend, spec, new ShardLayout(size, pieces, n, r), c, frozen),
  );
  for (const o of again) o.loadState(whole.state());
  await Promise.all(again.map((o) => o.assemble()));
  for (const o of again) assert.deepEqual(o.state(), whole.state());
  // a step invalidates the assembled copy: no stale state can reach a checkpoint
  sharded[0]!.step(copies[0]!, randomArray(size, 99), 0.01);
  assert.throws(() => sharded[0]!.state(), /whole only after assemble/);
}

test('a sharded optimizer equals the whole one bit for bit (Adam with weight decay, Nesterov momentum; frozen ranges)', async () => {
  for (const spec of [ADAM, MOMENTUM])
    for (const n of [1, 2, 3])
      for (const frozen of [
        [],
        [
          { start: 10, end: 30 },
          { start: 75, end: 82 },
        ],
      ])
        await compare(spec, n, frozen);
});
