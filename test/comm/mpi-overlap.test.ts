/**
 * Hybrid's gradient buckets overlap backward over the MPI transport too (comm/overlap.ts): while
 * hybrid computes, a collective is MPI_Iallreduce polled with MPI_Test in the event loop's turns
 * between layers, and otherwise MPI_Iallreduce + MPI_Wait — one algorithm, so overlap changes no
 * bit. Between real processes of an mpirun job (the rank script is mpi/overlapRank.ts):
 *
 * - the weights after 3 steps are the same bits with overlap on and off (every rank, buckets of one
 *   layer and of several), on 2 and 4 processes;
 * - a bucket in flight does not hold the thread and completes while backward still runs: rank 0's
 *   backward takes 80 ms per layer, the other ranks join its first bucket 400 ms late; the call
 *   returns at once, and the bucket completes before backward's last layer.
 *
 * Skipped, with the reason, where mpirun or the addon (npm run build:mpi) is absent.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import type { OverlapRankResult } from './mpi/overlapRank.ts';
import { mpiSkip as skip, runMpiJob } from './mpi/job.ts';

const script = fileURLToPath(new URL('./mpi/overlapRank.ts', import.meta.url));

async function job(np: number): Promise<OverlapRankResult[]> {
  const { code, output, results } = await runMpiJob<OverlapRankResult>(script, np);
  assert.equal(code, 0, `the job exited with code ${code}:\n${output.slice(-3000)}`);
  assert.equal(results.length, np, `expected ${np} result files:\n${output.slice(-3000)}`);
  for (const r of results) assert.equal(r.error, undefined, `rank ${r.rank}: ${r.error}`);
  return results;
}

function assertSameBits(results: OverlapRankResult[]): void {
  for (const r of results) {
    assert.ok(r.moved, `rank ${r.rank}: training did not move the weights`);
    for (const b of ['b4', 'b4096'])
      assert.equal(
        r.hashes[`${b}-on`],
        r.hashes[`${b}-off`],
        `rank ${r.rank}, ${b}: overlap changed the weights' bits`,
      );
  }
  // every replica holds the same weights
  for (const r of results) assert.deepEqual(r.hashes, results[0]!.hashes, `rank ${r.rank} differs from rank 0`);
}

function assertOverlapped(results: OverlapRankResult[]): void {
  const { firstCallMs, seen } = results[0]!;
  assert.ok(
    firstCallMs !== undefined && firstCallMs < 200,
    `the first bucket's allreduce held the thread for ${firstCallMs?.toFixed(0)} ms (its peers joined 400 ms late): it blocked instead of returning to backward`,
  );
  assert.equal(seen?.length, 16);
  assert.ok(
    seen!.slice(0, -1).some((done) => done),
    `the first bucket completed only after backward ended (seen: ${seen!.join(',')}): nothing tested it between layers`,
  );
}

test('mpirun -np 2: hybrid overlapped over MPI gives the same bits as without overlap; a bucket moves during backward', {
  skip,
  timeout: 120_000,
}, async () => {
  const results = await job(2);
  assertSameBits(results);
  // with 2 ranks each sum is one addition: the bucket sizes cannot change a bit either
  assert.equal(results[0]!.hashes['b4-on'], results[0]!.hashes['b4096-on']);
  assertOverlapped(results);
});

test('mpirun -np 4 (oversubscribed): overlap changes no bit; a bucket moves during backward', {
  skip,
  timeout: 180_000,
}, async () => {
  const results = await job(4);
  assertSameBits(results);
  assertOverlapped(results);
});
