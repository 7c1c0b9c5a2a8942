/**
 * What the calls (ring.ts, chain.ts) share: the pieces of the communicator they use, sending a
 * buffer's floats as data frames, and checking a received data frame against this rank's own call.
 *
 * Each data frame carries the collective's sequence number, kind, reduce op, root and length: a
 * rank called differently from its neighbour fails with CollectiveMismatchError naming both calls.
 */
import { CollectiveMismatchError } from '../errors.ts';
import type { DataEngines } from './dataEngines.ts';
import type { FailureState } from './failure.ts';
import { FrameType, frameTypeName, type Frame } from './frame.ts';
import type { Link } from './link.ts';
import type { ResolvedOptions } from './options.ts';
import type { PeerLinks } from './peerLinks.ts';
import type { FrameRouter } from './routing.ts';

/** Time in calls, time idle waiting for peers' data, payload bytes sent + received (see takeStats). */
export interface CallStats {
  commMs: number;
  idleMs: number;
  bytes: number;
}

export interface CallContext {
  readonly rank: number;
  readonly size: number;
  readonly o: ResolvedOptions;
  readonly links: PeerLinks;
  readonly router: FrameRouter;
  readonly failures: FailureState;
  readonly engines: DataEngines;
  readonly stats: CallStats;
  /** calls in progress (the native ring runs only when its call is alone) */
  active: number;
  /** the caller computes between event-loop turns (comm/overlap.ts): the native ring, which holds the thread, waits */
  computing: boolean;
  /** one reader per (source, tag) at a time: the tail of each one's chain of recvs */
  readonly recvLocks: Map<string, Promise<void>>;
}

/** A call as both ranks' messages name it, e.g. 'allreduce(mean) of 1000 floats'. */
export function describeCall(type: number, n: number, flags: number, arg: number): string {
  const name = frameTypeName(type);
  if (type === FrameType.Barrier) return 'barrier';
  const op =
    type === FrameType.Allreduce || type === FrameType.ReduceScatter
      ? `(${flags === 1 ? 'mean' : flags === 0 ? 'sum' : `op ${flags}`})`
      : '';
  const root = type === FrameType.Broadcast ? ` from root ${arg}` : '';
  return `${name}${op} of ${n} floats${root}`;
}

export function checkLength(buf: Float32Array): void {
  if (!(buf instanceof Float32Array)) throw new TypeError('TcpCommunicator: buffers must be Float32Array');
  if (buf.length > 0xffffffff) throw new RangeError('TcpCommunicator: buffers are limited to 2^32−1 floats');
}

/** Sends floats [a, b) of `bytes` (the buffer's bytes) to `out` in frames of at most chunkFloats. */
export function sendRange(
  ctx: CallContext,
  out: Link,
  sends: Promise<void>[],
  bytes: Buffer,
  a: number,
  b: number,
  type: number,
  tag: number,
  aux: number,
  flags: number,
  arg: number,
): void {
  const c = ctx.links.chunkFloats;
  // the first frame goes at once (its checksum is all it waits for), so the next rank starts;
  // the rest as one writev: the OS kernel moves big writes far more cheaply
  for (let s = a; s < b; s += c) {
    const e = Math.min(b, s + c);
    if (s === a + c) out.socket.cork();
    sends.push(out.send(type, tag, aux, bytes.subarray(s * 4, e * 4), flags, arg));
    ctx.stats.bytes += (e - s) * 4;
  }
  if (b - a > c) out.socket.uncork();
}

/** Sends floats [a, b) as one frame (forwarding what one frame brought), with a known checksum if given. */
export function sendFrame(
  ctx: CallContext,
  out: Link,
  sends: Promise<void>[],
  bytes: Buffer,
  a: number,
  b: number,
  type: number,
  tag: number,
  aux: number,
  flags: number,
  arg: number,
  check: number | undefined,
): void {
  sends.push(out.send(type, tag, aux, bytes.subarray(a * 4, b * 4), flags, arg, check));
  ctx.stats.bytes += (b - a) * 4;
}

/** Validates a collective data frame from rank p against this rank's own call; returns its floats. */
export function dataOf(
  ctx: CallContext,
  f: Frame,
  p: number,
  seq: number,
  type: number,
  n: number,
  flags: number,
  arg: number,
  room: number,
): Float32Array {
  if (f.type !== type || f.aux !== n || f.flags !== flags || f.arg !== arg) {
    throw new CollectiveMismatchError(
      `collective #${seq}: rank ${ctx.rank} called ${describeCall(type, n, flags, arg)}, ` +
        `but rank ${p} called ${describeCall(f.type, f.aux, f.flags, f.arg)}`,
    );
  }
  if (f.length % 4 !== 0 || f.length / 4 > room) {
    throw new CollectiveMismatchError(
      `collective #${seq} (${describeCall(type, n, flags, arg)}): rank ${p} sent ${f.length} bytes where ` +
        `rank ${ctx.rank} expected at most ${room} floats`,
    );
  }
  ctx.stats.bytes += f.length;
  return new Float32Array(f.payload.buffer, f.payload.byteOffset, f.length / 4);
}
