/**
 * Collectives that move while their caller computes. A transport whose calls progress in the
 * event loop (TCP: socket reads and writes, the ring's steps run from I/O callbacks) overlaps a
 * call with computation that yields to the event loop now and then (hybrid's gradient buckets
 * during backward). It is told while such computation runs, so that no call holds the thread
 * meanwhile (the native ring waits for data inside one synchronous call); the other transports'
 * collectives block the thread (shared memory, MPI) and so run inline where they are called.
 */
import type { Communicator } from './communicator.ts';

export interface BackgroundCollectives {
  /** calls progress in this thread's event loop between the caller's turns */
  readonly progressesInBackground: true;
  /** the caller computes from now (true) until told false: calls may not hold the thread meanwhile */
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
