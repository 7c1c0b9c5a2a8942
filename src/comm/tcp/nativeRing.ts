/**
 * The native ring (native/tcp/ring.c): runs the frames of a ring collective on the two ring
 * sockets in C, with the JavaScript event loop out of the way — the data path of Gloo or MPI.
 *
 * The collective is a list of steps (RingStep), the same list the JavaScript ring walks; either
 * side can advance it. The native side takes over only at a clean moment — nothing of this call
 * queued or half-read on the left link (a header held before its payload, FrameDecoder.hold, is
 * taken over), nothing of ours unwritten on the right one — with the left socket's reading
 * paused, and gives back at a frame boundary on anything unexpected (another call's frame, an
 * Abort, a malformed header, the end of the stream), after `sliceMs` without data, or as soon as
 * one of `watch` — this rank's other connections, which only JavaScript reads — has something to
 * read: a peer that aborts sends its Abort on every connection, and on the ring's it would wait
 * behind the data still queued there. JavaScript then continues the same steps and reports any
 * error as it always does.
 */
import type { TcpNativeAddon } from './nativeDataPath.ts';
import type { Link } from './link.ts';

export interface RingStep {
  /** floats of the buffer this step receives, in order */
  start: number;
  end: number;
  /** add into the buffer (reduce-scatter) or store (allgather) */
  reduce: boolean;
  /** send the result on to the right */
  forward: boolean;
  /** divide the sum by this when non-zero (mean, the last reduce step) */
  div: number;
}

export interface RingFrameFields {
  type: number;
  flags: number;
  arg: number;
  tag: number;
  aux: number;
}

export type NativeRingOutcome =
  | { kind: 'done' | 'handover'; step: number; cur: number; idleMs: number; bytes: number }
  | { kind: 'error'; side: 'in' | 'out'; timeout: boolean; malformed: boolean; message: string; bytes: number }
  /** a peer's Abort is waiting to be read (on the ring's left link or another): the call is to fail with it */
  | { kind: 'aborted'; bytes: number };

const STATUS_HANDOVER = 1,
  STATUS_ERROR = 2,
  STATUS_ABORTED = 3;
const ABORT_IN = 1;
const ERR_FRAME = 1,
  ERR_IO_OUT = 4,
  ERR_TIMEOUT_IN = 5,
  ERR_TIMEOUT_OUT = 6;

export class NativeRing {
  private readonly io = new Float64Array(25);
  /** [0, 32): the left link's next header; [32, 64): a frame the ring was in the middle of sending when aborted */
  private readonly head = Buffer.alloc(64);
  private slot: Uint8Array | undefined;

  private constructor(
    private readonly ring: NonNullable<TcpNativeAddon['ring']>,
    private readonly slotBytes: number,
  ) {}

  /** The native ring of `addon` (slots of `maxFrameBytes`), or null where the addon has none. */
  static of(addon: TcpNativeAddon | null, maxFrameBytes: number): NativeRing | null {
    return addon?.ring ? new NativeRing(addon.ring.bind(addon), maxFrameBytes) : null;
  }

  /**
   * Whether the native ring may take over the ring between `inLink` and `out` now, for the call
   * whose frames carry `tag`: the left link is between frames, or holds a header of that call.
   */
  static ready(inLink: Link | undefined, out: Link, tag: number): inLink is Link {
    if (!inLink || inLink.isEnded || inLink.fd === undefined || out.fd === undefined || !out.flushed) return false;
    const held = inLink.frames.heldHeader;
    return held ? held.tag === tag >>> 0 : inLink.frames.idle;
  }

  /**
   * Runs steps[step…] from float `cur`, after sending floats [sendStart, sendEnd) in frames of
   * chunkFloats (none when equal). Blocks this thread until done, handed over or failed.
   */
  run(
    inLink: Link,
    out: Link,
    buf: Float32Array,
    steps: readonly RingStep[],
    step: number,
    cur: number,
    send: { start: number; end: number },
    fields: RingFrameFields,
    o: { chunkFloats: number; maxFrameBytes: number; sliceMs: number; timeoutMs: number },
    watch: readonly number[] = [],
  ): NativeRingOutcome {
    this.slot ??= new Uint8Array(this.slotBytes);
    const st = new Float64Array(steps.length * 5);
    for (const [i, s] of steps.entries()) st.set([s.start, s.end, s.reduce ? 1 : 0, s.forward ? 1 : 0, s.div], i * 5);
    const io = this.io;
    io.fill(0);
    // a held header is read already: the native side starts with it
    const held = inLink.frames.takeHeld();
    if (held) held.copy(this.head);
    io.set([
      send.start,
      send.end,
      fields.type,
      fields.flags,
      fields.arg,
      fields.tag >>> 0,
      fields.aux >>> 0,
      o.chunkFloats,
      o.maxFrameBytes,
      o.sliceMs,
      o.timeoutMs,
      inLink.frames.expectedSeq,
      out.sendSeq,
      step,
      cur,
    ]);
    io[18] = held ? held.length : 0;
    inLink.socket.pause();
    let message: string | undefined;
    // an Abort seen on another connection may leave the left link in the middle of a frame: it stays paused
    let resume = true;
    try {
      message = this.ring(inLink.fd!, out.fd!, buf, this.slot, st, io, this.head, Int32Array.from(watch));
      resume = !(io[15] === STATUS_ABORTED && io[16] !== ABORT_IN);
    } finally {
      inLink.frames.expectedSeq = io[11]!;
      out.sendSeq = io[12]!;
      inLink.bytesIn += io[20]!;
      out.bytesOut += io[21]!;
      if (resume) inLink.socket.resume();
    }
    const bytes = io[20]! + io[21]!;
    const status = io[15]!;
    if (status === STATUS_ABORTED) {
      this.finishPartialSend(out, buf);
      if (io[16] === ABORT_IN) inLink.frames.push(Buffer.from(this.head.subarray(0, 32)));
      return { kind: 'aborted', bytes };
    }
    if (status === STATUS_ERROR) {
      const kind = io[16]!;
      const side = kind === ERR_IO_OUT || kind === ERR_TIMEOUT_OUT ? 'out' : 'in';
      return {
        kind: 'error',
        side,
        timeout: kind === ERR_TIMEOUT_IN || kind === ERR_TIMEOUT_OUT,
        malformed: kind === ERR_FRAME,
        message: message ?? 'native ring failed',
        bytes,
      };
    }
    // the header bytes already read belong to the decoder; a malformed one ends the link there
    const fill = io[18]!;
    if (fill > 0) {
      try {
        inLink.frames.push(Buffer.from(this.head.subarray(0, fill)));
      } catch (err) {
        inLink.destroy(err as Error);
      }
    }
    return {
      kind: status === STATUS_HANDOVER ? 'handover' : 'done',
      step: io[13]!,
      cur: io[14]!,
      idleMs: io[19]!,
      bytes,
    };
  }

  /** The rest of a frame the aborted ring was in the middle of sending goes through Node, so what follows (this rank's Abort) starts at a frame boundary. */
  private finishPartialSend(out: Link, buf: Float32Array): void {
    const [written, payloadFloat, length] = [this.io[22]!, this.io[23]!, this.io[24]!];
    if (written <= 0) return;
    const frame = Buffer.concat([
      this.head.subarray(32, 64),
      Buffer.from(buf.buffer, buf.byteOffset + payloadFloat * 4, length),
    ]);
    out.socket.write(frame.subarray(written));
  }
}
