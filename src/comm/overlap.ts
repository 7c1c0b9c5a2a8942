/**
 * Collectives that move while their caller computes. A transport whose calls progress in the
 * event loop overlaps a call with computation that yields to the event loop now and then
 * (hybrid's gradient buckets during backward): TCP, whose socket reads and writes and ring steps
 * run from I/O callbacks, and MPI, whose collectives are non-blocking (MPI_Iallreduce) and tested
 * with MPI_Test once per turn — Open MPI progresses them only inside MPI calls, so those tests
 * between the caller's layers are their progress. The transport is told while such computation
 * runs, so that no call holds the thread meanwhile (the native TCP ring waits for data inside one
 * synchronous call; MPI would wait in MPI_Wait). Shared memory's collectives block the thread and
 * so run inline where they are called; the hierarchical allreduce over TCP overlaps the part
 * that crosses processes (comm/hierarchical.ts).
 */
import type { Communicator } from './communicator.ts';

export interface BackgroundCollectives {
  /** calls progress in this thread's event loop between the caller's turns */
  readonly progressesInBackground: true;
  /**
   * The caller computes from now (true) until told false: calls may not hold the thread
   * meanwhile, and a call made meanwhile may complete only after false (the hierarchical
   * allreduce defers its allgather to then), so the caller awaits none of them before that.
   */
  computing(on: boolean): void;
}

/** `comm`'s background progress, or null when its calls block the thread (or it does not say). */
export function backgroundCollectives(comm: Communicator): BackgroundCollectives | null {
  const c = comm as Communicator & Partial<BackgroundCollectives>;
  return c.progressesInBackground === true && typeof c.computing === 'function'
    ? (c as Communicator & BackgroundCollectives)
    : null;
}

/** One turn of the event loop (its I/O phase included): what computation awaits to let calls progress. */
export function eventLoopTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
