import { ownedSlice, type Communicator, type ReduceOp } from '../../src/comm/communicator.ts';

/**
 * G communicators in ONE thread for testing strategies: a collective resolves when every rank has
 * called it (in the same order), like the real transports, but with plain promises. Reductions sum
 * in rank order.
 */
export function localGroup(size: number): Communicator[] {
  let pending: { buf: Float32Array; resolve: () => void }[] = [];
  let kind = '', length = 0;
  const arrive = (rank: number, what: string, buf: Float32Array, complete: (bufs: Float32Array[]) => void) =>
    new Promise<void>((resolve) => {
      if (Object.keys(pending).length === 0) { kind = what; length = buf.length; }
      else if (kind !== what || length !== buf.length) throw new Error(`rank ${rank} called ${what}[${buf.length}] while others are in ${kind}[${length}]`);
      pending[rank] = { buf, resolve };
      if (Object.keys(pending).length < size) return;
      const all = pending;
      pending = [];
      complete(all.map((p) => p.buf));
      for (const p of all) p.resolve();
    });
  const reduce = (bufs: Float32Array[], op: ReduceOp) => {
    const out = new Float32Array(bufs[0]!.length);
    for (const b of bufs) for (let i = 0; i < out.length; i++) out[i] = out[i]! + b[i]!;
    if (op === 'mean') for (let i = 0; i < out.length; i++) out[i] = out[i]! / size;
    for (const b of bufs) b.set(out);
  };
  return Array.from({ length: size }, (_, rank): Communicator => ({
    rank, size,
    allreduce: (buf, op = 'sum') => arrive(rank, 'allreduce', buf, (bufs) => reduce(bufs, op)),
    reduceScatter: async (buf, op = 'sum') => { await arrive(rank, 'allreduce', buf, (bufs) => reduce(bufs, op)); return ownedSlice(buf.length, size, rank); },
    allgather: (buf) => arrive(rank, 'allgather', buf, (bufs) => {
      for (let r = 0; r < size; r++) { const { start, end } = ownedSlice(buf.length, size, r); for (const b of bufs) b.set(bufs[r]!.subarray(start, end), start); }
    }),
    broadcast: (buf, root) => arrive(rank, `broadcast${root}`, buf, (bufs) => { for (const b of bufs) b.set(bufs[root]!); }),
    barrier: () => arrive(rank, 'barrier', new Float32Array(0), () => {}),
    send: async () => { throw new Error('send is not simulated'); },
    recv: async () => { throw new Error('recv is not simulated'); },
    takeStats: () => ({ commMs: 0, waitMs: 0, bytes: 0 }),
  }));
}
