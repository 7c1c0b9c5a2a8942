/**
 * One process of an MPI test job: `mpirun -np N node --import tsx test/comm/mpi/rank.ts OUT_DIR MODE`.
 * MODE says which thread initialises MPI and runs the checks: 'main', 'worker' (a worker thread),
 * or 'mixed' (a worker thread on even ranks, the main thread on odd ones). Each rank writes
 * OUT_DIR/rank-R.json (an MpiRankResult) and exits 0 unless it crashed.
 *
 * With a worker thread, the main thread also checks that it is refused while the worker owns MPI:
 * MpiCommunicator.init() says MPI is already initialised, and a direct addon call names the
 * thread rule.
 *
 * MODE 'abort': rank 1 calls abort() while the others wait in an allreduce; mpirun must end the
 * whole job (no result files).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MpiCommunicator, loadMpiAddon } from '../../../src/comm/mpi/index.ts';
import { spawnTsWorker } from '../helpers.ts';
import type { MpiRankResult } from './checks.ts';
import { envRank, runRank } from './runRank.ts';

const [outDir, mode = 'main'] = process.argv.slice(2);
if (!outDir) throw new Error('usage: rank.ts OUT_DIR [main|worker|mixed]');
const inWorker = mode === 'worker' || (mode === 'mixed' && envRank % 2 === 0);

function write(result: MpiRankResult): void {
  writeFileSync(join(outDir!, `rank-${result.rank}.json`), JSON.stringify(result));
}

/** The main thread's checks while a worker thread owns MPI. */
async function refusedHere(): Promise<string[]> {
  const failures: string[] = [];
  const init = await MpiCommunicator.init().then(
    () => undefined,
    (e: Error) => e,
  );
  if (!init || !/already initialised/.test(init.message))
    failures.push(`main thread init while a worker owns MPI: ${init?.message ?? 'no error'}`);
  let direct: Error | undefined;
  try {
    loadMpiAddon()!.barrier();
  } catch (e) {
    direct = e as Error;
  }
  if (!direct || !/another thread/.test(direct.message))
    failures.push(`main thread MPI call while a worker owns MPI: ${direct?.message ?? 'no error'}`);
  return failures;
}

if (mode === 'abort') {
  const comm = await MpiCommunicator.init();
  if (comm.rank === 1) {
    await new Promise((resolve) => setTimeout(resolve, 200)); // the others are in the allreduce by then
    comm.abort('rank 1 gives up on purpose (test)', 3);
  }
  await comm.allreduce(new Float32Array(1000));
  write({
    rank: comm.rank,
    size: comm.size,
    thread: 'main',
    failures: ['the allreduce returned although rank 1 aborted'],
    hashes: {},
  });
} else if (!inWorker) {
  write(await runRank('main'));
} else {
  const worker = spawnTsWorker(new URL('./threadRank.ts', import.meta.url), {});
  const mainFailures: string[] = [];
  let result: MpiRankResult | undefined;
  worker.on('message', (m: { type: 'initialised' } | { type: 'result'; result: MpiRankResult }) => {
    if (m.type === 'result') result = m.result;
    else
      void refusedHere().then((f) => {
        mainFailures.push(...f);
        worker.postMessage('go');
      });
  });
  worker.on('error', (e) => {
    mainFailures.push(`worker error: ${e.message}`);
  });
  const code = await new Promise<number>((resolve) => worker.on('exit', resolve));
  const r = result ?? {
    rank: envRank,
    size: -1,
    thread: 'worker',
    failures: [],
    hashes: {},
    error: `the worker exited with code ${code} without a result`,
  };
  r.failures.push(...mainFailures);
  write(r);
}
