/**
 * The ring collectives: reduce-scatter, allgather, and allreduce as the one then the other, with
 * their frames pipelined (see index.ts for the algorithm). The steps of a call are one list that
 * either this file's loop or the native ring (nativeRing.ts) advances, handing over at frame
 * boundaries.
 */
import { ownedSlice, type ReduceOp } from '../communicator.ts';
import { CollectiveMismatchError, CommTimeoutError } from '../errors.ts';
import { dataOf, describeCall, sendFrame, sendRange, type CallContext } from './callFrames.ts';
import { peerDied } from './failure.ts';
import { FrameError, FrameType } from './frame.ts';
import type { LandingRange } from './landing.ts';
import { NativeRing, type NativeRingOutcome, type RingStep } from './nativeRing.ts';

const OP_FLAGS: Record<ReduceOp, number> = { sum: 0, mean: 1 };
/** longest the native ring waits for data before handing the wait back to the event loop, ms */
const NATIVE_SLICE_MS = 100;

/** The ring calls: reduce-scatter only, allgather only, or both (allreduce). */
export const RING_CALLS = {
  allreduce: { type: FrameType.Allreduce, rs: true, ag: true },
  reduceScatter: { type: FrameType.ReduceScatter, rs: true, ag: false },
  allgather: { type: FrameType.Allgather, rs: false, ag: true },
} as const;

/**
 * Frame size of the native ring: at most chunkFloats, but a segment goes as ≥ 8 frames (of ≥ 64
 * KiB), so the next rank starts reducing and forwarding after an eighth of it: with no event
 * loop per frame, small frames cost little, while very small ones cost more than they overlap.
 */
function nativeChunkFloats(segmentFloats: number, chunkFloats: number): number {
  return Math.min(chunkFloats, Math.max(16384, Math.ceil(segmentFloats / 8)));
}

/** dst[i] += src[i] in float32 (unrolled: V8 does not vectorise, but this halves loop overhead) */
function addInto(dst: Float32Array, src: Float32Array): void {
  const n = src.length;
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    dst[i] = dst[i]! + src[i]!;
    dst[i + 1] = dst[i + 1]! + src[i + 1]!;
    dst[i + 2] = dst[i + 2]! + src[i + 2]!;
    dst[i + 3] = dst[i + 3]! + src[i + 3]!;
  }
  for (; i < n; i++) dst[i] = dst[i]! + src[i]!;
}

function divideBy(dst: Float32Array, d: number): void {
  for (let i = 0, n = dst.length; i < n; i++) dst[i] = dst[i]! / d;
}

/** Runs one ring call on `buf` in place. */
export async function ring(
  ctx: CallContext,
  buf: Float32Array,
  op: ReduceOp,
  call: (typeof RING_CALLS)[keyof typeof RING_CALLS],
): Promise<void> {
  const { type, rs, ag } = call;
  const N = ctx.size,
    r = ctx.rank,
    n = buf.length;
  const seq = ctx.router.nextSeq();
  if (N === 1) return;
  const left = (r - 1 + N) % N,
    right = (r + 1) % N;
  const q = ctx.router.collQueue(left, seq);
  let unplan = () => {};
  try {
    const flags = rs ? OP_FLAGS[op] : 0;
    const bytes = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
    const seg = (k: number) => ownedSlice(n, N, ((k % N) + N) % N);
    const what = `${describeCall(type, n, flags, 0)} (collective #${seq})`;
    // what arrives, step by step: reduce-scatter, then allgather (see index.ts)
    const steps: RingStep[] = [];
    for (let s = 0; rs && s < N - 1; s++)
      steps.push({
        ...seg(r - 2 - s),
        reduce: true,
        forward: s < N - 2 || ag,
        div: s === N - 2 && op === 'mean' ? N : 0,
      });
    for (let s = 0; ag && s < N - 1; s++) steps.push({ ...seg(r - 1 - s), reduce: false, forward: s < N - 2, div: 0 });
    const first = rs ? seg(r - 1) : seg(r);
    const fields = { type, flags, arg: 0, tag: seq, aux: n };
    const out = await ctx.links.outLink(right);
    const sends: Promise<void>[] = [];
    let step = 0,
      cur = steps[0]!.start,
      sent = false,
      waited = false;
    /** false after a hand-over until the JS ring has taken a frame: the event loop gets its turn */
    let mayNative = true;

    /** Lets the native ring run from (step, cur) if it can now: false when it did not run, 'aborted' when a peer's Abort waits to be read. */
    const native = (): boolean | 'aborted' => {
      const nativeRing = ctx.engines.nativeRing;
      const inLink = ctx.links.inLinks[left];
      // while the caller computes, a wait in C would hold its thread: the event loop moves the call then
      if (ctx.computing) return false;
      if (!mayNative || !nativeRing || ctx.active !== 1 || !q.isEmpty || !NativeRing.ready(inLink, out, seq))
        return false;
      unplan();
      unplan = () => {};
      const res = nativeRing.run(
        inLink,
        out,
        buf,
        steps,
        step,
        cur,
        sent ? { start: 0, end: 0 } : first,
        fields,
        {
          chunkFloats: nativeChunkFloats(first.end - first.start, ctx.links.chunkFloats),
          maxFrameBytes: ctx.o.maxFrameBytes,
          sliceMs: NATIVE_SLICE_MS,
          timeoutMs: ctx.o.recvTimeoutMs,
        },
        ctx.links.watchFds(inLink),
      );
      ctx.stats.bytes += res.bytes;
      sent = true;
      if (res.kind === 'aborted') return 'aborted';
      if (res.kind === 'error') throw nativeRingError(ctx, res, left, right, what);
      if (!waited && (res.step !== step || res.cur !== cur)) {
        ctx.stats.idleMs += res.idleMs;
        waited = true;
      }
      step = res.step;
      cur = res.cur;
      // handed over (idle, or a frame it does not expect): control frames, timers and the JS
      // timeout run before the native ring may try again
      if (res.kind === 'handover') mayNative = false;
      return true;
    };

    const started = native();
    if (started === 'aborted') throw await peerAbort(ctx, what);
    if (!started) {
      if (ag) {
        const ranges: LandingRange[] = steps.map((s) => ({ start: s.start, end: s.end, land: !s.reduce }));
        unplan = ctx.router.planLanding(left, seq, bytes, { type, aux: n, flags, arg: 0 }, ranges);
      }
      sendRange(ctx, out, sends, bytes, first.start, first.end, type, seq, n, flags, 0);
      sent = true;
    }
    while (step < steps.length) {
      const s = steps[step]!;
      if (cur >= s.end) {
        if (++step < steps.length) cur = steps[step]!.start;
        continue;
      }
      // a clean moment (our sends written, nothing of this call pending): the native ring takes the rest
      const ran = native();
      if (ran === 'aborted') throw await peerAbort(ctx, what);
      if (ran) continue;
      const t = performance.now();
      const f = await ctx.router.take(q, left, what);
      if (!waited) ctx.stats.idleMs += performance.now() - t;
      waited = true;
      mayNative = true;
      const src = dataOf(ctx, f, left, seq, type, n, flags, 0, s.end - cur);
      const m = src.length;
      if (m === 0) throw new CollectiveMismatchError(`collective #${seq}: rank ${left} sent an empty data frame`);
      if (s.reduce) {
        const dst = buf.subarray(cur, cur + m);
        let check = 0;
        if (f.slot) {
          check = ctx.engines.dataPath.reduceInto(dst, f.payload, s.div, s.forward);
          ctx.engines.dataPath.putSlot(f.payload);
        } else {
          addInto(dst, src);
          if (s.div) divideBy(dst, s.div);
        }
        if (s.forward)
          sendFrame(ctx, out, sends, bytes, cur, cur + m, type, seq, n, flags, 0, f.slot ? check : undefined);
      } else {
        ctx.router.store(f, src, buf, cur, seq);
        // the same bytes go on: their checksum is known
        if (s.forward) sendFrame(ctx, out, sends, bytes, cur, cur + m, type, seq, n, flags, 0, f.check);
      }
      cur += m;
    }
    await Promise.all(sends);
  } finally {
    unplan();
    ctx.router.dropCollQueue(left, seq);
  }
}

/** how long a call whose native ring saw a peer's Abort waits for the event loop to read it, ms */
const ABORT_READ_MS = 10_000;

/** The job's failure once the peer's Abort the native ring saw has been read (the event loop reads it now). */
async function peerAbort(ctx: CallContext, what: string): Promise<Error> {
  return (
    (await ctx.failures.within(ABORT_READ_MS)) ??
    new Error(
      `rank ${ctx.rank}: ${what}: a peer's Abort was seen on a connection but not read within ${ABORT_READ_MS} ms`,
    )
  );
}

/** The error of a failed native ring run, as the JavaScript ring would report it; ends the link concerned. */
function nativeRingError(
  ctx: CallContext,
  res: Extract<NativeRingOutcome, { kind: 'error' }>,
  left: number,
  right: number,
  what: string,
): Error {
  const p = res.side === 'in' ? left : right;
  if (res.timeout) {
    return new CommTimeoutError(
      `rank ${ctx.rank}: ${what} timed out after ${ctx.o.recvTimeoutMs} ms ` +
        `${res.side === 'in' ? 'waiting for data from' : 'sending to'} ${ctx.links.peerDesc(p)} (${res.message})`,
      [p],
      ctx.o.recvTimeoutMs,
    );
  }
  const link = res.side === 'in' ? ctx.links.inLinks[left] : ctx.links.outLinks[right];
  const err = res.malformed ? new FrameError(res.message) : new Error(res.message);
  link?.destroy(err);
  const what2 = res.malformed ? `sent a malformed frame (${res.message})` : `connection failed (${res.message})`;
  return ctx.failures.failure ?? peerDied(ctx.rank, p, ctx.links.peerDesc(p), what2);
}
