/**
 * Collective and point-to-point communication between the ranks of one job. Transports
 * (shared memory between worker threads, TCP between processes) implement the same calls;
 * every call is async so a network transport fits behind it.
 *
 * Collectives operate IN PLACE on flat Float32Array buffers (or slices of them) and must be called
 * by every rank of the communicator in the same order with buffers of the same length.
 */

import { evenSlice } from '../tensor/shape.ts';

export type ReduceOp = 'sum' | 'mean';

/** The part [start, end) of a buffer of length n that a rank owns in reduceScatter/allgather. */
export function ownedSlice(n: number, size: number, rank: number): { start: number; end: number } {
  return evenSlice(n, size, rank);
}

export interface CollectiveStats {
  /** milliseconds spent inside collectives, waiting for peers included */
  commMs: number;
  /** of which idle, waiting for the slowest peer to arrive */
  idleMs: number;
  /** payload bytes this rank moved (read from peers + written) */
  bytes: number;
}

export interface Communicator {
  readonly rank: number;
  readonly size: number;
  /** Every rank's `buf` becomes the elementwise sum (or mean) over all ranks' `buf`. */
  allreduce(buf: Float32Array, op?: ReduceOp): Promise<void>;
  /**
   * Like allreduce, but only this rank's owned slice (ownedSlice(buf.length, size, rank)) is
   * guaranteed to hold the result afterwards; returns that slice's bounds.
   */
  reduceScatter(buf: Float32Array, op?: ReduceOp): Promise<{ start: number; end: number }>;
  /** Every rank contributes its owned slice of `buf`; afterwards every rank holds all slices. */
  allgather(buf: Float32Array): Promise<void>;
  /** Every rank's `buf` becomes root's `buf`. */
  broadcast(buf: Float32Array, root: number): Promise<void>;
  barrier(): Promise<void>;
  /** Point to point; a send completes when the receiver has the data or it is safely buffered. */
  send(buf: Float32Array, dest: number, tag?: number): Promise<void>;
  recv(buf: Float32Array, source: number, tag?: number): Promise<void>;
  /**
   * Optional: sends `buf` only if the send completes at once, without waiting for the receiver
   * (the data is copied into a free buffer: the shm mailbox). Returns whether it sent; false:
   * nothing was sent. Lets a caller send ahead of a receive it would otherwise wait on first.
   */
  trySend?(buf: Float32Array, dest: number, tag?: number): boolean;
  /**
   * Optional, collective: announces a buffer that later collectives will be called on, so a
   * shared-memory transport can read peers' copies directly. Transports without it copy.
   */
  register?(buf: Float32Array): Promise<void>;
  /** Time and bytes spent in collectives since the last call (then reset). */
  takeStats(): CollectiveStats;
}
