/**
 * One process of mpi-overlap.test.ts: `mpirun -np N node --import tsx test/comm/mpi/overlapRank.ts OUT_DIR`.
 * Writes OUT_DIR/rank-R.json (an OverlapRankResult):
 *
 * - bits: hybrid on the small dense model of overlapSteps.ts for 3 steps, with buckets of 4 bytes
 *   (every layer its own) and of 4 KiB, each with the MPI transport's background progress shown
 *   (buckets polled with MPI_Test between layers) and hidden (each reduced inline, MPI_Wait): the
 *   weights' hash after each run.
 * - overlap: one step in which rank 0's backward takes BUSY_MS per layer while the other ranks
 *   join the first bucket JOIN_DELAY_MS late: how long rank 0's first allreduce held the thread,
 *   and, per layer, whether that bucket had completed (it can only complete while backward runs
 *   if backward's turns test it).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { MpiCommunicator } from '../../../src/comm/mpi/index.ts';
import type { Communicator } from '../../../src/comm/communicator.ts';
import { hybridStrategy } from '../../../src/parallel/strategies/hybrid.ts';
import { announceAll, device, model, step, withoutOverlap } from '../overlapSteps.ts';

export interface OverlapRankResult {
  rank: number;
  size: number;
  /** weights' crc32 by run: `b<bucketBytes>-<on|off>` */
  hashes: Record<string, string>;
  /** training moved the weights */
  moved: boolean;
  /** rank 0 only: ms its first bucket's allreduce call held the thread */
  firstCallMs?: number;
  /** rank 0 only: per layer of backward, whether the first bucket had completed */
  seen?: boolean[];
  error?: string;
}

const BUSY_MS = 80;
const JOIN_DELAY_MS = 400;
const OVERLAP_LAYERS = 16;

const [outDir] = process.argv.slice(2);
if (!outDir) throw new Error('usage: overlapRank.ts OUT_DIR');

const hash = (a: Float32Array) => crc32(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).toString(16);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

async function bits(comm: MpiCommunicator, out: OverlapRankResult): Promise<void> {
  const initial = model().params.slice();
  for (const bucketBytes of [4, 4096]) {
    for (const overlap of [true, false]) {
      const m = model();
      const s = hybridStrategy(overlap ? comm : withoutOverlap(comm), bucketBytes);
      await s.onStart!(device(m));
      for (let k = 0; k < 3; k++) await step(m, s, comm.rank, k);
      out.hashes[`b${bucketBytes}-${overlap ? 'on' : 'off'}`] = hash(m.params);
      out.moved = m.params.some((w, i) => w !== initial[i]);
    }
  }
}

async function overlapStep(comm: MpiCommunicator, out: OverlapRankResult): Promise<void> {
  const m = model(OVERLAP_LAYERS);
  const s = hybridStrategy(comm, 4); // every layer's gradient a bucket of its own
  await s.onStart!(device(m));
  await comm.barrier();
  if (comm.rank !== 0) {
    await sleep(JOIN_DELAY_MS);
    await announceAll(m, s);
    return;
  }
  const original = comm.allreduce.bind(comm);
  let firstDone = false;
  const timed: Communicator['allreduce'] = (buf, op) => {
    const t0 = performance.now();
    const p = original(buf, op); // runs synchronously up to its first await: a blocking wait happens in here
    out.firstCallMs = performance.now() - t0;
    void p.then(() => (firstDone = true));
    comm.allreduce = original;
    return p;
  };
  comm.allreduce = timed;
  out.seen = [];
  await step(m, s, 0, 0, () => {
    out.seen!.push(firstDone);
    busy(BUSY_MS);
  });
}

const comm = await MpiCommunicator.init();
const out: OverlapRankResult = { rank: comm.rank, size: comm.size, hashes: {}, moved: false };
try {
  await bits(comm, out);
  await overlapStep(comm, out);
} catch (err) {
  out.error = `${(err as Error).name}: ${(err as Error).message}`;
}
writeFileSync(join(outDir, `rank-${comm.rank}.json`), JSON.stringify(out));
await comm.close();
