/**
 * send/recv: a message goes as data frames of at most chunkFloats on the sender's link to
 * `dest`, queued at the receiver by (source, tag). A send to oneself is queued directly.
 */
import { CollectiveMismatchError } from '../errors.ts';
import { sendRange, type CallContext } from './callFrames.ts';
import { FrameType } from './frame.ts';

export async function send(ctx: CallContext, buf: Float32Array, dest: number, tag: number): Promise<void> {
  const n = buf.length;
  if (dest === ctx.rank) {
    const payload = Buffer.from(new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength));
    ctx.router.p2pQueue(dest, tag).push({
      type: FrameType.P2P,
      flags: 0,
      arg: 0,
      seq: 0,
      tag,
      aux: n,
      length: payload.length,
      payload,
      check: 0,
      slot: false,
    });
    ctx.stats.bytes += payload.length;
    return;
  }
  // a lost peer of a star world (lostPeers.ts): this send fails with why, the world goes on
  const lost = () => ctx.router.lost.of(dest);
  if (lost()) throw lost();
  try {
    const out = await ctx.links.outLink(dest);
    const sends: Promise<void>[] = [];
    if (n === 0) sends.push(out.send(FrameType.P2P, tag, 0));
    else
      sendRange(
        ctx,
        out,
        sends,
        Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength),
        0,
        n,
        FrameType.P2P,
        tag,
        n,
        0,
        0,
      );
    await Promise.all(sends);
  } catch (err) {
    // a failed write to a star world's spoke is its loss, whichever of the write and the link's end is noticed first
    if (ctx.router.lost.tolerates(dest)) ctx.router.failOrLose(dest, err as Error);
    throw lost() ?? err;
  }
}

/**
 * Runs `body` once every earlier recv from (source, tag) has ended: one reader at a time, so
 * that a message's frames are never split between two recvs.
 */
export async function oneReaderAtATime(
  ctx: CallContext,
  source: number,
  tag: number,
  body: () => Promise<void>,
): Promise<void> {
  const key = `${source}/${tag}`;
  const before = ctx.recvLocks.get(key) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => {
    release = resolve;
  });
  const chain = before.then(() => mine);
  ctx.recvLocks.set(key, chain);
  try {
    await before;
    await body();
  } finally {
    release();
    if (ctx.recvLocks.get(key) === chain) ctx.recvLocks.delete(key);
  }
}

/** Receives one message from `source` with `tag` into `buf` (its length must match the message's). */
export async function recv(ctx: CallContext, buf: Float32Array, source: number, tag: number): Promise<void> {
  const q = ctx.router.p2pQueue(source, tag);
  const what = `recv of ${buf.length} floats with tag ${tag}`;
  let got = 0,
    total = -1;
  const t = performance.now();
  do {
    const f = await ctx.router.take(q, source, what);
    if (total < 0) {
      total = f.aux;
      ctx.stats.idleMs += performance.now() - t;
    }
    const m = f.length / 4;
    if (f.length % 4 !== 0 || f.aux !== total || got + m > total) {
      throw new CollectiveMismatchError(
        `rank ${source} sent a malformed message with tag ${tag} (frame of ${f.length} bytes in a message of ${total} floats)`,
      );
    }
    if (got < buf.length) {
      const src = new Float32Array(f.payload.buffer, f.payload.byteOffset, m);
      buf.set(src.subarray(0, Math.min(m, buf.length - got)), got);
    }
    ctx.engines.dataPath.putSlot(f.payload);
    got += m;
    if (source !== ctx.rank) ctx.stats.bytes += f.length;
  } while (got < total);
  if (total !== buf.length) {
    throw new CollectiveMismatchError(
      `rank ${ctx.rank}: recv from rank ${source} with tag ${tag} expected ${buf.length} floats, but the message has ${total}`,
    );
  }
}
