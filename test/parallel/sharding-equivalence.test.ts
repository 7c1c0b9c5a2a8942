import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ADAM, CONV, MLP, MOMENTUM, shardConfig, trainJob } from './shardingHarness.ts';
import { ShardedOptimizer } from '../../src/parallel/sharding/shardedOptimizer.ts';
import { optimizerStateSize } from '../../src/optim/optimizer.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';

const STEPS = 4;

// Stage 1 reduces the same buckets with the same all-reduce as hybrid and each device applies the
// same elementwise update to its slice, so the weights are bit-identical. Stage 2's reduce-scatter
// sums in the same rank order as the all-reduce here (localGroup), and the update is elementwise,
// so it is bit-identical too; the communicator leaves NaN outside each device's reduced slice, so
// a device that used more than its part would diverge.
for (const [modelName, model] of [
  ['MLP', MLP],
  ['conv net', CONV],
] as const) {
  for (const [optName, optimizer] of [
    ['Adam', ADAM],
    ['SGD momentum', MOMENTUM],
  ] as const) {
    test(`hybrid shard 1 and 2 equal unsharded hybrid bit for bit: ${modelName}, ${optName}, 2 and 4 devices`, async () => {
      for (const devices of [2, 4]) {
        const base = await trainJob(shardConfig(model, optimizer, devices, 0), STEPS);
        for (const shard of [1, 2]) {
          const config = shardConfig(model, optimizer, devices, shard);
          const { job, params } = await trainJob(config, STEPS);
          for (let r = 0; r < devices; r++)
            assert.deepEqual(params[r], base.params[0], `stage ${shard}, ${devices} devices, device ${r}'s weights`);
          assertStateSharded(
            config,
            job.replicas.map((x) => x.optimizer),
          );
        }
      }
    });
  }
}

/** Each device's optimizer holds state for its owned floats only, and together exactly one whole state. */
function assertStateSharded(config: RunConfig, optimizers: unknown[]): void {
  let total = 0;
  for (const opt of optimizers) {
    assert.ok(opt instanceof ShardedOptimizer, 'the replica steps a sharded optimizer');
    const floats = optimizerStateSize(config.optimizer, opt.layout.ownedFloats);
    assert.equal(opt.stateFloats, floats, 'state sized for the owned slice');
    total += opt.stateFloats;
  }
  const size = (optimizers[0] as ShardedOptimizer).layout.size;
  assert.equal(total, optimizerStateSize(config.optimizer, size), 'the slices make one whole state');
}
