/**
 * ZeRO stage 3 through the CLI: on 2 device threads (shm), resumed unsharded and on 4 devices,
 * on 2 processes over TCP (`paratrain launch`) and over MPI (`mpirun --transport mpi`, skipped
 * where mpirun or the MPI addon is absent), each against unsharded hybrid.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, tmpDir } from '../cli/helpers.ts';
import { train } from '../../src/runtime/run/train.ts';
import { loadConfig } from '../../src/config/load.ts';
import type { RunConfig } from '../../src/config/runConfig.ts';
import { writeShardingConfig } from './shardingHarness.ts';
import { assertSameTensors, freshDir, tensorsOf } from '../runtime/resumeHelpers.ts';
import { launchTrain, mpirunCli } from '../runtime/jobHelpers.ts';
import { mpiSkip } from '../comm/mpi/job.ts';

const writeConfig = (dir: string, name: string, shard: number, epochs: number) =>
  writeShardingConfig(dir, name, shard, epochs, 1);

const onDevices = (c: RunConfig, devices: number): RunConfig => ({ ...c, train: { ...c.train, devices } });
const model = (dir: string) => tensorsOf(join(dir, 'model.safetensors'));

test('paratrain train --devices 2 with hybrid shard 3 equals unsharded hybrid bit for bit, and resumes unsharded and on 4 devices', {
  timeout: 300_000,
}, async () => {
  const dir = tmpDir();
  const runDir = join(dir, 'run');
  const sharded = await runCli(
    ['train', writeConfig(dir, 'sharded.yaml', 3, 1), '--devices', '2', '--out', runDir, '--quiet'],
    { timeoutMs: 120_000 },
  );
  assert.equal(sharded.code, 0, sharded.stderr);
  const plain = loadConfig(writeConfig(dir, 'plain.yaml', 0, 2));
  const oneEpoch = await train(onDevices({ ...plain, train: { ...plain.train, epochs: 1 } }, 2), { out: freshDir() });
  // the same sums in the same order on 2 devices: the model files are equal, evaluation and checkpoints between steps
  assertSameTensors(model(runDir), tensorsOf(oneEpoch.checkpoint));
  // copies of the stage-3 run, to resume on 4 devices at stage 3 and unsharded
  const [four3, four0] = ['four3', 'four0'].map((name) => {
    cpSync(runDir, join(dir, name), { recursive: true });
    return join(dir, name);
  });
  // resumed unsharded for a second epoch: where an uninterrupted unsharded run ends
  await train(onDevices(plain, 2), { resume: runDir, log: () => {} });
  const straight = await train(onDevices(plain, 2), { out: freshDir() });
  assertSameTensors(tensorsOf(straight.checkpoint), model(runDir));
  // on 4 devices, at stage 3 and unsharded, from the same stage-3 set: equal to each other
  await train(onDevices(loadConfig(writeConfig(dir, 'four.yaml', 3, 2)), 4), { resume: four3!, log: () => {} });
  await train(onDevices(plain, 4), { resume: four0!, log: () => {} });
  assertSameTensors(model(four3!), model(four0!));
});

test('paratrain launch: hybrid shard 3 on 2 processes over TCP equals unsharded hybrid on 2 threads bit for bit', {
  timeout: 300_000,
}, async () => {
  const dir = tmpDir();
  const out = join(dir, 'tcp');
  const launched = await launchTrain(writeConfig(dir, 'sharded.yaml', 3, 1), 2, 1, out);
  assert.equal(launched.code, 0, launched.stderr);
  const plain = loadConfig(writeConfig(dir, 'plain.yaml', 0, 1));
  const threads = await train(onDevices(plain, 2), { out: freshDir() });
  assertSameTensors(model(out), tensorsOf(threads.checkpoint));
});

test('paratrain launch: hybrid shard 3 with rowBlockBytes on 2 processes over TCP equals the same on 2 threads bit for bit', {
  timeout: 300_000,
}, async () => {
  const dir = tmpDir();
  const out = join(dir, 'tcp');
  // the dense layer's 676 rows of 16 in 6 blocks of 128 rows (8 KiB)
  const config = join(dir, 'blocks.yaml');
  writeFileSync(
    config,
    readFileSync(writeConfig(dir, 'sharded.yaml', 3, 1), 'utf8').replace(
      'bucketBytes: 2048',
      'bucketBytes: 2048, rowBlockBytes: 8192',
    ),
  );
  const launched = await launchTrain(config, 2, 1, out);
  assert.equal(launched.code, 0, launched.stderr);
  const threads = await train(onDevices(loadConfig(config), 2), { out: freshDir() });
  assertSameTensors(model(out), tensorsOf(threads.checkpoint));
});

test('mpirun -np 2 --transport mpi: hybrid shard 3 equals unsharded hybrid on 2 threads bit for bit', {
  skip: mpiSkip,
  timeout: 300_000,
}, async () => {
  const dir = tmpDir();
  const out = join(dir, 'mpi');
  const config = writeConfig(dir, 'sharded.yaml', 3, 1);
  const run = await mpirunCli(['train', config, '--devices', '1', '--transport', 'mpi', '--out', out, '--quiet']);
  assert.equal(run.code, 0, run.out);
  const plain = loadConfig(writeConfig(dir, 'plain.yaml', 0, 1));
  const threads = await train(onDevices(plain, 2), { out: freshDir() });
  assertSameTensors(model(out), tensorsOf(threads.checkpoint));
});
