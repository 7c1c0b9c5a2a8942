/**
 * The optional Open MPI transport (src/comm/mpi) between real processes started by mpirun:
 * every collective, send/recv and broadcast from a non-zero root against a serial float32
 * reference (exact with 2 ranks — one addition — and within 1e-6 of Σ|x| with 3, where MPI may
 * add in another order), with MPI initialised in the main thread and in worker threads.
 * Allreduce results must be bit-identical on every rank: Open MPI's allreduce algorithms
 * (recursive doubling, ring, …) reduce each element once, or pairwise in commutative order, and
 * the MPI standard strongly recommends it. The checks themselves are in mpi/checks.ts.
 *
 * Skipped, with the reason, where mpirun or the addon (npm run build:mpi) is absent; `.ci/run`
 * installs Open MPI so CI runs it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { MpiCommunicator } from '../../src/comm/mpi/index.ts';
import type { MpiRankResult } from './mpi/checks.ts';
import { mpiSkip as skip, runMpiJob } from './mpi/job.ts';

const rankScript = fileURLToPath(new URL('./mpi/rank.ts', import.meta.url));

/** Runs rank.ts on `np` processes (or one, without mpirun, when np is 0) in `mode`. */
const runJob = (np: number, mode: string) => runMpiJob<MpiRankResult>(rankScript, np, [mode]);

function assertAllPassed({ code, output, results }: Awaited<ReturnType<typeof runJob>>, np: number): MpiRankResult[] {
  assert.equal(code, 0, `the job exited with code ${code}:\n${output.slice(-3000)}`);
  assert.equal(
    results.length,
    Math.max(np, 1),
    `expected ${Math.max(np, 1)} result files, got ${results.length}:\n${output.slice(-3000)}`,
  );
  const summary = JSON.stringify(
    results.map(({ rank, thread, failures, error }) => ({ rank, thread, failures, error })),
    null,
    1,
  );
  for (const r of results) {
    assert.equal(r.error, undefined, summary);
    assert.deepEqual(r.failures, [], summary);
    assert.equal(r.size, Math.max(np, 1));
  }
  for (const key of Object.keys(results[0]!.hashes)) {
    const hashes = new Set(results.map((r) => r.hashes[key]));
    assert.equal(hashes.size, 1, `${key}: results differ between ranks (${[...hashes].join(', ')})`);
  }
  return results;
}

test('mpirun -np 2, MPI in the main thread: collectives, send/recv, broadcast match the serial reference', {
  skip,
  timeout: 120_000,
}, async () => {
  const results = assertAllPassed(await runJob(2, 'main'), 2);
  assert.deepEqual(
    results.map((r) => r.thread),
    ['main', 'main'],
  );
});

test('mpirun -np 3 (oversubscribed), MPI in worker threads on ranks 0 and 2, the main thread on rank 1', {
  skip,
  timeout: 120_000,
}, async () => {
  const results = assertAllPassed(await runJob(3, 'mixed'), 3);
  assert.deepEqual(
    results.map((r) => r.thread),
    ['worker', 'main', 'worker'],
  );
});

test('without mpirun, MPI starts a world of one (singleton) and every call still works', {
  skip,
  timeout: 120_000,
}, async () => {
  assertAllPassed(await runJob(0, 'worker'), 0);
});

test('abort() on one rank ends the whole job at once, with its reason', { skip, timeout: 120_000 }, async () => {
  const t0 = performance.now();
  const { code, output, results } = await runJob(2, 'abort');
  assert.notEqual(code, 0, output);
  assert.match(output, /rank 1 aborts the MPI job: rank 1 gives up on purpose \(test\)/);
  assert.deepEqual(results, [], 'rank 0 must not get past its allreduce');
  assert.ok(performance.now() - t0 < 60_000);
});

test('with PARATRAIN_MPI=0, init refuses with a clear MpiError', async () => {
  const before = process.env.PARATRAIN_MPI;
  process.env.PARATRAIN_MPI = '0'; // this process never loads the addon otherwise
  try {
    await assert.rejects(MpiCommunicator.init(), (err: Error) => {
      assert.equal(err.name, 'MpiError');
      assert.match(err.message, /MPI transport is not available: disabled by PARATRAIN_MPI=0/);
      return true;
    });
  } finally {
    if (before === undefined) delete process.env.PARATRAIN_MPI;
    else process.env.PARATRAIN_MPI = before;
  }
});
