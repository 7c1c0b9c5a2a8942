/**
 * The collectives that are not rings: broadcast, a pipelined chain root → root+1 → … → root−1
 * (each rank stores a frame and forwards it at once), and barrier, by dissemination in
 * ⌈log2 N⌉ rounds (round k: send to rank+2^k, hear from rank−2^k).
 */
import { CollectiveMismatchError } from '../errors.ts';
import { dataOf, describeCall, sendFrame, sendRange, type CallContext } from './callFrames.ts';
import { FrameType } from './frame.ts';
import type { FrameQueue } from './queue.ts';

export async function broadcast(ctx: CallContext, buf: Float32Array, root: number): Promise<void> {
  const N = ctx.size,
    r = ctx.rank,
    n = buf.length;
  const seq = ctx.router.nextSeq();
  if (N === 1) return;
  const pos = (r - root + N) % N;
  const left = (r - 1 + N) % N,
    right = (r + 1) % N;
  const type = FrameType.Broadcast;
  const bytes = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const sends: Promise<void>[] = [];
  const q = pos > 0 ? ctx.router.collQueue(left, seq) : undefined;
  const unplan =
    pos > 0
      ? ctx.router.planLanding(left, seq, bytes, { type, aux: n, flags: 0, arg: root }, [
          { start: 0, end: n, land: true },
        ])
      : () => {};
  try {
    const out = pos < N - 1 ? await ctx.links.outLink(right) : undefined;
    if (pos === 0) {
      sendRange(ctx, out!, sends, bytes, 0, n, type, seq, n, 0, root);
    } else {
      const what = `${describeCall(type, n, 0, root)} (collective #${seq})`;
      let first = true;
      for (let cur = 0; cur < n; ) {
        const t = performance.now();
        const f = await ctx.router.take(q!, left, what);
        if (first) ctx.stats.idleMs += performance.now() - t;
        first = false;
        const src = dataOf(ctx, f, left, seq, type, n, 0, root, n - cur);
        if (src.length === 0)
          throw new CollectiveMismatchError(`collective #${seq}: rank ${left} sent an empty data frame`);
        ctx.router.store(f, src, buf, cur, seq);
        if (out) sendFrame(ctx, out, sends, bytes, cur, cur + src.length, type, seq, n, 0, root, f.check);
        cur += src.length;
      }
    }
    await Promise.all(sends);
  } finally {
    unplan();
    if (q) ctx.router.dropCollQueue(left, seq);
  }
}

export async function barrier(ctx: CallContext): Promise<void> {
  const N = ctx.size,
    r = ctx.rank;
  const seq = ctx.router.nextSeq();
  const sends: Promise<void>[] = [];
  const t0 = performance.now();
  // every round's queue exists before the first await: a later round's frame may come early
  const rounds: { to: number; from: number; q: FrameQueue }[] = [];
  for (let k = 1; k < N; k *= 2) {
    const from = (r - k + N) % N;
    rounds.push({ to: (r + k) % N, from, q: ctx.router.collQueue(from, seq) });
  }
  try {
    for (let round = 0; round < rounds.length; round++) {
      const { to, from, q } = rounds[round]!;
      sends.push((await ctx.links.outLink(to)).send(FrameType.Barrier, seq, 0, undefined, 0, round));
      const f = await ctx.router.take(q, from, `barrier (collective #${seq}, round ${round})`);
      if (f.type !== FrameType.Barrier || f.arg !== round || f.length !== 0) {
        throw new CollectiveMismatchError(
          `collective #${seq}: rank ${r} called barrier, but rank ${from} called ${describeCall(f.type, f.aux, f.flags, f.arg)}`,
        );
      }
    }
    await Promise.all(sends);
  } finally {
    for (const { from } of rounds) ctx.router.dropCollQueue(from, seq);
  }
  ctx.stats.idleMs += performance.now() - t0;
}
