/** Initialises MPI in the calling thread, runs the checks, closes; used by rank.ts and threadRank.ts. */
import { MpiCommunicator } from '../../../src/comm/mpi/index.ts';
import { runChecks, type MpiRankResult } from './checks.ts';

export const envRank = Number(process.env.OMPI_COMM_WORLD_RANK ?? process.env.PMI_RANK ?? 0);

/** `onInitialised` runs once MPI is up, before the checks (the worker thread's handshake with main). */
export async function runRank(
  thread: string,
  onInitialised: () => Promise<void> = async () => {},
): Promise<MpiRankResult> {
  const out: MpiRankResult = { rank: envRank, size: -1, thread, failures: [], hashes: {} };
  try {
    const comm = await MpiCommunicator.init();
    out.rank = comm.rank;
    out.size = comm.size;
    out.library = comm.library;
    if (comm.rank !== envRank) out.failures.push(`MPI rank ${comm.rank} differs from OMPI_COMM_WORLD_RANK ${envRank}`);
    await onInitialised();
    await runChecks(comm, out);
    await comm.close();
    await comm.close(); // idempotent
    const after = await comm.barrier().then(
      () => undefined,
      (e: Error) => e,
    );
    if (!after || !/after close\(\)/.test(after.message))
      out.failures.push(`a call after close(): ${after?.message ?? 'no error'}`);
  } catch (err) {
    out.error = `${(err as Error).name}: ${(err as Error).message}`;
  }
  return out;
}
