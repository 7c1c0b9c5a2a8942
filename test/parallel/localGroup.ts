import { ownedSlice, type Communicator, type ReduceOp } from '../../src/comm/communicator.ts';

/**
 * G communicators in ONE thread for testing strategies: a collective resolves when every rank has
 * called it (in the same order), like the real transports, but with plain promises. Reductions sum
 * in rank order. Point-to-point messages are copied into per-(source, destination, tag) queues.
 */
export function localGroup(size: number): Communicator[] {
  const queues = new Map<string, Float32Array[]>();
  const waiting = new Map<string, ((data: Float32Array) => void)[]>();
  const send = async (buf: Float32Array, from: number, to: number, tag: number) => {
    const key = `${from}>${to}#${tag}`,
      copy = buf.slice(),
      w = waiting.get(key);
    if (w?.length) w.shift()!(copy);
    else queues.set(key, [...(queues.get(key) ?? []), copy]);
  };
  const recv = (buf: Float32Array, from: number, to: number, tag: number) =>
    new Promise<void>((resolve, reject) => {
      const key = `${from}>${to}#${tag}`;
      const take = (data: Float32Array) => {
        if (data.length !== buf.length)
          reject(new Error(`rank ${to} expected ${buf.length} values from rank ${from}, got ${data.length}`));
        else {
          buf.set(data);
          resolve();
        }
      };
      const q = queues.get(key);
      if (q?.length) take(q.shift()!);
      else waiting.set(key, [...(waiting.get(key) ?? []), take]);
    });
  // a rank's n-th collective meets the other ranks' n-th: a rank may start its next one (hybrid's
  // gradient buckets) before the others have joined the last, as with the real transports
  const slots = new Map<
    number,
    { what: string; length: number; pending: { buf: Float32Array; resolve: () => void }[] }
  >();
  const calls = new Array<number>(size).fill(0);
  const arrive = (rank: number, what: string, buf: Float32Array, complete: (bufs: Float32Array[]) => void) =>
    new Promise<void>((resolve) => {
      const n = calls[rank]!++;
      let slot = slots.get(n);
      if (!slot) slots.set(n, (slot = { what, length: buf.length, pending: [] }));
      else if (slot.what !== what || slot.length !== buf.length)
        throw new Error(
          `rank ${rank} called ${what}[${buf.length}] as its collective #${n}, others ${slot.what}[${slot.length}]`,
        );
      slot.pending[rank] = { buf, resolve };
      if (Object.keys(slot.pending).length < size) return;
      slots.delete(n);
      complete(slot.pending.map((p) => p.buf));
      for (const p of slot.pending) p.resolve();
    });
  const reduce = (bufs: Float32Array[], op: ReduceOp) => {
    const out = new Float32Array(bufs[0]!.length);
    for (const b of bufs) for (let i = 0; i < out.length; i++) out[i] = out[i]! + b[i]!;
    if (op === 'mean') for (let i = 0; i < out.length; i++) out[i] = out[i]! / size;
    for (const b of bufs) b.set(out);
  };
  return Array.from(
    { length: size },
    (_, rank): Communicator => ({
      rank,
      size,
      allreduce: (buf, op = 'sum') => arrive(rank, 'allreduce', buf, (bufs) => reduce(bufs, op)),
      reduceScatter: async (buf, op = 'sum') => {
        await arrive(rank, 'allreduce', buf, (bufs) => reduce(bufs, op));
        return ownedSlice(buf.length, size, rank);
      },
      allgather: (buf) =>
        arrive(rank, 'allgather', buf, (bufs) => {
          for (let r = 0; r < size; r++) {
            const { start, end } = ownedSlice(buf.length, size, r);
            for (const b of bufs) b.set(bufs[r]!.subarray(start, end), start);
          }
        }),
      broadcast: (buf, root) =>
        arrive(rank, `broadcast${root}`, buf, (bufs) => {
          for (const b of bufs) b.set(bufs[root]!);
        }),
      barrier: () => arrive(rank, 'barrier', new Float32Array(0), () => {}),
      send: (buf, dest, tag = 0) => send(buf, rank, dest, tag),
      recv: (buf, source, tag = 0) => recv(buf, source, rank, tag),
      takeStats: () => ({ commMs: 0, idleMs: 0, bytes: 0 }),
    }),
  );
}
