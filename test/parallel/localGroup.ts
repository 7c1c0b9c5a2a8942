import { ownedSlice, type Communicator, type ReduceOp } from '../../src/comm/communicator.ts';

/**
 * G communicators in ONE thread for testing strategies: a collective resolves when every rank has
 * called it (in the same order), like the real transports, but with plain promises. Reductions sum
 * in rank order. Point-to-point sends are buffered.
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
  // point to point: a send is buffered (a copy), a recv waits for the matching (source, dest, tag)
  const mail = new Map<string, Float32Array[]>(), waiting = new Map<string, ((data: Float32Array) => void)[]>();
  const post = (key: string, data: Float32Array) => {
    const w = waiting.get(key)?.shift();
    if (w) w(data); else mail.set(key, [...(mail.get(key) ?? []), data]);
  };
  const take = (key: string, deliver: (data: Float32Array) => void) => {
    const d = mail.get(key)?.shift();
    if (d) deliver(d); else waiting.set(key, [...(waiting.get(key) ?? []), deliver]);
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
    send: async (buf, dest, tag = 0) => post(`${rank}>${dest}#${tag}`, buf.slice()),
    recv: (buf, source, tag = 0) => new Promise<void>((resolve) => take(`${source}>${rank}#${tag}`, (data) => {
      if (data.length !== buf.length) throw new Error(`rank ${rank} receives ${buf.length} floats from ${source} (tag ${tag}) but ${data.length} were sent`);
      buf.set(data);
      resolve();
    })),
    takeStats: () => ({ commMs: 0, waitMs: 0, bytes: 0 }),
  }));
}
