/**
 * One whole run of the CLI with ZeRO sharding on 2 device threads (shm transport), then resumed
 * unsharded for a second epoch: it ends where an uninterrupted unsharded run ends. And stage 1 on
 * 2 processes over TCP, its buckets overlapping backward as hybrid's do: hybrid's bits, with one
 * device a process and with two (the hierarchical allreduce, its slices across during backward).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { runCli, tmpDir } from '../cli/helpers.ts';
import { train } from '../../src/runtime/run/train.ts';
import { loadConfig } from '../../src/config/load.ts';
import { writeShardingConfig } from './shardingHarness.ts';
import { assertSameTensors, freshDir, tensorsOf } from '../runtime/resumeHelpers.ts';
import { launchTrain } from '../runtime/jobHelpers.ts';

test('paratrain train --devices 2 with hybrid shard 2, resumed unsharded, ends where an unsharded run ends', async () => {
  const dir = tmpDir();
  const runDir = join(dir, 'run');
  const sharded = await runCli(
    ['train', writeShardingConfig(dir, 'sharded.yaml', 2, 1), '--devices', '2', '--out', runDir, '--quiet'],
    {
      timeoutMs: 120_000,
    },
  );
  assert.equal(sharded.code, 0, sharded.stderr);
  // the resume and the reference in this process (device threads all the same): one CLI start is enough
  const plain = loadConfig(writeShardingConfig(dir, 'plain.yaml', 0, 2));
  const onTwo = { ...plain, train: { ...plain.train, devices: 2 } };
  await train(onTwo, { resume: runDir, log: () => {} });
  const straight = await train(onTwo, { out: freshDir() });
  // two devices: every reduction is a + b in either order, and the clip norm is summed from the
  // same two float64 halves, so the runs agree to float32 rounding of the clip factor at most
  assertSameTensors(tensorsOf(join(runDir, 'model.safetensors')), tensorsOf(straight.checkpoint), 1e-6);
});

test('paratrain launch: hybrid shard 1 on 2 processes over TCP (buckets overlapping backward) equals unsharded hybrid on 2 threads bit for bit', {
  timeout: 300_000,
}, async () => {
  const dir = tmpDir();
  const out = join(dir, 'tcp');
  const launched = await launchTrain(writeShardingConfig(dir, 'sharded.yaml', 1, 1), 2, 1, out);
  assert.equal(launched.code, 0, launched.stderr);
  const plain = loadConfig(writeShardingConfig(dir, 'plain.yaml', 0, 1));
  const threads = await train({ ...plain, train: { ...plain.train, devices: 2 } }, { out: freshDir() });
  assertSameTensors(tensorsOf(join(out, 'model.safetensors')), tensorsOf(threads.checkpoint));
});

test('paratrain launch: hybrid shard 1 on 2 processes × 2 devices equals unsharded hybrid on the same layout bit for bit', {
  timeout: 300_000,
}, async () => {
  const dir = tmpDir();
  const sharded = await launchTrain(writeShardingConfig(dir, 'sharded.yaml', 1, 1), 2, 2, join(dir, 'sharded'));
  const plain = await launchTrain(writeShardingConfig(dir, 'plain.yaml', 0, 1), 2, 2, join(dir, 'plain'));
  assert.equal(sharded.code, 0, sharded.stderr);
  assert.equal(plain.code, 0, plain.stderr);
  assertSameTensors(
    tensorsOf(join(dir, 'sharded', 'model.safetensors')),
    tensorsOf(join(dir, 'plain', 'model.safetensors')),
  );
});
