/**
 * `mpirun -np 2 paratrain train …` with both transports: the TCP one (rendezvous from Open MPI's
 * environment) and MPI's own collectives (--transport mpi). Each must equal hybrid on 2 threads, and
 * a pipeline of 2 stages over MPI's send/recv the same pipeline on 2 threads; a failing device ends
 * the MPI job with the cause. Skipped, with the reason, where mpirun or the MPI addon is absent
 * (.ci/run installs Open MPI).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpDir } from '../cli/helpers.ts';
import { mpiSkip } from '../comm/mpi/job.ts';
import { assertClose, cutSubset, mpirunCli as mpirun, tinyJobConfig, trainHere, weights } from './jobHelpers.ts';

const skip = mpiSkip;

test('mpirun -np 2 paratrain train, over tcp and over mpi, equals hybrid on 2 threads', {
  skip,
  timeout: 300_000,
}, async () => {
  const dir = tmpDir();
  const cfg = tinyJobConfig(dir, ', devices: 1, strategy: hybrid');
  // the same job on 2 threads, in this process
  await trainHere(cfg, join(dir, 'single'), { devices: 2 });
  const reference = weights(join(dir, 'single', 'model.safetensors'));
  for (const transport of ['tcp', 'mpi']) {
    const r = await mpirun(['train', cfg, '--transport', transport, '--out', join(dir, transport), '--quiet']);
    assert.equal(r.code, 0, `${transport}:\n${r.out}`);
    assertClose(weights(join(dir, transport, 'model.safetensors')), reference, `mpirun with --transport ${transport}`);
  }
});

test('mpirun -np 2 --transport mpi: a pipeline of 2 stages, one per process (send/recv over MPI), equals 2 threads bit for bit', {
  skip,
  timeout: 180_000,
}, async () => {
  const dir = tmpDir();
  const cfg = tinyJobConfig(dir, ', devices: 1, microBatches: 2, pipeline: { stages: 2, schedule: 1f1b }');
  const [r] = await Promise.all([
    mpirun(['train', cfg, '--transport', 'mpi', '--out', join(dir, 'mpi'), '--quiet']),
    trainHere(cfg, join(dir, 'single'), { devices: 2 }),
  ]);
  assert.equal(r.code, 0, r.out);
  assert.deepEqual(weights(join(dir, 'mpi', 'model.safetensors')), weights(join(dir, 'single', 'model.safetensors')));
});

test('--transport mpi: a failing device ends the job with its cause; several devices per process are refused', {
  skip,
  timeout: 120_000,
}, async () => {
  const dir = tmpDir();
  const cfg = tinyJobConfig(dir, ', devices: 1, strategy: hybrid');
  const failed = await mpirun(['train', cfg, '--transport', 'mpi', '--out', join(dir, 'fail'), '--quiet'], {
    PARATRAIN_FAIL_AT: '1:2',
  });
  assert.notEqual(failed.code, 0);
  assert.match(failed.out, /device 1 \(process 1\) failed: injected failure at step 2/);
  const refused = await mpirun([
    'train',
    cfg,
    '--transport',
    'mpi',
    '--devices',
    '2',
    '--out',
    join(dir, 'two'),
    '--quiet',
  ]);
  assert.notEqual(refused.code, 0);
  assert.match(
    refused.out,
    /paratrain: --transport mpi: each process runs one device .* but train\.devices is 2; use --devices 1/,
  );
});

test('--transport mpi: processes reading different data are refused before training, naming what differs', {
  skip,
  timeout: 120_000,
}, async () => {
  const dir = tmpDir();
  const other = join(dir, 'other-data');
  mkdirSync(other);
  cutSubset(other, 60); // the job's trainLimit is 96: 60 samples vs 96
  const cfg = tinyJobConfig(dir, ', devices: 1, strategy: hybrid');
  const args = ['train', cfg, '--transport', 'mpi', '--out', join(dir, 'run'), '--quiet'];
  const r = await mpirun(args, {}, [...args, '--data', other]);
  assert.notEqual(r.code, 0);
  assert.match(
    r.out,
    /process 1's training data differs from process 0's: samples 60 vs 96 .*other-data.*every process must read the same dataset/,
  );
  assert.doesNotMatch(r.out, /epoch 1/);
});
